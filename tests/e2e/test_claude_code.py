"""End to end through the real Claude Code CLI, for both install routes.

The pinned CLI (cli_version.txt) is installed from the npm registry once into a cache folder and
runs headless (`claude -p`) against the fake Anthropic server (tests/fake_anthropic.py), with HOME,
CLAUDE_CONFIG_DIR and TOTAL_RECALL_HOME in a pytest tmp folder and our daemon running as a real
process. No hook payload or transcript is written here: Claude Code writes them, its hooks run our
shims, and what the model would see is read from the requests the fake received.

Each route ("settings": `total-recall install`; "plugin": `claude plugin marketplace add` +
`claude plugin install`) gets one home, one daemon and one fake, shared by its scenarios. The plugin
route and the older TodoWrite tool repeat the same scenarios through another door: they are marked
slow, so the fast suite (`-m "not slow"`) runs every scenario once and the full suite runs them all.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO
from fake_anthropic import FakeAnthropic, deferred_tools, tool_names, tool_results
from helpers import cli, cli_json, db_rows, git_repository, start_daemon, wait_for
from total_recall import config

pytestmark = pytest.mark.e2e

E2E = Path(__file__).resolve().parent
CLI_PACKAGE = "@anthropic-ai/claude-code"
CLI_VERSION = (E2E / "cli_version.txt").read_text(encoding="utf-8").strip()
# Read at import: the autouse isolated_home fixture drops every TOTAL_RECALL_* variable per test.
CLI_CACHE = Path(os.environ.get("TOTAL_RECALL_E2E_CACHE") or Path.home() / ".cache" / "total-recall-e2e")
REQUIRE_NPM = bool(os.environ.get("TOTAL_RECALL_REQUIRE_NPM"))  # .ci/run sets it where it can install npm
ROUTES = ("settings", pytest.param("plugin", marks=pytest.mark.slow))
# Our MCP server's tools as Claude Code names them: user scope (install) or bundled by the plugin.
MCP_SERVERS = ("mcp__total-recall", "mcp__plugin_total-recall_total-recall")
MCP_SEARCH = r"^mcp__(plugin_total-recall_)?total-recall__search$"
SEARCHABLE_WITHIN = 10  # seconds from the end of a session (issue 18)

DECISION = "We decided to use PostgreSQL for the job queue because it already stores the orders."
SECRET = "ghp_Zq8Wm3Xr5Tn7Yv2Bk4Hd6Jf9Lp1Gs0Ce3Ua5"
TODOS = ["Tag the 2.0 release in git", "Announce the 2.0 release on the mailing list"]
# What the model adds to each in a TaskCreate: the first says more than its subject, the second not.
DESCRIPTIONS = ["Create the v2.0 tag on main and push it.", "Announce the release on the list."]
TODO_TOOLS = ("TodoWrite", "TaskCreate", "TaskUpdate")
SUBAGENT_TOOLS = ("Task", "Agent")  # the subagent launcher, as 2.0.x and 2.1.x name it
WORKFLOW_TOOLS = ("Workflow",)  # a script of subagents, run in the background (2.1.332)


# --- the CLI ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    npm = shutil.which("npm")
    if npm is None and REQUIRE_NPM:
        pytest.fail(f"npm is required here to install {CLI_PACKAGE}@{CLI_VERSION} (apt-get install npm)")
    if npm is None:
        pytest.skip(
            f"npm is not installed; the e2e tests install {CLI_PACKAGE}@{CLI_VERSION} with it "
            "(`apt-get install npm`; .ci/run does this)"
        )
    return install_cli(npm, CLI_CACHE / CLI_VERSION)


def install_cli(npm: str, prefix: Path) -> Path:
    """The pinned CLI under `prefix`, installed from the npm registry on first use.

    The lock keeps parallel runs from installing into one folder at once; the marker is written
    only after a complete install, so an interrupted one is redone rather than trusted.
    """
    binary = prefix / "node_modules" / ".bin" / "claude"
    marker = prefix / ".installed"
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix.with_name(prefix.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            package = f"{CLI_PACKAGE}@{CLI_VERSION}"
            args = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", package]
            proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"npm install {package} failed:\n{proc.stderr[-3000:]}"
            marker.write_text(CLI_VERSION, encoding="utf-8")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith(CLI_VERSION), f"{binary} says {version!r}, expected {CLI_VERSION}"
    return binary


# --- one route: home, install, daemon, fake -------------------------------------------------------


@dataclass
class Session:
    """What one `claude -p` run left behind."""

    id: str
    transcript: Path
    result: str


@dataclass
class ClaudeCode:
    route: str
    binary: Path
    fake: FakeAnthropic
    root: Path
    ours: dict[str, str] = field(default_factory=dict)  # our environment: homes, PATH with `total-recall`
    sessions: int = 0

    @property
    def claude_dir(self) -> Path:
        return Path(self.ours["CLAUDE_CONFIG_DIR"])

    @property
    def home(self) -> Path:
        return Path(self.ours["TOTAL_RECALL_HOME"])

    def project(self, name: str) -> Path:
        path = self.root / "projects" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def env(self, tasks: bool = True) -> dict[str, str]:
        """Claude Code's environment: ours, the fake as its API, nothing that phones home.

        Since 2.1.x the CLI offers TaskCreate/TaskUpdate; `tasks=False` makes it offer TodoWrite,
        as older versions did.
        """
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE_", "TOTAL_RECALL_"))
        }
        switch = {} if tasks else {"CLAUDE_CODE_ENABLE_TASKS": "false"}
        return {
            **inherited,
            **self.ours,
            "ANTHROPIC_BASE_URL": self.fake.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-e2e",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # Our MCP server starts a Python interpreter; on a loaded 2-core CI box that can take
            # longer than the CLI's default wait, and then it silently offers no tools.
            "MCP_TIMEOUT": "60000",
            # In print mode the CLI may send the first request before MCP servers connect (their
            # tools then arrive a turn late); "false" makes it wait for them, up to MCP_TIMEOUT.
            "MCP_CONNECTION_NONBLOCKING": "false",
            **switch,
        }

    def claude(self, *args: str, cwd: Path | None = None, timeout: float = 120, tasks: bool = True) -> str:
        proc = subprocess.run(
            [str(self.binary), *args],
            cwd=cwd or self.root,
            env=self.env(tasks),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, (
            f"claude {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )
        return proc.stdout

    def session(self, prompt: str, project: Path, *extra: str, tasks: bool = True) -> Session:
        """One headless session (or turn, with --continue); the tools it may use need no prompt.
        `tasks=False`: the CLI offers TodoWrite instead of TaskCreate/TaskUpdate."""
        self.sessions += 1
        debug = self.root / "claude-debug" / f"{self.sessions:02d}.txt"  # hooks, MCP, API: read on failure
        allowed = ",".join(TODO_TOOLS + SUBAGENT_TOOLS + WORKFLOW_TOOLS + MCP_SERVERS)
        out = self.claude(
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            allowed,
            "--debug-file",
            str(debug),
            *extra,
            cwd=project,
            tasks=tasks,
        )
        result = json.loads(out)
        [transcript] = self.claude_dir.glob(f"projects/*/{result['session_id']}.jsonl")
        return Session(result["session_id"], transcript, result.get("result", ""))


def install_settings(cc: ClaudeCode) -> None:
    cli("install")


def install_plugin(cc: ClaudeCode) -> None:
    cc.claude("plugin", "marketplace", "add", str(repository_copy(cc.root / "repo")))
    cc.claude("plugin", "install", "total-recall@total-recall")


def repository_copy(target: Path) -> Path:
    """The repository's files as a clone has them. Claude Code copies a plugin's source folder
    whole into its cache, and a developer's virtualenvs and caches are no part of the plugin."""
    # "out": bench/out, the benchmarks' cached databases (gigabytes; a running bench daemon's socket
    # there cannot be copied at all).
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info", "build", "out"
    )
    shutil.copytree(REPO, target, ignore=ignore)
    return target


