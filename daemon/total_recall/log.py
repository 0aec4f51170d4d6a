"""structlog configuration, called only from entry points (CLI, daemon)."""

from __future__ import annotations

import logging
import sys


def configure(level: str = "info", stream=None) -> None:
    """Console renderer on a TTY, JSON lines otherwise (systemd/launchd capture those)."""
    import structlog

    stream = stream or sys.stderr
    renderer = (
        structlog.dev.ConsoleRenderer(colors=False)
        if stream.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
