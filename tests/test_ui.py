"""`total-recall ui` as a real process: its guards over HTTP, and a real headless Chromium using it.

The browser test needs Chromium and its driver from the system packages (`.ci/run` installs them
and sets TOTAL_RECALL_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from helpers import cli, db_rows, env, wait_for, write_transcript

# Read at import, before the autouse isolation fixture drops every TOTAL_RECALL_* variable.
REQUIRE_BROWSER = bool(os.environ.get("TOTAL_RECALL_REQUIRE_BROWSER"))

PROJECT = "/home/dev/projects/atlas"
START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=1)
TURNS = [
    ("user", "We decided to store the atlas data in PostgreSQL 16 with logical replication."),
    ("assistant", "The frontend is built with React and Vite; tests run with Vitest."),
    ("user", "The flaky login test is caused by a race on the session cookie."),
    ("assistant", "We fixed the flaky login test by waiting for the session cookie before clicking."),
    ("user", "Todo: move the nightly backup job from cron to a systemd timer."),
]


@contextlib.contextmanager
def running_ui(isolated_home, path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "total_recall", "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("total-recall ui: http://127.0.0.1:"), (
            line,
            proc.stderr.read() if proc.poll() else "",
        )
        url = line.split(": ", 1)[1].strip()
        yield {"url": url, "base": url.split("/?")[0], "db": isolated_home / "memory.db", "transcript": path}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def ui(tmp_path, isolated_home):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "ui-sess.jsonl"
    write_transcript(path, TURNS, cwd=PROJECT, start=START, session="ui-sess")
    cli("backfill", str(path), "--wait")
    with running_ui(isolated_home, path) as running:
        yield running


def _status(url: str, *, method: str = "GET", headers: dict | None = None, data: bytes | None = None) -> int:
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _idea(text: str) -> tuple[int, int] | None:
    """(id, pinned) of the first idea that says `text`, in the memory store in use."""
    rows = db_rows("SELECT id, pinned FROM ideas WHERE content LIKE ? ORDER BY id LIMIT 1", (f"%{text}%",))
    return rows[0] if rows else None


PATHS = [
    "/",
    "/search?q=backup",
    "/memory/1",
    "/memory/1/forget",
    "/session/ui-sess",
    "/entity/1",
    "/graph",
    "/review",
    "/api/search?q=backup",
    "/api/memory/1",
    "/api/graph",
    "/static/app.css",
    "/static/vendor/cytoscape.min.js",
    "/no-such-page",
]


def test_without_the_token_every_page_and_api_answers_401_or_403(ui):
    base, token = ui["base"], ui["url"].split("token=")[1]
    for path in PATHS:
        assert _status(base + path) == 401, path
        assert _status(base + path, headers={"Cookie": f"total_recall_0=x; other={token[:5]}"}) == 401, path
    for path in ("/memory/1/pin", "/memory/1/forget", "/memory/1/edit", "/review/1/apply"):
        assert _status(base + path, method="POST", data=b"confirm=yes") == 401, path
    port = base.rsplit(":", 1)[1]
    cookie = {"Cookie": f"total_recall_{port}={token}"}
    assert _status(base + "/", headers=cookie) == 200
    # DNS rebinding: the right cookie under another host name is refused.
    assert _status(base + "/", headers={**cookie, "Host": f"attacker.example:{port}"}) == 403
    assert _status(base + f"/?token={token}", headers={"Host": f"attacker.example:{port}"}) == 403
    # Cross-site POSTs: a foreign Origin, or no CSRF token, change nothing.
    idea_id, _ = _idea("PostgreSQL")
    form = {**cookie, "Content-Type": "application/x-www-form-urlencoded"}
    assert (
        _status(
            f"{base}/memory/{idea_id}/pin",
            method="POST",
            data=b"csrf=x",
            headers={**form, "Origin": "http://attacker.example"},
        )
        == 403
    )
    assert _status(f"{base}/memory/{idea_id}/pin", method="POST", data=b"csrf=wrong", headers=form) == 403
    assert _status(f"{base}/memory/{idea_id}/forget", method="POST", data=b"confirm=yes", headers=form) == 403
    assert _idea("PostgreSQL") == (idea_id, 0)
    assert _status(f"{base}/memory/{idea_id}/pin", headers=cookie) == 405  # GET never changes anything


def _post(ui: dict, path: str, form: dict) -> int:
    from urllib.parse import urlencode

    port = ui["base"].rsplit(":", 1)[1]
    return _status(
        ui["base"] + path,
        method="POST",
        data=urlencode(form).encode(),
        headers={
            "Cookie": f"total_recall_{port}={ui['url'].split('token=')[1]}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": ui["base"],
        },
    )


def _get(ui: dict, path: str) -> tuple[int, str]:
    port = ui["base"].rsplit(":", 1)[1]
    request = urllib.request.Request(
        ui["base"] + path, headers={"Cookie": f"total_recall_{port}={ui['url'].split('token=')[1]}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_line_found_by_its_words_is_shown_as_what_it_is_in_the_search_page(tmp_path, isolated_home, store):
    """A search result that is a line of the conversation, not a memory (here a tool's output),
    is shown as "tool output" with its file:line and session, and links to no memory page: it once
    broke the page (500) because the memory row wanted a confidence the line does not have. The
    session page of a session with no topics lists its lines (it was a 404)."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "ui-tool.jsonl"
    write_transcript(path, TURNS[:1], cwd=PROJECT, start=START, session="ui-tool")
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "redis-cli ping"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Could not connect: ECONNREFUSED"}
    stamp = (START + timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    base = {"sessionId": "ui-tool", "cwd": PROJECT, "timestamp": stamp}
    with path.open("a") as fh:
        fh.write(
            json.dumps(
                {**base, "type": "assistant", "message": {"id": "m9", "role": "assistant", "content": [call]}}
            )
            + "\n"
        )
        fh.write(
            json.dumps({**base, "type": "user", "message": {"role": "user", "content": [result]}}) + "\n"
        )
    # A session of tool output only: no memory and no topic is drawn from it.
    bare = path.with_name("ui-bare.jsonl")
    bare.write_text("".join(path.read_text().splitlines(keepends=True)[1:]).replace("ui-tool", "ui-bare"))
    cli("backfill", str(path), "--wait")
    cli("backfill", str(bare), "--wait")
    with running_ui(isolated_home, path) as running:
        status, page = _get(running, "/search?q=ECONNREFUSED")
        session_status, session_page = _get(running, "/session/ui-bare")
    assert status == 200, page[-2000:]
    assert 'data-kind="message"' in page and 'badge i-message">tool output' in page
    line = page.split('data-kind="message"', 1)[1].split("</li>", 1)[0]
    assert f"{path}:3</code>" in line and "/session/ui-tool" in line and "/memory/" not in line
    # Its session page lists its lines, as what they are (it was a 404: no topics).
    assert session_status == 200, session_page[-2000:]
    assert 'badge i-message">tool output' in session_page and "ECONNREFUSED" in session_page
    assert cli("topics", "ui-bare").stdout.startswith("No topics for session ui-bare: no memory was drawn")


def test_a_text_said_at_two_lines_is_one_result_naming_both_in_the_search_page(tmp_path, isolated_home):
    """The same long text at two lines (an error pasted twice) is one result, and the page names
    the second place after the first (search.DUPLICATE_SHARE, I103)."""
    error = (
        "ERROR worker-7 psycopg.OperationalError: connection to server at 10.0.4.12 port 5432 failed: "
        "FATAL remaining connection slots are reserved for roles with the SUPERUSER attribute while "
        "the nightly ledger export was still holding its pool"
    )
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "ui-twin.jsonl"
    turns = [("user", error), ("assistant", "Raise max_connections?"), ("user", error)]
    write_transcript(path, turns, cwd=PROJECT, start=START, session="ui-twin")
    cli("backfill", str(path), "--wait")
    with running_ui(isolated_home, path) as running:
        status, page = _get(running, "/search?q=remaining+connection+slots+ledger+export")
    assert status == 200, page[-2000:]
    items = [
        item.split("</li>", 1)[0]
        for item in page.split('<li class="result')[1:]
        if "connection slots are" in item.split("</li>", 1)[0] and 'data-kind="span"' not in item[:80]
    ]
    assert len(items) == 1 and f"also at <code>{path}:" in items[0]


def test_edit_review_topics_and_graph_through_the_library_functions(tmp_path, isolated_home, store):
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas"
    first = write_transcript(
        folder / "s1.jsonl",
        [("user", "We decided to use MySQL for the orders database.")],
        cwd=PROJECT,
        start=START - timedelta(days=3),
        session="s1",
    )
    cli("backfill", str(first), "--wait")
    old = _idea("use MySQL")[0]
    cli("pin", str(old))
    second = write_transcript(
        folder / "s2.jsonl",
        [("user", "We switched from MySQL to Postgres for the orders database.")],
        cwd=PROJECT,
        start=START,
        session="s2",
    )
    with second.open("a", encoding="utf-8") as fh:  # the session's title, as Claude Code writes it
        fh.write(json.dumps({"type": "ai-title", "sessionId": "s2", "aiTitle": "Orders <db> move"}) + "\n")
        link = {"prNumber": 7, "prUrl": "https://github.com/acme/shop/pull/7", "prRepository": "acme/shop"}
        fh.write(json.dumps({"type": "pr-link", "sessionId": "s2", **link}) + "\n")  # the PR it opened
    cli("backfill", str(second), "--wait")
    with running_ui(isolated_home, second) as ui:
        status, page = _get(ui, "/")
        csrf = page.split('name="csrf-token" content="')[1].split('"')[0]
        status, page = _get(ui, "/review")
        assert status == 200 and "switched from MySQL" in page
        pending = json.loads(cli("review", "--json").stdout)
        proposal = pending[0]["id"]
        assert _post(ui, f"/review/{proposal}/apply", {"csrf": csrf}) == 303
        assert json.loads(cli("review", "--json").stdout) == []
        pins = _idea("use MySQL")[1], _idea("switched from MySQL")[1]
        assert pins == (0, 1), pending
        new = _idea("switched from MySQL")[0]
        status, page = _get(ui, f"/memory/{new}")
        assert "Evolution" in page and f"/memory/{old}" in page  # the chain: MySQL, then Postgres
        assert (
            _post(ui, f"/memory/{old}/edit", {"csrf": csrf, "text": "We used MySQL for orders until March."})
            == 303
        )
        assert _idea("until March")[0] == old
        assert _post(ui, f"/memory/{old}/edit", {"csrf": csrf, "text": "  "}) == 400  # refused, nothing lost
        assert _idea("until March")[0] == old
        status, page = _get(ui, "/session/s2")
        assert status == 200 and "switched from MySQL" in page
        assert "<h1>Session <code>s2</code> — Orders &lt;db&gt; move</h1>" in page  # titled, escaped
        pr = '<a href="https://github.com/acme/shop/pull/7" rel="noreferrer noopener">PR #7</a>'
        assert f"opened {pr}" in page  # and the pull request it opened, linked
        status, page = _get(ui, "/search?q=switched+from+MySQL+to+Postgres")
        assert status == 200 and "session Orders &lt;db&gt; move" in page  # each result names its session
        assert f" · {pr}" in page
        status, body = _get(ui, "/api/graph")
        graph = json.loads(body)
        assert "MySQL" in {n["name"] for n in graph["nodes"]}
        status, body = _get(ui, "/search?q=%3Cscript%3Ealert(1)%3C/script%3E")
        assert status == 200 and "<script>alert(1)" not in body  # every value is escaped


def test_without_a_database_the_ui_says_how_to_set_up(isolated_home):
    done = cli("ui", "--no-open", check=False, timeout=60)
    assert done.returncode == 1 and "total-recall up" in done.stderr
    assert not (isolated_home / "memory.db").exists()


def _chromium():
    for browser in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(browser) and shutil.which("chromedriver"):
            return shutil.which(browser), shutil.which("chromedriver")
    if REQUIRE_BROWSER:
        pytest.fail("Chromium and chromedriver are required here (apt-get install chromium chromium-driver)")
    pytest.skip("no system Chromium/chromedriver (apt-get install chromium chromium-driver)")


@pytest.fixture
def browser():
    binary, driver_path = _chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download anything
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def test_search_open_pin_and_forget_in_a_real_browser(ui, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 20)
    browser.get(ui["url"])
    wait.until(lambda driver: "token=" not in driver.current_url)  # the token went into a cookie
    assert browser.find_element(By.TAG_NAME, "h1").text == "Timeline"
    assert "nightly backup job" in browser.find_element(By.CLASS_NAME, "timeline").text

    box = browser.find_element(By.CSS_SELECTOR, "form.quick input[name=q]")
    box.send_keys("which database did we choose", Keys.ENTER)
    first = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#results li.result a.content")))
    assert "PostgreSQL" in first.text
    first.click()

    wait.until(ec.presence_of_element_located((By.ID, "memory-content")))
    assert "PostgreSQL" in browser.find_element(By.ID, "memory-content").text
    assert f"{ui['transcript']}:1" in browser.find_element(By.CLASS_NAME, "source").text
    assert browser.find_element(By.ID, "pinned-state").text == "not pinned"
    browser.find_element(By.ID, "pin-button").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "notice"), "pinned"))
    assert browser.find_element(By.ID, "pinned-state").text.lower() == "pinned"
    assert _idea("PostgreSQL")[1] == 1

    browser.get(ui["base"] + "/search?q=nightly+backup+cron")
    target = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#results li.result a.content")))
    assert "systemd timer" in target.text
    forgotten = _idea("systemd timer")[0]
    target.click()
    browser.find_element(By.ID, "forget-link").click()
    assert "systemd timer" in wait.until(ec.presence_of_element_located((By.ID, "forget-preview"))).text
    assert _idea("systemd timer") is not None  # the preview changed nothing
    browser.find_element(By.ID, "confirm-forget").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "notice"), f"#{forgotten} was forgotten"))
    assert _idea("systemd timer") is None
    browser.get(ui["base"] + "/search?q=nightly+backup+cron")
    ids = [e.get_attribute("data-id") for e in browser.find_elements(By.CSS_SELECTOR, "#results li.result")]
    assert str(forgotten) not in ids
    browser.get(f"{ui['base']}/memory/{forgotten}")
    assert "no memory with id" in browser.find_element(By.CLASS_NAME, "error").text

    browser.get(ui["base"] + "/graph")
    graph = wait.until(lambda d: d.find_element(By.ID, "graph").get_attribute("data-ready"))
    assert int(graph) >= 2  # the vendored Cytoscape.js ran under the page's CSP and drew the entities