INSTALLS = {"settings": install_settings, "plugin": install_plugin}


@pytest.fixture(scope="module", params=ROUTES)
def claude_code(request, claude_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"e2e-{request.param}")
    ours = {
        "HOME": str(root / "home"),
        "CLAUDE_CONFIG_DIR": str(root / "home" / ".claude"),
        "TOTAL_RECALL_HOME": str(root / "tr-home"),
        # The plugin's .mcp.json and the skills run `total-recall` from PATH.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    Path(ours["CLAUDE_CONFIG_DIR"]).mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp, FakeAnthropic() as fake:
        for name, value in ours.items():
            mp.setenv(name, value)
        cc = ClaudeCode(request.param, claude_bin, fake, root, ours)
        cli("init")
        INSTALLS[cc.route](cc)
        daemon = start_daemon(root / "daemon.log")
        try:
            wait_for(lambda: config.paths().socket.exists(), timeout=60)
            yield cc
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)


@pytest.fixture
def cc(claude_code, isolated_home, monkeypatch) -> ClaudeCode:
    """The route, with our commands pointed at its home (isolated_home points them at the test's)."""
    for name, value in claude_code.ours.items():
        monkeypatch.setenv(name, value)
    return claude_code


# --- scenarios ----------------------------------------------------------------------------------


def within(seconds: float, probe, explain):
    """probe()'s first true value within `seconds`; else fail with explain()."""
    try:
        return wait_for(probe, timeout=seconds, interval=0.2)
    except AssertionError:
        raise AssertionError(f"not within {seconds} s: {explain()}") from None


def search(cc: ClaudeCode, query: str, project: Path) -> list[dict]:
    return cli_json("search", query, cwd=str(project))


def decision_hit(cc: ClaudeCode, session: Session) -> dict | None:
    return next(
        (
            r
            for r in search(cc, "job queue database", cc.project("shop"))
            if r["kind"] == "idea"
            and r["intent"] == "decision"
            and "PostgreSQL" in r["content"]
            and r["source_file"] == str(session.transcript)
        ),
        None,
    )


def daemon_log_tail(cc: ClaudeCode) -> str:
    return (cc.root / "daemon.log").read_text(encoding="utf-8", errors="replace")[-2000:]


@pytest.fixture(scope="module")
def decision(claude_code) -> Session:
    """A session in project "shop" whose user states a decision."""
    claude_code.fake.script(DECISION, ["Noted: PostgreSQL backs the job queue from now on."])
    return claude_code.session(DECISION, claude_code.project("shop"))


def test_a_decision_said_in_a_session_is_searchable_with_its_file_and_line(cc, decision):
    hit = within(
        SEARCHABLE_WITHIN,
        lambda: decision_hit(cc, decision),
        lambda: (
            f"no decision from {decision.transcript} in search; "
            f"queue: {cli_json('status')['queue']}; daemon log:\n{daemon_log_tail(cc)}"
        ),
    )
    lines = decision.transcript.read_text(encoding="utf-8").splitlines()
    assert "PostgreSQL for the job queue" in lines[hit["source_line"] - 1]


THOUGHT = "Which broker should the billing events go through?"
THOUGHT_REPLY = "We decided to route billing events through RabbitMQ, since it is already deployed."


