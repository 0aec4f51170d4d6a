"""`init` and `up`: from nothing to a running memory on the embedded default."""

from __future__ import annotations

import os
import subprocess
import sys

from total_recall import config
from total_recall.errors import ConfigError

CONFIG_TEMPLATE_HEADER = """\
# total-recall settings. Every key can also be set with TOTAL_RECALL_<SECTION>_<KEY>.
# Uncomment to change a default. See README.md for what each key does.
"""


def config_template() -> str:
    lines = [CONFIG_TEMPLATE_HEADER]
    for section, keys in config.DEFAULTS.items():
        lines.append(f"\n[{section}]")
        for key, value in keys.items():
            shown = str(value).lower() if isinstance(value, bool) else value
            lines.append(f"# {key} = {shown!r}" if isinstance(value, str) else f"# {key} = {shown}")
    return "\n".join(lines).replace("'", '"') + "\n"


def init() -> dict:
    """Create the home folder (0700), a commented config.toml (0600) and the database (0600)."""
    from total_recall import db

    home = config.ensure_home()
    paths = config.paths()
    if not paths.config.exists():
        fd = os.open(paths.config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(config_template())
    database = db.connect(paths.db, settings=config.load())
    try:
        return {
            "home": str(home),
            "config": str(paths.config),
            "database": str(paths.db),
            "schema_version": db.schema_version(database),
            "vector_search": database.has_vec,
            "sqlite_vec": database.vec_version or f"unavailable: {database.vec_error}; {db.VEC_FIX_HINT}",
        }
    finally:
        database.close()


def start_background_daemon(wait: float = 15.0) -> dict:
    """Start `total-recall daemon` detached, logging to the private daemon.log, unless one runs.

    Waits until the new process holds the daemon lock, so what is reported is what runs.
    """
    from total_recall import daemon

    paths = config.paths()
    state = daemon.daemon_state(paths)
    if state["running"]:
        return {"running": True, "pid": state["pid"], "started_now": False}
    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "total_recall", "daemon"],
        stdin=subprocess.DEVNULL,
        stdout=fd,
        stderr=fd,
        start_new_session=True,
        close_fds=True,
    )
    os.close(fd)
    state = daemon.wait_until_running(paths, wait, gave_up=lambda: proc.poll() is not None)
    if not state["running"]:
        return {
            "running": False,
            "pid": None,
            "started_now": False,
            "message": f"the daemon did not start (exit code {proc.poll()}); see {paths.log}",
        }
    pid = state["pid"]  # None: the holder has not written its pid yet, so it is ours
    return {"running": True, "pid": pid or proc.pid, "started_now": pid in (None, proc.pid)}


def ensure_daemon(*, service: bool = True) -> dict:
    """A running daemon: the OS service when its manager accepts the unit, else a detached process."""
    from total_recall import daemon
    from total_recall import service as service_mod

    out: dict = {}
    if service:
        try:
            svc = service_mod.install_service()
            out["service"] = {"manager": svc.manager, "path": str(svc.path), "active": svc.active}
            if not svc.active:
                hint = service_mod.MANUAL_HINT  # we start one below, so the hint would be wrong
                problem = svc.message.replace(f" To run now, {hint}.", "").replace(f" {hint}.", "")
                out["service"]["problem"] = problem
        except ConfigError as exc:  # no systemd/launchd on this OS
            out["service"] = {"active": False, "problem": str(exc).split(";")[0]}
        if out["service"]["active"]:
            state = daemon.wait_until_running(config.paths(), 10.0)
            out["daemon"] = {
                "running": state["running"],
                "pid": state["pid"],
                "managed_by": out["service"]["manager"],
            }
            return out
    # Trigger: no service manager accepted the unit (containers, CI, WSL without systemd), or
    # --no-service. Why: the memory should still run now. Outcome: a detached daemon, not
    # restarted after a reboot, said as such.
    started = start_background_daemon()
    out["daemon"] = {**started, "managed_by": "detached"}
    if started["running"]:
        how = "started now" if started["started_now"] else "already running"
        out["daemon"]["message"] = (
            f"daemon {how} as a detached process (pid {started['pid']}); nothing "
            "restarts it after a reboot; `total-recall stop` stops it"
        )
    return out


def up(*, backfill: bool = True, service: bool = True) -> dict:
    """init + hooks + skills + a running daemon (service when the OS has one) + backfill --all."""
    from total_recall import backfill as backfill_mod
    from total_recall import install

    out: dict = {"init": init()}
    report = install.install()
    out["hooks"] = {"settings": str(report.settings_path), "changed": report.changed, "skills": report.skills}
    out.update(ensure_daemon(service=service))
    if backfill:
        out["backfill"] = backfill_mod.backfill(
            config.load(), None, all_transcripts=True
        )  # after init wrote it
    out["next"] = f"ask Claude Code: {install.remember_command()} <what you want to recall>"
    return out