def test_the_browser_is_started_without_the_token_and_still_gets_in(tmp_path, isolated_home, browser):
    """Every user can read a process's command line and connect to 127.0.0.1: the browser `ui`
    starts is given a file only the user can read, which sends it on with the token."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "ui-sess.jsonl"
    write_transcript(path, TURNS, cwd=PROJECT, start=START, session="ui-sess")
    cli("backfill", str(path), "--wait")
    given = tmp_path / "browser-argv"
    recorder = tmp_path / "browser"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {given}\n', encoding="utf-8")
    recorder.chmod(0o700)
    proc = subprocess.Popen(
        [sys.executable, "-m", "total_recall", "ui"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env(), "DISPLAY": ":99", "BROWSER": f"{recorder} %s"},
    )
    try:
        token = proc.stdout.readline().split("token=")[1].strip()
        wait_for(lambda: given.exists() and given.read_text(encoding="utf-8").strip(), timeout=60)
        argv = given.read_text(encoding="utf-8").strip()
        assert token not in argv
        opener = isolated_home / argv.removeprefix("file://").rpartition("/")[2]
        assert argv == opener.as_uri()
        assert oct(opener.stat().st_mode & 0o777) == "0o600"
        browser.get(argv)
        WebDriverWait(browser, 20).until(lambda driver: driver.current_url.startswith("http://127.0.0.1:"))
        WebDriverWait(browser, 20).until(lambda driver: "token=" not in driver.current_url)
        assert browser.find_element(By.TAG_NAME, "h1").text == "Timeline"
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl+C, as the printed line says
        proc.wait(timeout=10)
    assert not opener.exists()
