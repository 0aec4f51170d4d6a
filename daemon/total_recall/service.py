"""Run the daemon as an OS service: a systemd user unit on Linux, a launchd agent on macOS.

The unit/agent file is always written; activating it needs systemctl/launchctl. When that is
missing or fails (containers, WSL without systemd, no user session bus) the report says so and
how to run the daemon by hand instead.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config
from total_recall.errors import ConfigError

log = structlog.get_logger(__name__)

UNIT_NAME = "total-recall.service"
LABEL = "com.total-recall.daemon"
MANUAL_HINT = "start the daemon by hand with `total-recall daemon` (or add it to your login items)"
COMMAND_TIMEOUT = 30.0


@dataclass
class ServiceReport:
    manager: str  # systemd | launchd
    path: Path  # the unit or agent file
    written: bool = False  # the file was (re)written or removed
    active: bool = False  # the service manager accepted the change
    commands: list[list[str]] = field(default_factory=list)  # what was run, in order
    message: str = ""  # what happened; how to start by hand when activation failed


# --- file contents --------------------------------------------------------------------------


def _systemd_quote(value: str, *, dollars: bool = True) -> str:
    """One systemd word: double-quoted, with specifiers (%) and, in ExecStart, `$` kept literal."""
    if "\n" in value or "\r" in value:
        raise ConfigError(f"path {value!r} contains a line break; systemd cannot run it")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if dollars:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'


def unit_text(python: str, home: Path) -> str:
    """systemd user unit running `python -m total_recall daemon` with this home folder."""
    env = _systemd_quote(f"TOTAL_RECALL_HOME={home}", dollars=False)  # Environment= expands no $
    return "\n".join(
        [
            "[Unit]",
            "Description=total-recall memory daemon for Claude Code",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={_systemd_quote(python)} -m total_recall daemon",
            "Restart=on-failure",
            "RestartSec=5",
            f"Environment={env}",
            "UMask=0077",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def plist_bytes(python: str, home: Path) -> bytes:
    """launchd agent running `python -m total_recall daemon`, restarted when it fails."""
    log_path = str(config.Paths(home).log)
    return plistlib.dumps(
        {
            "Label": LABEL,
            "ProgramArguments": [python, "-m", "total_recall", "daemon"],
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},
            "EnvironmentVariables": {"TOTAL_RECALL_HOME": str(home)},
            "StandardOutPath": log_path,
            "StandardErrorPath": log_path,
            "ProcessType": "Background",
            "Umask": 0o077,
        }
    )


# --- locations ------------------------------------------------------------------------------


def _manager(system: str | None) -> str:
    system = system or sys.platform
    if system.startswith("linux"):
        return "systemd"
    if system == "darwin":
        return "launchd"
    raise ConfigError(f"no service support on {system}; {MANUAL_HINT}")


def service_path(manager: str) -> Path:
    """Where the unit/agent file lives; follows $HOME (and $XDG_CONFIG_HOME for systemd)."""
    if manager == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def _write_file(path: Path, content: bytes) -> bool:
    """Atomically write `content`; False when the file already held exactly that."""
    if path.is_file() and path.read_bytes() == content:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


# --- running the service manager ------------------------------------------------------------


def _run(report: ServiceReport, args: list[str]) -> subprocess.CompletedProcess[str] | None:
    """Run one service-manager command; None when the tool is not installed."""
    tool = shutil.which(args[0])
    if tool is None:
        return None
    report.commands.append(args)
    try:
        return subprocess.run([tool, *args[1:]], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(args, 1, "", str(exc))


def _run_all(report: ServiceReport, steps: list[list[str]]) -> None:
    """Run steps in order; stop at the first failure and say how to go on by hand."""
    for args in steps:
        done = _run(report, args)
        if done is None:
            # Trigger: systemctl/launchctl missing. Why: the file is useful once a service
            # manager appears, and the daemon also runs in the foreground. Outcome: manual hint.
            report.message = f"{args[0]} not found; {report.path} was written. To run now, {MANUAL_HINT}."
            return
        if done.returncode != 0:
            # Trigger: the manager refused (no user session bus, sandbox). Why: install must
            # still leave a usable setup. Outcome: its error plus the manual hint.
            why = (done.stderr or done.stdout).strip().splitlines()
            detail = why[0] if why else f"exit code {done.returncode}"
            report.message = (
                f"`{' '.join(args)}` failed ({detail}); {report.path} was written. {MANUAL_HINT}."
            )
            return
    report.active = True


def _python(python: str | None) -> str:
    python = os.path.abspath(python or sys.executable or "")
    if not os.path.isfile(python):
        raise ConfigError(f"no Python interpreter at {python!r}")
    return python


def install_service(python: str | None = None, *, system: str | None = None) -> ServiceReport:
    """Write the unit/agent for this home folder and ask the service manager to start it."""
    manager = _manager(system)
    python, home = _python(python), config.ensure_home().absolute()
    report = ServiceReport(manager=manager, path=service_path(manager))
    if manager == "systemd":
        report.written = _write_file(report.path, unit_text(python, home).encode("utf-8"))
        steps = [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", UNIT_NAME],
        ]
    else:
        report.written = _write_file(report.path, plist_bytes(python, home))
        # unload first so a changed agent is reloaded; its failure (not loaded yet) is fine.
        _run(report, ["launchctl", "unload", str(report.path)])
        steps = [["launchctl", "load", "-w", str(report.path)]]
    _run_all(report, steps)
    if report.active:
        report.message = f"service installed and started ({report.path})"
    log.info("service_installed", manager=manager, path=str(report.path), active=report.active)
    return report


def uninstall_service(*, system: str | None = None) -> ServiceReport:
    """Stop and disable the service, then remove its file."""
    manager = _manager(system)
    report = ServiceReport(manager=manager, path=service_path(manager))
    if manager == "systemd":
        stop = ["systemctl", "--user", "disable", "--now", UNIT_NAME]
        after = [["systemctl", "--user", "daemon-reload"]]
    else:
        stop = ["launchctl", "unload", "-w", str(report.path)]
        after = []
    if report.path.exists():
        _run(report, stop)  # a unit that is not loaded cannot be stopped; removal goes on
        report.path.unlink()
        report.written = True
    _run_all(report, after)
    report.message = f"removed {report.path}" if report.written else f"no service file at {report.path}"
    from total_recall import daemon

    stopped = daemon.stop_running(config.paths())  # a detached daemon of this home, too
    if stopped["was_running"]:
        report.message += f"; stopped the daemon (pid {stopped['pid']})"
    log.info("service_uninstalled", manager=manager, path=str(report.path))
    return report


def is_installed(*, system: str | None = None) -> bool:
    """Whether our unit/agent file exists (no service-manager call); False where none is supported."""
    try:
        return service_path(_manager(system)).is_file()
    except ConfigError:
        return False


def service_status(*, system: str | None = None) -> dict[str, Any]:
    """installed (file present), enabled/active as the manager reports them (None when unknown)."""
    manager = _manager(system)
    path = service_path(manager)
    status: dict[str, Any] = {"manager": manager, "path": str(path), "installed": path.is_file()}
    probe = ServiceReport(manager=manager, path=path)
    if manager == "systemd":
        active = _run(probe, ["systemctl", "--user", "is-active", UNIT_NAME])
        enabled = _run(probe, ["systemctl", "--user", "is-enabled", UNIT_NAME])
        status["active"] = None if active is None else active.stdout.strip() == "active"
        status["enabled"] = None if enabled is None else enabled.stdout.strip() == "enabled"
    else:
        listed = _run(probe, ["launchctl", "list", LABEL])
        status["active"] = None if listed is None else listed.returncode == 0
        status["enabled"] = status["installed"]
    from total_recall import daemon

    running = daemon.daemon_state(config.paths())
    # The daemon of this home, whoever started it: a detached one (`up` without a service
    # manager, or `total-recall daemon` by hand) runs while the service is inactive.
    managed_by = (manager if status["active"] else "detached") if running["running"] else None
    status["daemon"] = {"running": running["running"], "pid": running["pid"], "managed_by": managed_by}
    return status
