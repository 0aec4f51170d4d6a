"""Wall time of the installed Stop hook against the bare interpreter floor, alternating A/B.

    python bench/hook_cost.py [-n 200]

`total-recall install` writes the hooks into a temporary CLAUDE_CONFIG_DIR; the Stop command is
read back from its settings.json and run with `sh -c`, as Claude Code runs it, with realistic Stop
stdin JSON for a real transcript and an existing database (the row lands in work_queue). The floor
is `<same python> -I -S -c "import json, sqlite3"`, also through `sh -c` so both pay the same shell
start. Runs alternate hook/floor so drift on a shared machine hits both alike.

Two series: with no other connection to the database (no daemon: the hook's close is the last one,
so SQLite checkpoints the WAL into the database and deletes it, ~10 ms of writes), and with the
database held open by this process as the running daemon holds it (the usual case: the WAL stays
and the commit only appends to it).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import locomo  # noqa: E402

STOP_MESSAGE = (
    "Done. I moved the vector store to sqlite-vec, added the migration test and updated "
    "DESIGN.md; the full suite passes (212 passed, 4 skipped)."
)


def stop_command(box: harness.Sandbox) -> str:
    """The Stop hook command exactly as `total-recall install` wrote it into settings.json."""
    box.cli("init", "--json")
    box.cli("install", "--json")
    settings = json.loads((box.claude / "settings.json").read_text())
    return settings["hooks"]["Stop"][0]["hooks"][0]["command"]


def stop_input(box: harness.Sandbox) -> bytes:
    """Stop hook stdin for a 40-turn transcript, as Claude Code sends it."""
    session = "3f1c9a52-7d4e-4b8a-9c1e-2a6b5d8e0f17"
    cwd = "/home/dev/projects/demo"
    path = box.claude / "projects" / locomo.project_dir_name(cwd) / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = locomo.FALLBACK_START
    lines = [
        json.dumps(
            locomo.record(
                "user" if i % 2 == 0 else "assistant",
                f"turn {i}: " + STOP_MESSAGE,
                session=session,
                cwd=cwd,
                when=start + i * locomo.TURN_STEP,
                key=f"hook/{i}",
            )
        )
        for i in range(40)
    ]
    path.write_text("\n".join(lines) + "\n")
    payload = {
        "session_id": session,
        "transcript_path": str(path),
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": STOP_MESSAGE,
    }
    return json.dumps(payload).encode()


def interpreter(command: str) -> str:
    """The Python the hook command runs (after any VAR=value prefix), so the floor uses the same one."""
    return next(word for word in shlex.split(command) if "=" not in word)


def run_once(command: str, stdin: bytes, env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(
        ["sh", "-c", command],
        input=stdin,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started


def measure(n: int) -> dict:
    with harness.Sandbox() as box:
        hook, payload = stop_command(box), stop_input(box)
        floor = shlex.join([interpreter(hook), "-I", "-S", "-c", "import json, sqlite3"])
        env = box.env()
        for _ in range(3):  # page cache and pyc warm-up, not counted
            run_once(hook, payload, env), run_once(floor, b"", env)
        times: dict[str, list[float]] = {"hook": [], "floor": [], "held hook": [], "held floor": []}
        for _ in range(n):
            times["hook"].append(run_once(hook, payload, env))
            times["floor"].append(run_once(floor, b"", env))
        # As when the daemon runs: another connection keeps the database open, so the hook's
        # close is not the last one and neither checkpoints nor deletes the WAL.
        holder = _hold(box.db_path)
        try:
            for _ in range(n):
                times["held hook"].append(run_once(hook, payload, env))
                times["held floor"].append(run_once(floor, b"", env))
        finally:
            holder.close()
        queued = _queued(box.db_path)
    return {
        "n": n,
        **{name: harness.p50_p95(values) for name, values in times.items()},
        "command": hook.replace(str(box.root), "<tmp>"),
        "floor_command": floor,
        "queued_rows": queued,
    }


def _hold(db_path: Path):
    import sqlite3

    conn = sqlite3.connect(db_path)
    conn.execute("SELECT count(*) FROM work_queue").fetchone()
    return conn


def _queued(db_path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("SELECT count(*) FROM work_queue WHERE event = 'Stop'").fetchone()[0]
    finally:
        conn.close()


def render(result: dict) -> str:
    (h50, h95), (f50, f95) = result["hook"], result["floor"]
    (d50, d95), (g50, g95) = result["held hook"], result["held floor"]
    return "\n".join(
        [
            "## hook cost (Stop hook via sh -c, alternating with the floor)",
            f"hook command:  {result['command']}",
            f"floor command: {result['floor_command']}",
            f"rows the hook queued: {result['queued_rows']} (expected {2 * result['n'] + 3})",
            harness.table(
                ["command", "runs", "p50", "p95"],
                [
                    ["installed Stop hook, no daemon", result["n"], harness.ms(h50), harness.ms(h95)],
                    ["python -I -S -c 'import json, sqlite3'", result["n"], harness.ms(f50), harness.ms(f95)],
                    [
                        "installed Stop hook, database held open",
                        result["n"],
                        harness.ms(d50),
                        harness.ms(d95),
                    ],
                    ["python -I -S -c 'import json, sqlite3'", result["n"], harness.ms(g50), harness.ms(g95)],
                ],
            ),
            f"ratio of medians, no daemon (the hook's close checkpoints and deletes the WAL): "
            f"{h50 / f50:.2f}x; difference {harness.ms(h50 - f50)}",
            f"ratio of medians, database held open as by the running daemon: {d50 / g50:.2f}x "
            f"(target <= 1.20x); difference {harness.ms(d50 - g50)}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="runs of each command")
    args = parser.parse_args(argv)
    harness.quiet()
    print(render(measure(args.n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
