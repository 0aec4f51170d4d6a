"""Install the hooks into Claude Code's user settings and the skills into its skills folder.

settings.json belongs to the user: every existing key and hook is kept, a timestamped backup is
written before the first change, the file is replaced atomically with its mode kept, and a second
install changes nothing. Our handlers are recognised by the shim they run, so uninstall removes
exactly those. home/installed.json records what was installed (commands, skill files, which
event lists we created) so uninstall can undo precisely that.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config
from total_recall.errors import ConfigError

log = structlog.get_logger(__name__)

ENQUEUE_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")
SESSION_START_MATCHER = "startup|resume|clear|compact"
EVENTS = ("SessionStart",) + ENQUEUE_EVENTS
TIMEOUT = 10
# SessionEnd hooks share a 1.5 s budget that a settings timeout raises; keep exit snappy.
SESSION_END_TIMEOUT = 3
SHIMS = ("enqueue.py", "session_start.py")
# Our shim inside any installed copy of the package (another venv, an older version).
OUR_SHIM = re.compile(r"total_recall[/\\]hooks[/\\](enqueue|session_start)\.py")
MANIFEST_VERSION = 1


@dataclass
class InstallReport:
    settings_path: Path
    backup_path: Path | None = None
    added_hooks: list[str] = field(default_factory=list)  # event names
    removed_hooks: list[str] = field(default_factory=list)  # event names
    skills: list[str] = field(default_factory=list)  # installed (or removed) skill names
    changed: bool = False
    skipped_skills: list[str] = field(default_factory=list)  # a different file of the user's is in the way
    mcp_config: Path | None = None  # Claude Code's user config holding our MCP server entry
    mcp_backup: Path | None = None
    mcp: str = ""  # added | kept | removed | skipped (a server of the user's has our name) | ""


# --- commands -------------------------------------------------------------------------------


def hook_command(python: str, shim: Path, event: str | None = None) -> str:
    """The sh command line Claude Code runs for one event."""
    parts = [shlex.quote(python), "-I", "-S", shlex.quote(str(shim))]
    if event:
        parts.append(event)
    prefix = ""
    home = config.home().absolute()
    if home != Path(config.DEFAULT_HOME).expanduser().absolute():
        # The hook runs in Claude Code's environment, which lacks our TOTAL_RECALL_HOME.
        prefix = f"TOTAL_RECALL_HOME={shlex.quote(str(home))} "
    return prefix + " ".join(parts)


def desired_groups(python: str, hooks_dir: Path) -> dict[str, dict[str, Any]]:
    """Event -> the matcher group we want in settings.json."""
    groups: dict[str, dict[str, Any]] = {
        "SessionStart": {
            "matcher": SESSION_START_MATCHER,
            "hooks": [_handler(hook_command(python, hooks_dir / "session_start.py"), TIMEOUT)],
        }
    }
    for event in ENQUEUE_EVENTS:
        timeout = SESSION_END_TIMEOUT if event == "SessionEnd" else TIMEOUT
        groups[event] = {"hooks": [_handler(hook_command(python, hooks_dir / "enqueue.py", event), timeout)]}
    return groups


def _handler(command: str, timeout: int) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout}


def is_ours(handler: Any, known: set[str], hooks_dir: Path | None = None) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    command = handler["command"]
    if command in known or OUR_SHIM.search(command):
        return True
    # A source checkout runs the shims from <repo>/hooks, which the pattern cannot know.
    return hooks_dir is not None and any(shlex.quote(str(hooks_dir / s)) in command for s in SHIMS)


# --- settings.json --------------------------------------------------------------------------


def read_settings(path: Path) -> dict[str, Any] | None:
    """The parsed settings, None when the file does not exist; ConfigError when unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        # Trigger: an empty settings file. Why: Claude Code treats it as no settings.
        # Outcome: start from an empty object (the empty file is still backed up).
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix it, then run install again (the file was not changed)"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object; the file was not changed")
    _check_hooks_shape(path, data)
    return data


def _check_hooks_shape(path: Path, data: dict[str, Any]) -> None:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f'{path}: "hooks" must be an object; the file was not changed')
    for event in EVENTS:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f'{path}: "hooks.{event}" must be a list; the file was not changed')


