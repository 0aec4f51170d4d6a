"""Installing into Claude Code's settings.json and skills folder, on real files."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import sqlite_connect
from total_recall import config, db, install
from total_recall.errors import ConfigError

EVENTS = ["SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd"]

USER_SETTINGS = {
    "model": "opus",
    "env": {"FOO": "bar"},
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "ruff format"}]}],
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi", "timeout": 5}]}
        ],
    },
}


@pytest.fixture
def claude_dir() -> Path:
    return config.claude_config_dir()


@pytest.fixture
def skills_src(tmp_path) -> Path:
    src = tmp_path / "skill-src"
    for name in ("memory-search", "memory-status"):
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(
            f"---\ndescription: {name}\n---\nbody of {name}\n", encoding="utf-8"
        )
    return src


def write_settings(claude_dir: Path, data, mode: int = 0o640) -> Path:
    path = claude_dir / "settings.json"
    path.write_text(json.dumps(data, indent=2) if not isinstance(data, str) else data, encoding="utf-8")
    os.chmod(path, mode)
    return path


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def backups(claude_dir: Path) -> list[Path]:
    return sorted(claude_dir.glob("settings.json.total-recall-backup-*"))


def our_commands(settings: dict, event: str) -> list[str]:
    return [
        h["command"]
        for g in settings["hooks"].get(event, [])
        for h in g["hooks"]
        if "enqueue.py" in h["command"] or "session_start.py" in h["command"]
    ]


def test_install_into_fresh_config_creates_private_settings(claude_dir, skills_src):
    report = install.install(skills_source=skills_src)
    path = claude_dir / "settings.json"
    assert report.changed and report.backup_path is None and report.settings_path == path
    assert sorted(report.added_hooks) == sorted(EVENTS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    settings = read_json(path)
    hooks_dir = config.resource_dir("hooks")
    for event in EVENTS:
        [command] = our_commands(settings, event)
        shim = "session_start.py" if event == "SessionStart" else "enqueue.py"
        assert shlex.quote(sys.executable) in command and " -I -S " in command
        assert shlex.quote(str(hooks_dir / shim)) in command
    assert settings["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert install.hooks_installed() == dict.fromkeys(EVENTS, True)


def test_install_keeps_user_keys_and_hooks_and_backs_up_first(claude_dir, skills_src):
    path = write_settings(claude_dir, USER_SETTINGS)
    before = path.read_bytes()
    report = install.install(skills_source=skills_src)
    assert report.backup_path is not None and report.backup_path.read_bytes() == before
    assert stat.S_IMODE(report.backup_path.stat().st_mode) == 0o640
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    settings = read_json(path)
    for key in ("model", "env", "permissions"):
        assert settings[key] == USER_SETTINGS[key]
    for event, groups in USER_SETTINGS["hooks"].items():
        assert settings["hooks"][event][: len(groups)] == groups
    assert len(our_commands(settings, "Stop")) == 1


def test_second_install_changes_nothing(claude_dir, skills_src):
    path = write_settings(claude_dir, USER_SETTINGS)
    install.install(skills_source=skills_src)
    after_first, first_backups = path.read_bytes(), backups(claude_dir)
    report = install.install(skills_source=skills_src)
    assert not report.changed and report.backup_path is None
    assert report.added_hooks == [] and report.removed_hooks == []
    assert path.read_bytes() == after_first
    assert backups(claude_dir) == first_backups


@pytest.mark.parametrize(
    "original",
    [USER_SETTINGS, {"model": "opus"}, {"hooks": {}}, {"hooks": {"Stop": []}}],
    ids=["user-hooks", "no-hooks-key", "empty-hooks", "empty-stop-list"],
)
def test_uninstall_restores_the_original_settings(claude_dir, skills_src, original):
    path = write_settings(claude_dir, original)
    install.install(skills_source=skills_src)
    report = install.uninstall()
    assert sorted(report.removed_hooks) == sorted(EVENTS)
    assert read_json(path) == original
    assert install.hooks_installed() == dict.fromkeys(EVENTS, False)


def test_uninstall_without_manifest_still_finds_our_hooks(claude_dir, skills_src, isolated_home):
    path = write_settings(claude_dir, USER_SETTINGS)
    install.install(skills_source=skills_src)
    (isolated_home / "installed.json").unlink()
    install.uninstall()
    assert read_json(path) == USER_SETTINGS


def test_stale_handlers_from_another_install_are_replaced(claude_dir, skills_src):
    stale = "/old/venv/bin/python -I -S /old/venv/lib/python3.11/site-packages/total_recall/hooks/enqueue.py"
    handlers = [{"type": "command", "command": "notify-send"}, {"type": "command", "command": stale}]
    original = {"hooks": {"Stop": [{"hooks": handlers}]}}
    path = write_settings(claude_dir, original)
    report = install.install(skills_source=skills_src)
    assert report.removed_hooks == ["Stop"]
    stop = read_json(path)["hooks"]["Stop"]
    assert stop[0] == {"hooks": [{"type": "command", "command": "notify-send"}]}
    assert [c for c in our_commands({"hooks": {"Stop": stop}}, "Stop") if c == stale] == []
    assert len(our_commands({"hooks": {"Stop": stop}}, "Stop")) == 1


@pytest.mark.parametrize("text", ['{"hooks": {', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'])
def test_unusable_settings_are_refused_and_left_untouched(claude_dir, skills_src, text):
    path = write_settings(claude_dir, text)
    with pytest.raises(ConfigError, match="settings.json"):
        install.install(skills_source=skills_src)
    assert path.read_text(encoding="utf-8") == text
    assert backups(claude_dir) == []


def test_symlinked_settings_stay_a_symlink(claude_dir, skills_src, tmp_path):
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"model": "opus"}), encoding="utf-8")
    (claude_dir / "settings.json").symlink_to(real)
    install.install(skills_source=skills_src)
    assert (claude_dir / "settings.json").is_symlink()
    assert len(our_commands(read_json(real), "Stop")) == 1


def test_installed_command_enqueues_when_run_by_sh(claude_dir, skills_src, isolated_home, tmp_path):
    """The exact string Claude Code would run, in an environment without our variables."""
    install.install(skills_source=skills_src)
    db.connect(isolated_home / "memory.db").close()
    transcript = claude_dir / "projects" / "-p" / "session.jsonl"  # only these are ever recorded
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text("{}\n", encoding="utf-8")
    [command] = our_commands(read_json(claude_dir / "settings.json"), "Stop")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOTAL_RECALL_")}
    payload = {
        "session_id": "s1",
        "transcript_path": str(transcript),
        "cwd": str(tmp_path),
        "hook_event_name": "Stop",
    }
    done = subprocess.run(
        ["sh", "-c", command], input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, b"")
    conn = sqlite_connect(isolated_home / "memory.db")
    rows = conn.execute("SELECT transcript_path, event FROM work_queue").fetchall()
    conn.close()
    assert rows == [(str(transcript), "Stop")]


def test_default_home_needs_no_prefix(monkeypatch, tmp_path, skills_src, claude_dir):
    monkeypatch.delenv("TOTAL_RECALL_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    install.install(skills_source=skills_src)
    command = our_commands(read_json(claude_dir / "settings.json"), "Stop")[0]
    assert not command.startswith("TOTAL_RECALL_HOME=")
    assert (tmp_path / "user-home" / ".claude-plugin-total-recall" / "installed.json").is_file()


def test_custom_home_is_passed_to_the_hook(isolated_home, skills_src, claude_dir):
    command = our_commands(read_json(install.install(skills_source=skills_src).settings_path), "Stop")[0]
    assert command.startswith(f"TOTAL_RECALL_HOME={shlex.quote(str(isolated_home))} ")


def test_skills_are_copied_and_removed_exactly(claude_dir, skills_src):
    mine = claude_dir / "skills" / "my-own" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("user skill\n", encoding="utf-8")
    report = install.install(skills_source=skills_src)
    assert report.skills == ["memory-search", "memory-status"]
    for name in report.skills:
        assert (claude_dir / "skills" / name / "SKILL.md").read_bytes() == (
            skills_src / name / "SKILL.md"
        ).read_bytes()
    install.uninstall()
    assert sorted(p.name for p in (claude_dir / "skills").iterdir()) == ["my-own"]
    assert mine.read_text(encoding="utf-8") == "user skill\n"


def test_a_users_skill_of_the_same_name_is_not_overwritten(claude_dir, skills_src):
    theirs = claude_dir / "skills" / "memory-search" / "SKILL.md"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("their own memory-search\n", encoding="utf-8")
    report = install.install(skills_source=skills_src)
    assert report.skipped_skills == ["memory-search"] and report.skills == ["memory-status"]
    install.uninstall()
    assert theirs.read_text(encoding="utf-8") == "their own memory-search\n"


def test_changed_skill_is_updated_on_reinstall(claude_dir, skills_src):
    install.install(skills_source=skills_src)
    (skills_src / "memory-search" / "SKILL.md").write_text("v2\n", encoding="utf-8")
    report = install.install(skills_source=skills_src)
    assert report.changed and report.backup_path is None
    assert (claude_dir / "skills" / "memory-search" / "SKILL.md").read_text(encoding="utf-8") == "v2\n"


def test_packaged_skills_folder_is_the_default(claude_dir):
    report = install.install()
    shipped = sorted(p.parent.name for p in config.resource_dir("skills").glob("*/SKILL.md"))
    assert report.skills == shipped


def test_mcp_server_is_registered_at_user_scope_and_removed_exactly(claude_dir, skills_src, isolated_home):
    """`install` adds one user-scope MCP entry to Claude Code's .claude.json (backup first);
    `uninstall` removes exactly it; the user's other servers and keys stay as they were."""
    config_file = claude_dir / ".claude.json"
    user = {
        "numStartups": 7,
        "projects": {"/x": {"allowedTools": []}},
        "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": []}},
    }
    config_file.write_text(json.dumps(user), encoding="utf-8")
    os.chmod(config_file, 0o600)
    report = install.install(skills_source=skills_src)
    assert report.mcp == "added" and report.mcp_backup is not None
    assert read_json(report.mcp_backup) == user
    data = read_json(config_file)
    assert data["numStartups"] == 7 and data["mcpServers"]["github"] == user["mcpServers"]["github"]
    entry = data["mcpServers"]["total-recall"]
    assert entry["command"] == sys.executable and entry["args"] == ["-m", "total_recall", "mcp"]
    assert entry["env"] == {"TOTAL_RECALL_HOME": str(isolated_home)}
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert install.install(skills_source=skills_src).mcp == "kept"
    assert install.uninstall().mcp == "removed"
    assert read_json(config_file) == user


def test_mcp_entry_in_a_fresh_config_and_a_users_server_of_our_name(claude_dir, skills_src):
    config_file = claude_dir / ".claude.json"
    install.install(skills_source=skills_src)
    assert list(read_json(config_file)["mcpServers"]) == ["total-recall"]
    install.uninstall()
    assert read_json(config_file) == {}
    theirs = {"mcpServers": {"total-recall": {"type": "http", "url": "https://example.invalid/mcp"}}}
    config_file.write_text(json.dumps(theirs), encoding="utf-8")
    assert install.install(skills_source=skills_src).mcp == "skipped"
    install.uninstall()
    assert read_json(config_file) == theirs


def test_mcp_entry_goes_where_claude_code_reads_it(tmp_path, monkeypatch, skills_src):
    """~/.claude.json when CLAUDE_CONFIG_DIR is unset; $CLAUDE_CONFIG_DIR/.claude.json whenever it is
    set, even to ~/.claude (the real CLI reads that one then; tests/e2e found it)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    claude_dir = tmp_path / "home" / ".claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    assert install.install(skills_source=skills_src).mcp_config == claude_dir / ".claude.json"
    install.uninstall()
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    assert install.install(skills_source=skills_src).mcp_config == tmp_path / "home" / ".claude.json"
