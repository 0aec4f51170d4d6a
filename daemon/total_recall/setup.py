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


def start_background_daemon() -> int | None:
    """Start `total-recall daemon` detached, logging to the private daemon.log; None if one runs."""
    from total_recall import daemon

    paths = config.paths()
    status = daemon.read_status(paths)
    if status and status.get("alive") and status.get("state") == "running":
        return None
    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "total_recall", "daemon"],
        stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True, close_fds=True,
    )
    os.close(fd)
    return proc.pid


def up(*, backfill: bool = True, service: bool = True) -> dict:
    """init + hooks + skills + a running daemon (service when the OS has one) + backfill --all."""
    from total_recall import backfill as backfill_mod
    from total_recall import install, service as service_mod

    out: dict = {"init": init()}
    report = install.install()
    out["hooks"] = {"settings": str(report.settings_path), "changed": report.changed, "skills": report.skills}
    if service:
        try:
            svc = service_mod.install_service()
            out["service"] = {"manager": svc.manager, "path": str(svc.path), "active": svc.active,
                              "message": svc.message}
            active = svc.active
        except ConfigError as exc:  # no systemd/launchd on this OS
            out["service"], active = {"active": False, "message": str(exc)}, False
        if not active:
            # Trigger: no service manager accepted the unit (containers, CI, WSL without systemd).
            # Why: the memory should still run now. Outcome: a detached daemon until logout/reboot.
            out["daemon_pid"] = start_background_daemon()
    if backfill:
        out["backfill"] = backfill_mod.backfill(None, all_transcripts=True)
    out["next"] = "ask Claude Code: /total-recall:remember <what you want to recall>"
    return out