def write_atomic(path: Path, data: dict[str, Any], mode: int | None) -> None:
    """Replace `path` in one step, keeping `mode` (0600 for a new file)."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600 if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_backup(path: Path) -> Path:
    """Copy the current file to settings.json.total-recall-backup-<ts>, same mode, never overwriting."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    content, mode = path.read_bytes(), path.stat().st_mode & 0o777
    for n in range(1000):
        backup = path.with_name(f"{path.name}.total-recall-backup-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        return backup
    raise ConfigError(f"too many backups of {path} this second; remove old ones")


def settings_target(claude_dir: Path | None) -> Path:
    path = (claude_dir or config.claude_config_dir()) / "settings.json"
    # Trigger: settings.json is a symlink (dotfile managers). Why: os.replace on the link would
    # swap it for a plain file. Outcome: read and replace the file the link points to.
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def remove_ours(
    hooks: dict[str, Any],
    event: str,
    known: set[str],
    hooks_dir: Path | None,
    keep: dict[str, Any] | None = None,
) -> bool:
    """Drop our handlers from one event (except `keep`); drop groups that only we emptied."""
    groups, removed, kept = hooks.get(event, []), False, []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept.append(group)
            continue
        mine = [h for h in handlers if h is not keep and is_ours(h, known, hooks_dir)]
        if not mine:
            kept.append(group)
            continue
        removed = True
        rest = [h for h in handlers if not any(h is m for m in mine)]
        if rest:
            kept.append({**group, "hooks": rest})
    if removed:
        hooks[event] = kept
    return removed


def find_exact(hooks: dict[str, Any], event: str, group: dict[str, Any]) -> dict[str, Any] | None:
    """Our wanted handler, if it is already present in a group with the wanted matcher."""
    want = group["hooks"][0]
    for existing in hooks.get(event, []):
        if not isinstance(existing, dict) or existing.get("matcher") != group.get("matcher"):
            continue
        for handler in existing.get("hooks") or []:
            if handler == want:
                return handler
    return None


# --- manifest -------------------------------------------------------------------------------


def manifest_path() -> Path:
    return config.home() / "installed.json"


def read_manifest() -> dict[str, Any]:
    try:
        data = json.loads(manifest_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        # Trigger: a damaged manifest. Why: it only narrows what uninstall removes; our hooks
        # are still recognised by their shim path. Outcome: proceed as if none was written.
        log.warning("install_manifest_unreadable", path=str(manifest_path()), error=str(exc))
        return {}
    return data if isinstance(data, dict) else {}


def write_manifest(data: dict[str, Any]) -> None:
    if data == read_manifest():
        return
    config.ensure_home()
    write_atomic(manifest_path(), data, 0o600)


# --- skills ---------------------------------------------------------------------------------


def remember_command() -> str:
    """The search skill as Claude Code knows it: `/remember` when `install` wrote the personal
    skill, else the plugin's namespaced `/total-recall:remember`."""
    return "/remember" if "remember" in (read_manifest().get("skills") or {}) else "/total-recall:remember"


def skill_sources(skills_source: Path | None) -> dict[str, Path]:
    folder = skills_source if skills_source is not None else config.resource_dir("skills")
    return {p.parent.name: p for p in sorted(folder.glob("*/SKILL.md")) if p.is_file()}


def install_skills(
    claude_dir: Path, skills_source: Path | None, manifest: dict[str, Any], report: InstallReport
) -> None:
    recorded: dict[str, str] = manifest.setdefault("skills", {})
    for name, source in skill_sources(skills_source).items():
        target = claude_dir / "skills" / name / "SKILL.md"
        content = source.read_bytes()
        if target.exists() and name not in recorded and target.read_bytes() != content:
            # Trigger: the user has a skill of the same name. Why: it is theirs, not ours.
            # Outcome: left alone and reported; ours is not installed under that name.
            report.skipped_skills.append(name)
            continue
        report.skills.append(name)
        recorded[name] = str(target)
        if target.exists() and target.read_bytes() == content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        report.changed = True


def uninstall_skills(manifest: dict[str, Any], report: InstallReport) -> None:
    for name, target in sorted((manifest.get("skills") or {}).items()):
        path = Path(target)
        if path.is_file():
            path.unlink()
            report.changed = True
        report.skills.append(name)
        try:
            path.parent.rmdir()  # only when empty: files the user added stay
        except OSError:
            pass


# --- MCP server (user scope) ---------------------------------------------------------------

MCP_NAME = "total-recall"


def mcp_config_path(claude_dir: Path | None = None) -> Path:
    """Claude Code keeps user-scope MCP servers in ~/.claude.json, or in $CLAUDE_CONFIG_DIR/.claude.json
    whenever that variable is set, even to ~/.claude (seen in the real CLI, tests/e2e)."""
    claude_dir = (claude_dir or config.claude_config_dir()).absolute()
    default = Path("~/.claude").expanduser().absolute()
    in_home = claude_dir == default and not os.environ.get("CLAUDE_CONFIG_DIR")
    path = default.parent / ".claude.json" if in_home else claude_dir / ".claude.json"
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def mcp_entry(python: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio", "command": python, "args": ["-m", "total_recall", "mcp"]}
    home = config.home().absolute()
    if home != Path(config.DEFAULT_HOME).expanduser().absolute():
        entry["env"] = {"TOTAL_RECALL_HOME": str(home)}  # Claude Code's environment lacks ours
    return entry


def _is_our_mcp(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("args", [])[-3:] == ["-m", "total_recall", "mcp"]


def install_mcp(claude_dir: Path, python: str, manifest: dict[str, Any], report: InstallReport) -> None:
    """Add (or refresh) our user-scope MCP server entry; a backup is written before any change."""
    path = report.mcp_config = mcp_config_path(claude_dir)
    original = read_settings(path)
    data = json.loads(json.dumps(original or {}))
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(f'{path}: "mcpServers" must be an object; the file was not changed')
    recorded = manifest.get("mcp") or {}
    current = (servers or {}).get(MCP_NAME)
    if current is not None and not _is_our_mcp(current) and not recorded:
        # Trigger: the user has a server of that name. Why: it is theirs. Outcome: left alone, reported.
        report.mcp = "skipped"
        return
    manifest["mcp"] = {
        "path": str(path),
        "servers_key_existed": recorded.get("servers_key_existed", servers is not None),
    }
    wanted = mcp_entry(python)
    if current == wanted:
        report.mcp = "kept"
        return
    data.setdefault("mcpServers", {})[MCP_NAME] = wanted
    if original is not None:
        report.mcp_backup = write_backup(path)
    write_atomic(path, data, path.stat().st_mode & 0o777 if original is not None else None)
    report.mcp, report.changed = "added", True


def uninstall_mcp(claude_dir: Path, manifest: dict[str, Any], report: InstallReport) -> None:
    """Remove our entry only (a server of the user's under our name stays); backup first."""
    recorded = manifest.get("mcp") or {}
    path = report.mcp_config = Path(recorded.get("path") or mcp_config_path(claude_dir))
    original = read_settings(path)
    servers = (original or {}).get("mcpServers")
    if not isinstance(servers, dict) or not _is_our_mcp(servers.get(MCP_NAME)):
        return
    data = json.loads(json.dumps(original))
    del data["mcpServers"][MCP_NAME]
    if not data["mcpServers"] and recorded and not recorded.get("servers_key_existed"):
        del data["mcpServers"]
    report.mcp_backup = write_backup(path)
    write_atomic(path, data, path.stat().st_mode & 0o777)
    report.mcp, report.changed = "removed", True


# --- public API -----------------------------------------------------------------------------


def _merge_hooks(
    data: dict[str, Any],
    groups: dict[str, dict[str, Any]],
    known: set[str],
    hooks_dir: Path,
    manifest: dict[str, Any],
) -> InstallReport:
    """Put our groups into data["hooks"]; note in the manifest what existed before, for uninstall."""
    report = InstallReport(settings_path=Path())
    manifest.setdefault("hooks_key_existed", "hooks" in data)
    hooks = data.setdefault("hooks", {})
    empty_before = set(manifest.get("empty_events") or [])
    for event, group in groups.items():
        if hooks.get(event) == []:
            empty_before.add(event)
        keep = find_exact(hooks, event, group)
        if remove_ours(hooks, event, known, hooks_dir, keep=keep):
            report.removed_hooks.append(event)
        if keep is None:
            hooks.setdefault(event, []).append(group)
            report.added_hooks.append(event)
    manifest["empty_events"] = sorted(empty_before)
    return report


def install(
    *, python: str | None = None, claude_dir: Path | None = None, skills_source: Path | None = None
) -> InstallReport:
    """Add our hooks to settings.json and copy our skills; safe to run again."""
    python = os.path.abspath(python or sys.executable or "")
    if not python or not os.path.isfile(python):
        raise ConfigError(f"no Python interpreter at {python!r}; pass --python")
    hooks_dir = config.resource_dir("hooks").absolute()
    claude_dir = claude_dir or config.claude_config_dir()
    path = settings_target(claude_dir)
    original = read_settings(path)
    data = json.loads(json.dumps(original or {}))
    manifest = read_manifest()
    groups = desired_groups(python, hooks_dir)
    known = set(manifest.get("commands") or [])
    report = _merge_hooks(data, groups, known, hooks_dir, manifest)
    report.settings_path = path
    if original is None or data != original:
        if original is not None:
            report.backup_path = write_backup(path)
        mode = path.stat().st_mode & 0o777 if original is not None else None
        write_atomic(path, data, mode)
        report.changed = True
    manifest.update(version=MANIFEST_VERSION, settings_path=str(path))
    manifest["commands"] = sorted(known | {g["hooks"][0]["command"] for g in groups.values()})
    install_skills(claude_dir, skills_source, manifest, report)
    install_mcp(claude_dir, python, manifest, report)
    write_manifest(manifest)
    log.info(
        "installed",
        settings=str(path),
        added=report.added_hooks,
        skills=report.skills,
        changed=report.changed,
    )
    return report


def uninstall(*, claude_dir: Path | None = None) -> InstallReport:
    """Remove exactly our hooks and skills; everything else in settings.json stays."""
    claude_dir = claude_dir or config.claude_config_dir()
    path = settings_target(claude_dir)
    report = InstallReport(settings_path=path)
    manifest = read_manifest()
    original = read_settings(path)
    if original is not None and isinstance(original.get("hooks"), dict):
        data = json.loads(json.dumps(original))
        _strip_hooks(data, manifest, report)
        if data != original:
            report.backup_path = write_backup(path)
            write_atomic(path, data, path.stat().st_mode & 0o777)
            report.changed = True
    uninstall_skills(manifest, report)
    uninstall_mcp(claude_dir, manifest, report)
    manifest_path().unlink(missing_ok=True)
    log.info("uninstalled", settings=str(path), removed=report.removed_hooks, skills=report.skills)
    return report


def _strip_hooks(data: dict[str, Any], manifest: dict[str, Any], report: InstallReport) -> None:
    """Remove our handlers; drop lists (and "hooks") that only we emptied and that did not exist empty."""
    hooks = data["hooks"]
    known = set(manifest.get("commands") or [])
    hooks_dir = _hooks_dir_or_none()
    empty_before = set(manifest.get("empty_events") or [])
    for event in EVENTS:
        if not remove_ours(hooks, event, known, hooks_dir):
            continue
        report.removed_hooks.append(event)
        if not hooks[event] and event not in empty_before:
            del hooks[event]
    if report.removed_hooks and not hooks and not manifest.get("hooks_key_existed"):
        del data["hooks"]


def _hooks_dir_or_none() -> Path | None:
    try:
        return config.resource_dir("hooks").absolute()
    except ConfigError:
        return None


def hooks_installed(claude_dir: Path | None = None) -> dict[str, bool]:
    """Event -> whether one of our handlers is configured in settings.json (for `doctor`)."""
    try:
        data = read_settings(settings_target(claude_dir)) or {}
    except ConfigError:
        data = {}
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    known = set(read_manifest().get("commands") or [])
    hooks_dir = _hooks_dir_or_none()
    found = {}
    for event in EVENTS:
        groups = hooks.get(event) if isinstance(hooks.get(event), list) else []
        found[event] = any(
            is_ours(h, known, hooks_dir)
            for g in groups
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            for h in g["hooks"]
        )
    return found