def test_a_reply_with_extended_thinking_points_at_the_line_that_holds_its_words(cc):
    """The CLI writes a reply with a thinking block as a thinking line and then its text's line, one
    message id: the reply's decision, found by search, opens on the text's line (I43)."""
    cc.fake.script(THOUGHT, [{"thinking": "Billing already publishes to RabbitMQ.", "text": THOUGHT_REPLY}])
    project = cc.project("billing")
    session = cc.session(THOUGHT, project)
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]

    def blocks(n: int) -> list[str]:
        content = (records[n - 1].get("message") or {}).get("content")
        return [b.get("type") for b in content] if isinstance(content, list) else []

    [text_line] = [n for n in range(1, len(records) + 1) if "RabbitMQ, since" in json.dumps(records[n - 1])]
    assert blocks(text_line) == ["text"] and blocks(text_line - 1) == ["thinking"]  # the shape under test
    assert records[text_line - 2]["message"]["id"] == records[text_line - 1]["message"]["id"]
    hit = within(
        SEARCHABLE_WITHIN,
        lambda: next(
            (
                r
                for r in search(cc, "which broker for the billing events", project)
                if "RabbitMQ" in r["content"] and r["source_file"] == str(session.transcript)
            ),
            None,
        ),
        lambda: f"no result from {session.transcript}; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert hit["source_line"] == text_line


FORKED = "We decided the invoices are rendered by WeasyPrint, not by a headless browser."


def test_a_forked_session_counts_what_it_copied_from_the_old_one_once(cc):
    """`--resume ID --fork-session` writes a new transcript that starts with the old one's records
    (same uuids): the decision said once keeps one mention and its one source (I152), and what the
    fork says next is found in the fork."""
    project = cc.project("invoices")
    cc.fake.script(FORKED, ["Noted: WeasyPrint renders the invoices."])
    cc.fake.script("And the PDF fonts?", ["The fonts are embedded from the repository's fonts folder."])
    first = cc.session(FORKED, project)
    fork = cc.session("And the PDF fonts?", project, "--resume", first.id, "--fork-session")
    assert fork.transcript != first.transcript and FORKED in fork.transcript.read_text(encoding="utf-8")

    def settled():
        hits = search(cc, "fonts for the invoice PDFs", project)
        return any("fonts folder" in r["content"] and r["source_file"] == str(fork.transcript) for r in hits)

    within(
        SEARCHABLE_WITHIN,
        settled,
        lambda: f"the fork's reply is not found; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert db_rows("SELECT mention_count FROM ideas WHERE content LIKE '%WeasyPrint renders%'") == [(1,)]
    sources = db_rows(
        "SELECT (SELECT path FROM files WHERE id = s.file_id) FROM idea_sources s "
        "JOIN ideas i ON i.id = s.idea_id WHERE i.content LIKE '%WeasyPrint%'"
    )
    assert sources and {path for (path,) in sources} == {str(first.transcript)}


DELEGATE = "Have a subagent find out why the payment webhook test is flaky."
SUB_PROMPT = "Investigate the flaky payment webhook test and report the cause."
LAUNCHED = "Find the flaky test's cause"
SUB_REPORT = (
    "The payment webhook test is flaky because the signature check compares timestamps in local time, "
    "so it fails for an hour after every daylight saving change. The fix is to compare them in UTC "
    "and to freeze the clock in the test."
)


def found_once(cc: ClaudeCode, question: str, words: str, project: Path, files: set[str]) -> None:
    """Within SEARCHABLE_WITHIN, `question` finds the text holding `words` as one result (spans aside),
    with every one of `files` among the places it was said."""

    def reported() -> list[dict]:
        return [r for r in search(cc, question, project) if r["kind"] != "span" and words in r["content"]]

    def places(hit: dict) -> set[str]:
        return {hit["source_file"]} | {s["source_file"] for s in hit.get("sources") or []}

    within(
        SEARCHABLE_WITHIN,
        lambda: any(files <= places(r) for r in reported()),
        lambda: (
            f"{words!r} is not found in {sorted(files)}: {reported()}; "
            f"queue: {cli_json('status')['queue']}; daemon log:\n{daemon_log_tail(cc)}"
        ),
    )
    shown = [
        (r["kind"], r["content"][:60], Path(r["source_file"]).name, r.get("source_line")) for r in reported()
    ]
    assert len(shown) == 1, shown


def sessions_of(transcript: Path) -> list[str]:
    """The sessions the messages read from a transcript file are stored under."""
    sql = "SELECT DISTINCT m.session_id FROM messages m JOIN files f ON f.id = m.file_id WHERE f.path = ?"
    return [session for (session,) in db_rows(sql, (str(transcript),))]


def line_text(transcript: Path, line: int) -> str:
    """The stored text of one line of a transcript."""
    sql = (
        "SELECT m.content FROM messages m JOIN files f ON f.id = m.file_id "
        "WHERE f.path = ? AND m.source_line = ?"
    )
    [(text,)] = db_rows(sql, (str(transcript), line))
    return text


def agent_call(description: str, prompt: str, **extra) -> dict:
    """A scripted step: the model launches a general-purpose subagent (the tool is named `Task` or
    `Agent`, by version)."""
    args = {"description": description, "prompt": prompt, "subagent_type": "general-purpose", **extra}
    return {"tool_use": {"name_matching": r"^(Task|Agent)$", "input": args}}


def test_a_subagents_report_is_found_once_in_its_own_transcript(cc):
    """The model launches a subagent: the CLI writes its transcript in a file of its own (indexed under
    the parent's session) and fires SubagentStop with it. Up to 2.1.197 the report is also the call's
    result in the parent: found once, with both places among its sources. In 2.1.332 the subagent
    runs in the background: the call's result is instructions to the model, read as the launch it is,
    and the report comes back as a notification, which is not read a second time."""
    project = cc.project("payments")
    launch = agent_call(LAUNCHED, SUB_PROMPT)
    cc.fake.script(DELEGATE, [launch, "The subagent found it: timestamps must be compared in UTC."])
    cc.fake.script(SUB_PROMPT, [SUB_REPORT])
    session = cc.session(DELEGATE, project)
    agents = sorted(cc.claude_dir.glob(f"projects/*/{session.id}/subagents/agent-*.jsonl"))
    agent = next((a for a in agents if SUB_REPORT in a.read_text(encoding="utf-8")), None)
    assert agent is not None, f"no subagent transcript holds the report; found {agents}"
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    [result] = [
        r for r in records if isinstance(r.get("toolUseResult"), dict) and "agentId" in r["toolUseResult"]
    ]
    background = result["toolUseResult"].get("status") == "async_launched"
    parent = set() if background else {str(session.transcript)}

    found_once(cc, "why is the payment webhook test flaky", "local time", project, {str(agent)} | parent)
    assert sessions_of(agent) == [session.id]
    if background:
        text = line_text(session.transcript, records.index(result) + 1)
        assert text.startswith(f"Agent launched in the background: {LAUNCHED}\nagentId: "), text


SEND_ASK = "Audit the refund code with a background agent."
SEND_TASK = "Audit the refund code for rounding bugs and report what you find."
SEND_MESSAGE = "Also check that partial refunds keep the original currency code."
SEND_RECAP = "check partial refund currency"


def test_a_message_sent_to_a_working_subagent_is_found_in_its_transcript(cc):
    """2.1.332: the model sends a background agent more to do with SendMessage; the message reaches the
    agent as a meta attachment in the agent's file, the only place its words are. Found there once, as
    the agent's prompt; the parent's call reads as its recap, its result as what happened."""
    project = cc.project("refunds")
    launch = agent_call("Audit refunds", SEND_TASK)
    send = {
        "tool_use": {
            "name_matching": "^SendMessage$",
            "input": {"message": SEND_MESSAGE, "summary": SEND_RECAP},
            "fill": {"to": r"agentId: ([0-9a-f]+)"},
        }
    }
    wait = {"tool_use": {"name_matching": "^Bash$", "input": {"command": "sleep 6", "description": "wait"}}}
    look = {"tool_use": {"name_matching": "^Bash$", "input": {"command": "sleep 3", "description": "look"}}}
    cc.fake.script(SEND_ASK, [launch, send, wait, "Waiting for the auditor."])
    cc.fake.script(SEND_TASK, [look, "Refunds round half-even; partial refunds keep their currency code."])
    session = cc.session(SEND_ASK, project, "--allowedTools", "Agent,Task,SendMessage,Bash")
    first = cc.fake.conversation_requests(SEND_ASK)[0]["json"]
    if "SendMessage" not in tool_names(first) + deferred_tools(first):
        pytest.skip(f"Claude Code {CLI_VERSION} has no SendMessage tool")
    agents = sorted(cc.claude_dir.glob(f"projects/*/{session.id}/subagents/agent-*.jsonl"))
    agent = next((a for a in agents if SEND_MESSAGE in a.read_text(encoding="utf-8")), None)
    assert agent is not None, f"no subagent transcript holds the message; found {agents}"

    found_once(
        cc, "did anyone check the currency code of partial refunds", SEND_MESSAGE, project, {str(agent)}
    )
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    [(call, call_id)] = [
        (n + 1, b["id"])
        for n, r in enumerate(records)
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if isinstance(b, dict) and b.get("name") == "SendMessage"
    ]
    # Its result's line, found by the call's id (the CLI may write other records between the two).
    [(answered, sent)] = [
        (n + 1, r["toolUseResult"]["message"])
        for n, r in enumerate(records)
        if r.get("type") == "user"
        and isinstance(r["message"].get("content"), list)
        and any(isinstance(b, dict) and b.get("tool_use_id") == call_id for b in r["message"]["content"])
    ]
    assert line_text(session.transcript, call) == f"[tool SendMessage: {SEND_RECAP}]"
    # What happened (2.1.332: queued for its next tool round; 2.1.197: resumed), not how to wait.
    assert line_text(session.transcript, answered) == sent[: sent.index(". ") + 1]


PEER_ASK = "Find out with a background agent why the checkout test is flaky."
PEER_TASK = "Find why the checkout test is flaky and tell the main conversation at once."
PEER_BODY = (
    "The checkout test is flaky because it shares the payments fixture with the refund test, "
    "which changes the fixture's currency."
)


def test_what_a_background_agent_tells_the_main_conversation_is_found_where_it_arrived(cc):
    """2.1.332: a background subagent's SendMessage to "main" reaches the main conversation as a meta
    attachment from a "peer", the only place its words are whole (the agent's call keeps its recap).
    Found once, on that line, as the agent's words."""
    project = cc.project("checkout")
    launch = agent_call("Find flaky test", PEER_TASK, run_in_background=True)
    wait = {"tool_use": {"name_matching": "^Bash$", "input": {"command": "sleep 8", "description": "wait"}}}
    tell = {
        "tool_use": {
            "name_matching": "^SendMessage$",
            "input": {"to": "main", "message": PEER_BODY, "summary": "flaky checkout cause"},
        }
    }
    cc.fake.script(PEER_ASK, [launch, wait, "Noted: the fixture is shared.", "Done."])
    cc.fake.script(PEER_TASK, [tell, "Reported the cause."])
    session = cc.session(PEER_ASK, project, "--allowedTools", "Agent,Task,SendMessage,Bash")
    first = cc.fake.conversation_requests(PEER_ASK)[0]["json"]
    if "SendMessage" not in tool_names(first) + deferred_tools(first):
        pytest.skip(f"Claude Code {CLI_VERSION} has no SendMessage tool")
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    arrived = [
        n + 1
        for n, r in enumerate(records)
        if r.get("type") == "attachment" and (r["attachment"].get("origin") or {}).get("kind") == "peer"
    ]
    assert arrived, "the agent's message never reached the main conversation's transcript"
    found_once(cc, "why was the checkout test flaky", PEER_BODY, project, {str(session.transcript)})
    sql = (
        "SELECT m.role, m.kind FROM messages m JOIN files f ON f.id = m.file_id "
        "WHERE f.path = ? AND m.source_line = ?"
    )
    assert db_rows(sql, (str(session.transcript), arrived[0])) == [("assistant", "subagent_response")]
    assert line_text(session.transcript, arrived[0]) == PEER_BODY


PR_ASK = "Open a pull request for the refund webhook retries."
PR_URL = "https://github.com/acme/shop/pull/42"


def test_the_pull_request_a_session_opened_is_found_and_names_the_session(cc, tmp_path):
    """2.1.332: when a `gh pr create` of the session prints a pull request's address, Claude Code links
    the session to it (a `pr-link` record, written again with the session's metadata when it ends).
    The link is stored once, found by its words, every result of the session names it, and a question
    naming the PR's number asks that session."""
    project = cc.project("refunds")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gh").write_text(f"#!/bin/sh\necho {PR_URL}\n")  # GitHub's CLI, as it answers `pr create`
    (tools / "gh").chmod(0o755)
    create = {
        "tool_use": {
            "name_matching": "^Bash$",
            "input": {"command": "gh pr create --title 'Retry the refund webhook'", "description": "open PR"},
        }
    }
    cc.fake.script(PR_ASK, [create, "Opened the pull request for the refund webhook retries.", "Done."])
    path = cc.ours["PATH"]
    cc.ours["PATH"] = f"{tools}{os.pathsep}{path}"
    try:
        session = cc.session(PR_ASK, project, "--allowedTools", "Bash")
    finally:
        cc.ours["PATH"] = path
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    links = [n + 1 for n, r in enumerate(records) if r.get("type") == "pr-link"]
    if not links:
        pytest.skip(f"Claude Code {CLI_VERSION} links no session to a pull request")
    text = f"PR #42 (pull request) in acme/shop: {PR_URL}"

    def stored() -> list[dict]:
        found = search(cc, "pull request acme shop", project)
        return [r for r in found if r.get("message_kind") == "pr_link"]

    found = within(
        SEARCHABLE_WITHIN,
        stored,
        lambda: f"no PR link found; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert [(r["content"], r["source_line"]) for r in found] == [(text, links[0])]
    mine = [r for r in search(cc, "refund webhook retries", project) if r.get("session") == session.id]
    assert mine and all(r["session_prs"] == [text] for r in mine)
    asked = search(cc, "what did we do in PR #42", project)  # the session that opened it (I168)
    assert asked and {r["session"] for r in asked} == {session.id}


WORKFLOW_ASK = "Use a workflow to check how the import job retries a failed upload."
WORKFLOW_SUMMARY = "Check the import job's retries"
WORKFLOW_AGENT_PROMPT = "Read the import job and report how it retries a failed upload."
WORKFLOW_REPORT = (
    "The import job retries a failed upload five times with exponential backoff starting at two "
    "seconds, but it never resets the attempt counter between files, so after one bad file every "
    "later upload gets a single try."
)
WORKFLOW_REVIEW_PROMPT = "Review the import job's upload code for bugs."
WORKFLOW_FINDING = "Uploads larger than 2 GB are read into memory whole instead of being streamed"
FINDINGS_SCHEMA = {
    "type": "object",
    "properties": {"findings": {"type": "array", "items": {"type": "object"}}},
    "required": ["findings"],
}
WORKFLOW_SCRIPT = "\n".join(
    [
        "export const meta = { name: 'import-retries', "
        f"description: {json.dumps(WORKFLOW_SUMMARY)}, phases: [{{ title: 'Read' }}] }}",
        f"const report = await agent({json.dumps(WORKFLOW_AGENT_PROMPT)}, "
        "{ label: 'read', phase: 'Read' })",
        f"const review = await agent({json.dumps(WORKFLOW_REVIEW_PROMPT)}, "
        f"{{ label: 'review', phase: 'Read', schema: {json.dumps(FINDINGS_SCHEMA)} }})",
        "return { report, findings: review.findings }",
    ]
)


def test_a_workflows_agent_reports_are_found_under_the_session_that_ran_it(cc):
    """Claude Code 2.1.332's Workflow tool runs a script of subagents in the background: each agent
    writes a transcript under `<session>/subagents/workflows/<run>/` beside the run's journal, and
    the script's result comes back to the parent in a notification. The agents' reports are found,
    under the parent's session, a structured one (an agent given a schema answers with a
    StructuredOutput call) by its words too; an agent's task reads without the harness's frame; the
    launch reads as the launch it is; the journal is no transcript."""
    project = cc.project("imports")
    run = {"tool_use": {"name": "Workflow", "input": {"script": WORKFLOW_SCRIPT}}}
    cc.fake.script(WORKFLOW_ASK, [run, "The workflow is running.", "The workflow found the retry bug."])
    cc.fake.script(WORKFLOW_AGENT_PROMPT, [WORKFLOW_REPORT])
    finding = {"title": WORKFLOW_FINDING, "file": "imports/upload.py", "severity": "high"}
    structured = {"tool_use": {"name_matching": "^StructuredOutput$", "input": {"findings": [finding]}}}
    cc.fake.script(WORKFLOW_REVIEW_PROMPT, [structured, "Done."])
    session = cc.session(WORKFLOW_ASK, project)
    if "Workflow" not in tool_names(cc.fake.conversation_requests(WORKFLOW_ASK)[0]["json"]):
        pytest.skip(f"Claude Code {CLI_VERSION} offers no Workflow tool")
    agents = sorted(cc.claude_dir.glob(f"projects/*/{session.id}/subagents/workflows/*/agent-*.jsonl"))
    assert agents, "the workflow wrote no agent transcript"
    [agent] = [a for a in agents if WORKFLOW_REPORT in a.read_text(encoding="utf-8")]

    found_once(
        cc,
        "why does the import job give later uploads only one try",
        "attempt counter",
        project,
        {str(agent)},
    )
    assert sessions_of(agent) == [session.id]
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    [launch] = [
        n + 1
        for n, r in enumerate(records)
        if r.get("type") == "user" and "Workflow launched" in json.dumps(r.get("message"))
    ]
    text = line_text(session.transcript, launch)
    assert text.startswith(f"Workflow launched in the background: {WORKFLOW_SUMMARY}"), text
    assert "Transcript dir" not in text and str(cc.claude_dir) not in text, text
    indexed = {Path(p).name for (p,) in db_rows("SELECT path FROM files")}
    assert "journal.jsonl" not in indexed, indexed
    [(task,)] = db_rows(
        "SELECT m.content FROM messages m JOIN files f ON f.id = m.file_id WHERE f.path = ? AND m.kind = ?",
        (str(agent), "subagent_prompt"),
    )
    assert task == WORKFLOW_AGENT_PROMPT

    [reviewer] = [a for a in agents if WORKFLOW_REVIEW_PROMPT in a.read_text(encoding="utf-8")]
    hits = within(
        SEARCHABLE_WITHIN,
        lambda: [
            r
            for r in search(cc, "which uploads get read into memory instead of streamed", project)
            if r["source_file"] == str(reviewer) and WORKFLOW_FINDING in r["content"]
        ],
        lambda: f"the structured finding is not found in {reviewer}; daemon log:\n{daemon_log_tail(cc)}",
    )
    line = hits[0]["source_line"]
    assert "StructuredOutput" in reviewer.read_text(encoding="utf-8").splitlines()[line - 1]


def test_the_next_session_gets_the_decision_at_start_and_an_unrelated_project_does_not(cc, decision):
    shop, garden = cc.project("shop"), cc.project("garden")
    within(
        SEARCHABLE_WITHIN,
        lambda: "PostgreSQL" in digest_of(shop),
        lambda: f"the shop digest lacks the decision: {digest_of(shop)!r}",
    )
    cc.session("Which database holds the job queue?", shop)
    cc.session("Which seeds grow in the shade?", garden)
    [asked] = cc.fake.conversation_requests("Which database holds the job queue?")
    assert "<total-recall-context>" in asked["body"] and "PostgreSQL for the job queue" in asked["body"]
    elsewhere = cc.fake.conversation_requests("Which seeds grow in the shade?")
    assert elsewhere and not any("PostgreSQL" in request["body"] for request in elsewhere)


def todo_write(status: str) -> list[dict]:
    todos = [{"content": t, "status": status, "activeForm": t} for t in TODOS]
    return [{"tool_use": {"name": "TodoWrite", "input": {"todos": todos}}}]


def task_create() -> list[dict]:
    return [
        {"tool_use": {"name": "TaskCreate", "input": {"subject": t, "description": d, "activeForm": t}}}
        for t, d in zip(TODOS, DESCRIPTIONS)
    ]


def task_update(status: str) -> list[dict]:
    # The CLI numbers a session's tasks from 1 in creation order ("Task #1 created successfully").
    return [
        {"tool_use": {"name": "TaskUpdate", "input": {"taskId": str(i), "status": status}}}
        for i in range(1, len(TODOS) + 1)
    ]


# tool -> (calls that plan the todos, calls that complete them); one tool call per model reply
TODO_CALLS = {
    "TaskCreate": (task_create, lambda: task_update("completed")),
    "TodoWrite": (lambda: todo_write("pending"), lambda: todo_write("completed")),
}


def todo_states(cc: ClaudeCode, project: Path) -> dict[str, bool]:
    """Todo text -> closed, for each of TODOS that search finds as a todo (a TaskCreate's todo
    may carry its description after the subject)."""
    states = {}
    for todo in TODOS:
        for r in search(cc, todo, project):
            if r["kind"] == "idea" and r["intent"] == "todo" and r["content"].split(" — ")[0] == todo:
                states[todo] = r["closed"]
    return states


def digest_of(project: Path) -> str:
    """The project's digest; empty while nothing of the project is indexed yet."""
    proc = cli("digest", "--json", cwd=str(project), check=False)
    return json.loads(proc.stdout)["digest"] if proc.returncode == 0 else ""


@pytest.mark.parametrize("tool", ["TaskCreate", pytest.param("TodoWrite", marks=pytest.mark.slow)])
def test_todos_from_the_clis_todo_tools_appear_open_then_close_when_completed(cc, tool):
    """TaskCreate/TaskUpdate: the CLI's default since 2.1.x; TodoWrite: older CLIs, or tasks off."""
    tasks = tool == "TaskCreate"
    release = cc.project(f"release-{tool.lower()}")
    plan, done = f"Plan the 2.0 release with {tool}.", f"The release is tagged and announced ({tool})."
    planned, completed = TODO_CALLS[tool]
    cc.fake.script(plan, [*planned(), "Two steps are planned."])
    cc.fake.script(done, [*completed(), "Both are done."])
    cc.session(plan, release, tasks=tasks)
    first = cc.fake.conversation_requests(plan)[0]["json"]
    offered = [t["name"] for t in first["tools"]] + deferred_tools(first)  # deferred: 2.1.2xx on
    assert tool in offered and ("TodoWrite" in offered) != tasks, offered
    within(
        SEARCHABLE_WITHIN,
        lambda: all(t in digest_of(release) for t in TODOS),
        lambda: f"the open todos are not in the digest: {digest_of(release)!r}",
    )
    assert todo_states(cc, release) == {t: False for t in TODOS}
    cc.session(done, release, "--continue", tasks=tasks)
    answers = [r for request in cc.fake.conversation_requests(done) for r in tool_results(request["json"])]
    assert answers and not any(a.get("is_error") for a in answers), answers  # the CLI did what was asked
    within(
        SEARCHABLE_WITHIN,
        lambda: not any(t in digest_of(release) for t in TODOS),
        lambda: f"the completed todos are still in the digest: {digest_of(release)!r}",
    )
    assert todo_states(cc, release) == {t: True for t in TODOS}  # still found, marked done


COMPACTION_PROMPT = "Your task is to create a detailed summary"  # Claude Code's compaction request
COMPACTED = "The CSV importer now skips blank rows and logs each skipped row number to import.log."
PENDING = "Add a dry-run flag to the CSV importer that reports the rows it would skip"


def test_a_compactions_summary_is_found_without_claude_codes_wrapper(cc):
    """`/compact` after a few turns: Claude Code asks the model for a summary and writes it in a user
    record (isCompactSummary) inside ~1 KB of its own framing (in 2.1.332 with the transcript's path).
    The summary is found as a summary of an earlier part; the framing is not stored. Its pending task
    is a todo at its line."""
    project = cc.project("importer")
    for turn in range(5):
        prompt = f"Turn {turn}: walk me through the CSV importer. " + "Include every detail. " * 30
        cc.fake.script(
            f"Turn {turn}:", [f"Part {turn} of the importer: " + "it parses rows one by one. " * 30]
        )
        cc.session(prompt, project, *(["--continue"] if turn else []))
    summary = (
        f"<analysis>Reviewed the importer.</analysis>\n<summary>1. Primary Request: {COMPACTED}\n\n"
        f"7. Pending Tasks:\n   - {PENDING}\n</summary>"
    )
    cc.fake.script(COMPACTION_PROMPT, [summary])
    session = cc.session("/compact", project, "--continue")
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    compacted = [n + 1 for n, r in enumerate(records) if r.get("isCompactSummary") is True]
    if not compacted:
        pytest.skip(f"Claude Code {CLI_VERSION} did not compact this session")
    hits = within(
        SEARCHABLE_WITHIN,
        lambda: [
            r
            for r in search(cc, "what does the importer do with blank rows", project)
            if r["kind"] != "span" and r["source_line"] in compacted and COMPACTED in r["content"]
        ],
        lambda: f"the summary is not found at {compacted}; daemon log:\n{daemon_log_tail(cc)}",
    )
    # shown as what its Primary Request section says (a memory of the summary's line), else as the
    # summary of an earlier part
    assert hits[0]["content"] == COMPACTED or hits[0]["message_kind"] == "compact_summary", hits[0]
    # Claude Code drops the analysis and writes the summary's tag as a heading
    assert line_text(session.transcript, compacted[-1]) == (
        f"Summary:\n1. Primary Request: {COMPACTED}\n\n7. Pending Tasks:\n   - {PENDING}"
    )
    # The summary's pending task is remembered as a todo at the summary's line (extract/summary.py)
    todos = [r for r in search(cc, "todos", project) if r.get("intent") == "todo"]
    assert (PENDING, compacted[-1]) in [(t["content"], t["source_line"]) for t in todos], todos


RENAME_ASK = "Where should the orders live?"
RENAME_ANSWER = "We decided to keep the orders in Postgres, one table per tenant."
RENAME_TITLE = "Orders storage"


def test_a_session_renamed_with_rename_is_named_so_by_its_results_and_topics(cc):
    """`/rename <title>` (a local command: no model call) writes a `custom-title` record; every result
    from the session names it, and so do its topics."""
    project = cc.project("orders")
    cc.fake.script(RENAME_ASK, [RENAME_ANSWER])
    session = cc.session(RENAME_ASK, project)
    renamed = cc.session(f"/rename {RENAME_TITLE}", project, "--continue")
    assert renamed.id == session.id
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    if not any(r.get("type") == "custom-title" for r in records):
        pytest.skip(f"Claude Code {CLI_VERSION} wrote no custom-title record")
    hits = within(
        SEARCHABLE_WITHIN,
        lambda: [
            r
            for r in search(cc, "where do the orders live", project)
            if "Postgres" in r["content"] and r.get("session_title") == RENAME_TITLE
        ],
        lambda: f"no result names the session {RENAME_TITLE!r}; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert hits[0]["session"] == session.id
    [topics] = cli_json("topics", RENAME_TITLE.split()[0].lower())  # by a part of its title
    assert (topics["session"], topics["title"]) == (session.id, RENAME_TITLE)


WORKTREE_BEFORE = "Keep the importer's batch size at 500 rows."
WORKTREE_ASK = "Work on the CSV importer fix in a worktree of its own."
WORKTREE_DECISION = "We decided to parse dates with the ISO 8601 parser only and reject every other format."


def test_a_session_that_moves_into_a_worktree_keeps_its_memories_at_the_moved_transcript(cc):
    """2.1.332's EnterWorktree moves the session's transcript into the worktree's project folder
    mid-session (a `relocated` record; the old file is gone; 2.1.197 leaves it in place). What was read
    before the move follows it: every line is stored once, under the file's path, and stays in the
    session's project."""
    project = git_repository(cc.project("importer-worktree"))
    cc.fake.script(WORKTREE_BEFORE, ["Noted: batches of 500 rows."])
    before = cc.session(WORKTREE_BEFORE, project)
    within(
        SEARCHABLE_WITHIN,
        lambda: any("500 rows" in r["content"] for r in search(cc, "importer batch size", project)),
        lambda: f"the first turn is not indexed; daemon log:\n{daemon_log_tail(cc)}",
    )
    enter = {"tool_use": {"name_matching": "^EnterWorktree$", "input": {"name": "iso-dates"}}}
    cc.fake.script(WORKTREE_ASK, [enter, WORKTREE_DECISION])
    session = cc.session(WORKTREE_ASK, project, "--continue", "--allowedTools", "EnterWorktree")
    assert session.id == before.id
    first = cc.fake.conversation_requests(WORKTREE_ASK)[0]["json"]
    if "EnterWorktree" not in tool_names(first) + deferred_tools(first):
        pytest.skip(f"Claude Code {CLI_VERSION} has no EnterWorktree tool")
    # 2.1.332 moves it into the worktree's project folder; 2.1.197 leaves it where it was
    moves = tuple(int(part) for part in CLI_VERSION.split(".")[:3]) >= (2, 1, 332)
    assert ("worktrees" in session.transcript.parent.name) == moves, session.transcript
    hit = within(
        SEARCHABLE_WITHIN,
        lambda: next(
            (r for r in search(cc, "how do we parse dates", project) if "ISO 8601" in r["content"]), None
        ),
        lambda: f"the decision is not found; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert hit["source_file"] == str(session.transcript), hit
    paths = {p for (p,) in db_rows("SELECT path FROM files")}
    gone = [p for p in paths if not Path(p).exists()]
    assert not gone, f"stored under transcripts that no longer exist: {gone}"
    for said in (WORKTREE_BEFORE, WORKTREE_ASK):  # read before the move, and after it: once, where it is
        sql = (
            "SELECT f.path, m.skip_reason FROM messages m JOIN files f ON f.id = m.file_id "
            "WHERE m.content = ?"
        )
        stored = db_rows(sql, (said,))
        assert stored == [(str(session.transcript), None)], (said, stored)
    lines = session.transcript.read_text(encoding="utf-8").splitlines()
    [(line,)] = db_rows("SELECT m.source_line FROM messages m WHERE m.content = ?", (WORKTREE_BEFORE,))
    assert WORKTREE_BEFORE in lines[line - 1]
    assert {
        p for (p,) in db_rows("SELECT DISTINCT project FROM messages WHERE session_id = ?", (session.id,))
    } == {str(project)}


WORKTREE_FLAG_BEFORE = "We keep the changelog of the signing service in CHANGES.md."
WORKTREE_FLAG_DECISION = "We decided to rotate the signing keys every 90 days from now on."


def test_a_decision_made_in_a_claude_worktree_session_is_found_from_the_repository(cc):
    """`claude --worktree NAME` runs the session in a new git worktree, `<repo>/.claude/worktrees/NAME`:
    its transcript and cwd are the worktree's. Of a repository without a remote, it is the same project:
    a search from the repository finds what was decided there."""
    project = git_repository(cc.project("signing"))
    cc.fake.script(WORKTREE_FLAG_BEFORE, ["Noted."])
    cc.session(WORKTREE_FLAG_BEFORE, project)  # the repository is a project of its own first
    within(
        SEARCHABLE_WITHIN,
        lambda: any("CHANGES.md" in r["content"] for r in search(cc, "where is the changelog", project)),
        lambda: f"the repository's session is not indexed; daemon log:\n{daemon_log_tail(cc)}",
    )
    cc.fake.script(WORKTREE_FLAG_DECISION, ["Noted: 90-day key rotation."])
    session = cc.session(WORKTREE_FLAG_DECISION, project, "--worktree", "rotation")
    cwd = next(
        json.loads(line)["cwd"]
        for line in session.transcript.read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("type") == "user"
    )
    assert Path(cwd) == project / ".claude" / "worktrees" / "rotation", cwd
    within(
        SEARCHABLE_WITHIN,
        lambda: any(
            "90 days" in r["content"] for r in search(cc, "how often do we rotate the signing keys", project)
        ),
        lambda: f"the worktree's decision is not found from {project}; daemon log:\n{daemon_log_tail(cc)}",
    )


WATCH = "Start the dev server and watch its log for errors."
WATCHED_ERROR = "ERROR: database pool exhausted (size 5, 12 waiting)"


def test_what_a_monitored_command_printed_is_found_at_its_notification(cc):
    """2.1.332's Monitor tool runs a command in the background; each line it prints reaches the model
    as a notification, the only place its words are written. The error it printed is found there."""
    project = cc.project("watch")
    # printed, not echoed: the words of the error are not the command's
    command = "printf 'ERROR: database pool %s\\n' 'exhausted (size 5, 12 waiting)'; sleep 1; echo ready"
    monitor = {
        "tool_use": {
            "name_matching": "^Monitor$",
            "input": {"description": "watch the dev server log", "timeout_ms": 20000, "command": command},
        }
    }
    wait = {"tool_use": {"name_matching": "^Bash$", "input": {"command": "sleep 3", "description": "wait"}}}
    cc.fake.script(WATCH, [monitor, wait, "The log showed the pool error."])
    session = cc.session(WATCH, project, "--allowedTools", "Monitor,Bash")
    first = cc.fake.conversation_requests(WATCH)[0]["json"]
    if "Monitor" not in tool_names(first) + deferred_tools(first):
        pytest.skip(f"Claude Code {CLI_VERSION} has no Monitor tool")
    lines = session.transcript.read_text(encoding="utf-8").splitlines()
    said = [n + 1 for n, line in enumerate(lines) if "database pool exhausted" in line and "<event>" in line]
    assert said, "the CLI wrote no notification of the event"
    hits = within(
        SEARCHABLE_WITHIN,
        lambda: [
            r
            for r in search(cc, "database pool exhausted", project)
            if r["kind"] == "message" and WATCHED_ERROR in r["content"]
        ],
        lambda: f"the monitored error is not found; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert hits[0]["source_line"] in said, (hits[0]["source_line"], said)
    assert json.loads(lines[hits[0]["source_line"] - 1])["type"] in ("attachment", "user")


GOAL_CHECK = "evaluating a stop-condition hook"  # the system prompt of the CLI's check of a goal
GOALS = {
    "met": ("every test in test/auth passes", '{"ok": true, "reason": "All 14 tests in test/auth pass."}'),
    "open": ("the import job streams uploads", '{"ok": false, "reason": "Uploads are still read whole."}'),
}


def goal_todos(cc: ClaudeCode, project: Path, goal: str) -> list[dict]:
    return [
        r
        for r in search(cc, f"goal {goal}", project)
        if r["kind"] == "idea" and r["intent"] == "todo" and r["content"] == f"Goal: {goal}"
    ]


@pytest.mark.parametrize("outcome", ["met", "open"])
def test_a_session_goal_is_a_todo_closed_when_its_check_finds_it_met(cc, outcome):
    """`/goal <condition>` (2.1.332) sets a goal that a Stop hook checks with a model call after each
    turn: the goal is an open todo of the user's, closed when the check finds it met. A goal never met
    stays open (the CLI gives up after some blocked stops); the check's reason is found with a met one."""
    goal, verdict = GOALS[outcome]
    project = cc.project(f"goal-{outcome}")
    cc.fake.answer_side(GOAL_CHECK, verdict)
    try:
        session = cc.session(f"/goal {goal}", project)
    finally:
        cc.fake.side_rules.clear()
    records = [json.loads(line) for line in session.transcript.read_text(encoding="utf-8").splitlines()]
    statuses = [r["attachment"] for r in records if (r.get("attachment") or {}).get("type") == "goal_status"]
    if not statuses:
        pytest.skip(f"Claude Code {CLI_VERSION} has no session goals")
    [todo] = within(
        SEARCHABLE_WITHIN,
        lambda: [t for t in goal_todos(cc, project, goal) if t["closed"] == (outcome == "met")],
        lambda: f"no {outcome} todo for the goal: {goal_todos(cc, project, goal)}; {daemon_log_tail(cc)}",
    )
    assert todo["source_file"] == str(session.transcript)
    assert records[todo["source_line"] - 1]["attachment"]["type"] == "goal_status"
    if outcome == "met":
        assert goal not in digest_of(project)
        hits = search(cc, "how many auth tests pass", project)
        assert any("All 14 tests in test/auth pass." in r["content"] for r in hits), hits
    else:
        assert f"Goal: {goal}" in digest_of(project)


def files_holding(folder: Path, secret: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()]


def fully_indexed(cc: ClaudeCode, session: Session, query: str, project: Path) -> bool:
    """The session is found by `query` and nothing is left in the queue."""
    found = any(r["source_file"] == str(session.transcript) for r in search(cc, query, project))
    return found and not any(cli_json("status")["queue"][state] for state in ("pending", "claimed"))


def test_a_secret_said_in_a_session_is_in_no_file_of_our_home(cc):
    vault = cc.project("vault")
    prompt = f"We decided to deploy staging with the GitHub token {SECRET} from the team vault."
    cc.fake.script("deploy staging with the GitHub token", [f"I will push with {SECRET} to staging."])
    session = cc.session(prompt, vault)
    within(
        SEARCHABLE_WITHIN,
        lambda: fully_indexed(cc, session, "deploy staging", vault),
        lambda: f"the session was not indexed; daemon log:\n{daemon_log_tail(cc)}",
    )
    assert SECRET.encode() in session.transcript.read_bytes()  # Claude Code's file has it; ours must not
    assert files_holding(cc.home, SECRET.encode()) == []
    assert SECRET not in (cc.root / "daemon.log").read_text(encoding="utf-8", errors="replace")


def texts(value) -> list[str]:
    """Every string inside a parsed JSON value (system prompt, messages, tool descriptions)."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in texts(item)]


def test_claude_code_lists_our_skills_hooks_and_mcp_server(cc, decision):
    # What the model is told: our model-invoked skills, under the plugin's namespace when it brings them.
    prefix = "total-recall:" if cc.route == "plugin" else ""
    told = "\n".join(texts(cc.fake.conversation_requests(DECISION)[0]["json"]))
    for skill in ("remember", "memorize"):
        assert re.search(rf"^- {prefix}{skill}: .*total-recall", told, re.MULTILINE), skill
    if cc.route == "plugin":
        details = cc.claude("plugin", "details", "total-recall")
        for name in (
            "remember",
            "memorize",
            "memory-stats",
            "memory-topics",
            "memory-backfill",
            "SessionStart",
            "UserPromptSubmit",
            "Stop",
            "SessionEnd",
        ):
            assert name in details
        assert "MCP servers (1)" in details and "total-recall" in details.split("MCP servers (1)")[1]
    else:
        listed = cc.claude("mcp", "list")  # starts the server to check it
        assert re.search(r"^total-recall: .* Connected", listed, re.MULTILINE), listed


def test_a_tool_call_from_the_model_reaches_our_mcp_server_and_its_answer_returns(cc, decision):
    shop = cc.project("shop")
    within(SEARCHABLE_WITHIN, lambda: decision_hit(cc, decision), lambda: "the decision was not indexed")
    ask = "Look up in our memory what we chose for the job queue."
    call = {"tool_use": {"name_matching": MCP_SEARCH, "input": {"query": "job queue database"}}}
    cc.fake.script(ask, [call, "It is PostgreSQL, as decided."])
    cc.session(ask, shop)
    first = cc.fake.conversation_requests(ask)[0]
    offered = [t["name"] for t in first["json"]["tools"]]
    # Offered, or (2.1.2xx on) deferred: named in a reminder, loaded with ToolSearch on first use.
    offered += deferred_tools(first["json"])
    assert any(n.endswith("total-recall__search") for n in offered), offered
    answers = [r for request in cc.fake.conversation_requests(ask) for r in tool_results(request["json"])]
    assert answers, "the model's tool call was never answered"
    text = json.dumps(answers[-1]["content"])
    assert not answers[-1].get("is_error"), text
    assert "PostgreSQL for the job queue" in text and decision.transcript.name in text


def test_the_remember_skill_names_the_asking_session_to_the_search(cc):
    """/remember tells the model to run the search with --current-session and Claude Code's own id of
    the session asking, so "where did we leave off" searches the session before it (I98)."""
    prefix = "total-recall:" if cc.route == "plugin" else ""
    session = cc.session(f"/{prefix}remember where did we leave off", cc.project("shop"))
    told = "\n".join(text for request in cc.fake.conversation_requests() for text in texts(request["json"]))
    assert f'--current-session "{session.id}"' in told, told[-3000:]
