"""Screenshots of the web view for the README: the timeline, a memory page and the entity graph.

    python bench/ui_screenshots.py [--out docs/screenshots]

Builds a small demo memory from four made-up Claude Code sessions of one project (indexed by the
real pipeline, offline extractor, packaged model), starts `total-recall ui`, and photographs it
with the system's headless Chromium (Debian: apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from ui_latency import start_ui  # noqa: E402

CWD = "/home/dev/projects/atlas"
SESSIONS = [
    (
        5,
        [
            (
                "user",
                "Let's put a reverse proxy in front of the atlas API. We'll use nginx with certbot for TLS.",
            ),
            (
                "assistant",
                "I configured nginx as the reverse proxy in front of the FastAPI app; certbot renews the "
                "certificates from a cron job.",
            ),
            (
                "user",
                "We decided to run the API with uvicorn workers under gunicorn, four workers per container.",
            ),
            ("assistant", "Decision: user sessions live in Redis with a 24 hour TTL."),
            ("user", "Todo: add rate limiting to the public endpoints before the beta."),
        ],
    ),
    (
        4,
        [
            ("user", "The deploy failed: nginx returns 502 Bad Gateway after the upgrade."),
            (
                "assistant",
                "The 502 was caused by gunicorn binding to a Unix socket that nginx could not read.",
            ),
            (
                "assistant",
                "Fixed the 502 by running gunicorn on 127.0.0.1:8000 and pointing nginx at that port.",
            ),
            ("user", "Should we move the Postgres backups to S3?"),
        ],
    ),
    (
        2,
        [
            (
                "user",
                "Certificate renewal with certbot keeps breaking. We switched from nginx to Caddy for TLS "
                "because Caddy renews certificates by itself.",
            ),
            (
                "assistant",
                "I replaced the nginx config with a Caddyfile; Caddy proxies to uvicorn on port 8000.",
            ),
            ("user", "We decided to keep the Postgres backups in S3 with a 30 day lifecycle rule."),
            ("assistant", "Conclusion: the Caddy setup removes certbot and its cron job entirely."),
        ],
    ),
    (
        1,
        [
            (
                "user",
                "For rate limiting we use slowapi on the FastAPI routes, "
                "100 requests per minute per API key.",
            ),
            (
                "assistant",
                "Problem: the Redis session store loses every session when the container restarts.",
            ),
            (
                "assistant",
                "Solution: enable Redis AOF persistence with appendfsync everysec in the Redis config.",
            ),
            ("user", "Todo: write the runbook for restoring Postgres from the S3 backups."),
        ],
    ),
]


def write_sessions(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    paths = []
    for days_ago, turns in SESSIONS:
        session = str(uuid.uuid4())
        start = (now - timedelta(days=days_ago)).replace(hour=9, minute=30)
        path = folder / f"{session}.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for i, (role, text) in enumerate(turns):
                fh.write(json.dumps(_record(role, text, session, start + timedelta(minutes=4 * i))) + "\n")
        paths.append(path)
    return paths


def _record(role: str, text: str, session: str, when: datetime) -> dict:
    base = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": session,
        "version": "2.1.39",
        "gitBranch": "main",
        "uuid": str(uuid.uuid4()),
        "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    }
    if role == "user":
        return {**base, "type": "user", "message": {"role": "user", "content": text}}
    return {
        **base,
        "type": "assistant",
        "message": {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-demo",
            "content": [{"type": "text", "text": text}],
            "stop_reason": None,
        },
    }


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if not (binary and driver_path):
        raise SystemExit("needs Chromium and chromedriver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver_path), options=options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(harness.REPO / "docs" / "screenshots"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    harness.quiet()
    with harness.Sandbox() as box:
        folder = box.claude / "projects" / "-home-dev-projects-atlas"
        write_sessions(folder)
        box.cli("backfill", str(folder), "--wait")
        box.cli(
            "note",
            "The staging server is rebuilt from the Caddyfile and docker-compose.yml in infra/",
            "--intent",
            "context",
            "--project",
            CWD,
        )
        from total_recall import db as dbmod

        database = dbmod.connect(box.db_path)
        caddy = database.scalar("SELECT id FROM ideas WHERE content LIKE '%switched from nginx to Caddy%'")
        _typical_paths(database, str(folder))
        database.close()
        box.cli("pin", str(caddy))
        proc, base, cookie = start_ui(box)
        driver = browser(1200, 860)
        try:
            driver.get(f"{base}/?token={cookie.split('=', 1)[1]}")
            _shot(driver, f"{base}/", out / "timeline.png")
            _shot(driver, f"{base}/memory/{caddy}", out / "memory.png")
            driver.get(f"{base}/graph")
            deadline = time.monotonic() + 20
            while (
                not driver.find_element("id", "graph").get_attribute("data-ready")
                and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            time.sleep(0.5)
            driver.save_screenshot(str(out / "graph.png"))
        finally:
            driver.quit()
            harness.stop(proc)
    for name in ("timeline", "memory", "graph"):
        print(f"{out / (name + '.png')}: {(out / (name + '.png')).stat().st_size / 1024:.0f} KB")
    return 0


def _typical_paths(database, folder: str) -> None:
    """Show the transcripts where Claude Code keeps them, not in this run's temporary folder."""
    typical = "/home/dev/.claude/projects/-home-dev-projects-atlas"
    with database.write():
        for table in ("spans", "index_state"):
            database.execute(
                f"UPDATE {table} SET source_file = replace(source_file, ?, ?)", (folder, typical)
            )
        database.execute("UPDATE files SET path = replace(path, ?, ?)", (folder, typical))


def _shot(driver, url: str, path: Path) -> None:
    driver.get(url)
    time.sleep(0.3)
    driver.save_screenshot(str(path))


if __name__ == "__main__":
    raise SystemExit(main())
