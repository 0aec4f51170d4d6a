"""Settings: defaults < $TOTAL_RECALL_HOME/config.toml < TOTAL_RECALL_<SECTION>_<KEY> environment.

The runtime paths (home folder, database, spool, status file, socket) live in `locations` and
are re-exported here (`config.paths()`), so every part of the system agrees on where things live.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, make_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from total_recall.errors import ConfigError
from total_recall.locations import (  # noqa: F401 - re-exported: config.paths() is the usual spelling
    DEFAULT_HOME,
    Paths,
    claude_config_dir,
    ensure_home,
    home,
    paths,
)

# Every key, its default and (from the default) its type. README.md documents each one; a test
# checks that it does.
DEFAULTS: dict[str, dict[str, Any]] = {
    "llm": {
        "base_url": "",  # OpenAI-compatible endpoint for extraction and HyDE; empty = offline
        "model": "gpt-4o-mini",
        "api_key": "",  # falls back to OPENAI_API_KEY
        "timeout": 120.0,
        "daily_token_budget": 2_000_000,  # past it: offline extractor until midnight UTC
        "json_mode": "auto",  # auto | on | off
        "max_prompt_chars": 60_000,
    },
    "embed": {
        "provider": "local",  # local | openai
        "base_url": "",  # for provider=openai; empty = https://api.openai.com/v1
        "model": "",  # empty = provider default
        "api_key": "",  # falls back to OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS, OPENAI_API_KEY
        "batch_size": 100,
        "timeout": 60.0,
    },
    "daemon": {
        "batch_window": 5.0,  # seconds to gather a session's new messages into one batch
        "poll_interval": 2.0,  # safety-net poll when no file event arrives
        "max_batch_messages": 40,  # messages per extraction call
        "idle_gap_minutes": 30.0,  # a pause this long inside a session starts a new topic
        "max_attempts": 5,  # non-transient failures before a queue item is parked
        "heartbeat": 60.0,
        "lease_seconds": 600.0,
        "file_timeout": 60.0,
    },
    "db": {
        "busy_timeout": 30.0,
        "driver": "",  # force stdlib | sqlean | pysqlite3; empty = first that loads sqlite-vec
    },
    "search": {
        "k": 10,
        "hyde": "auto",  # auto | on | off
        # on = with an LLM endpoint, the model orders the first rerank_depth results by how well
        # they answer the query (one call per search, while the user waits); off by default
        "rerank": "off",  # on | off
        "rerank_depth": 30,
        "llm_timeout": 20.0,  # seconds a call a user waits on (HyDE, re-ranking) may take
        # the daemon holds the vectors in memory for searches up to this size (vector_cache.py);
        # 0 = sqlite-vec scans them on every search
        "vector_cache_mb": 256,
    },
    "context": {
        "enabled": True,  # SessionStart digest injection
        "budget_chars": 4000,
    },
    "machine": {
        "name": "",  # recorded next to file:line of every memory said here; empty = the host name
    },
    "store": {
        # where memories live: empty = memory.db here (SQLite); postgresql://user:pass@host/db =
        # a PostgreSQL + pgvector server shared by machines (TOTAL_RECALL_STORE_URL)
        "url": "",
    },
    "privacy": {
        "extra_roots": [],  # folders besides $CLAUDE_CONFIG_DIR/projects whose transcripts may be read
        "exclude_projects": [],  # globs of project paths (or Claude's folder names) never read
    },
}


# Ranges each number must lie in (checked once, at load): a zero or NaN poll interval would spin
# a core, a zero lease would hand every claim to the next worker. (low, low is allowed)
RANGES: dict[str, tuple[float, bool]] = {
    "llm.timeout": (0, False),
    "llm.daily_token_budget": (0, True),
    "llm.max_prompt_chars": (1, True),
    "embed.batch_size": (1, True),
    "embed.timeout": (0, False),
    "daemon.batch_window": (0, True),
    "daemon.poll_interval": (0, False),
    "daemon.max_batch_messages": (1, True),
    "daemon.idle_gap_minutes": (0, False),
    "daemon.max_attempts": (1, True),
    "daemon.heartbeat": (0, False),
    "daemon.lease_seconds": (0, False),
    "daemon.file_timeout": (0, True),
    "db.busy_timeout": (0, True),
    "search.k": (1, True),
    "search.vector_cache_mb": (0, True),
    "search.rerank_depth": (2, True),
    "search.llm_timeout": (0, False),
    "context.budget_chars": (0, True),
}
CHOICES: dict[str, set[str]] = {
    "llm.json_mode": {"auto", "on", "off"},
    "embed.provider": {"local", "openai"},
    "db.driver": {"", "stdlib", "sqlean", "pysqlite3"},
    "search.hyde": {"auto", "on", "off"},
    "search.rerank": {"on", "off"},
}


_SECTION_TYPES: dict[str, type] = {}


def _section_type(section: str) -> type:
    """A frozen dataclass per section, its fields typed by their defaults (search.k: int, ...).

    Made on first use, not at import: seven dataclasses cost milliseconds that the CLI's warm
    search path (which never loads the settings) should not pay.
    """
    if section not in _SECTION_TYPES:
        fields = [(key, type(default)) for key, default in DEFAULTS[section].items()]
        _SECTION_TYPES[section] = make_dataclass(f"{section.title()}Settings", fields, frozen=True)
    return _SECTION_TYPES[section]


@dataclass(frozen=True)
class Settings:
    """Loaded and validated once (`load`), then passed down; immutable.

    Read a value as an attribute, typed: `settings.daemon.poll_interval` (a float > 0).
    """

    llm: Any
    embed: Any
    daemon: Any
    db: Any
    search: Any
    context: Any
    machine: Any
    store: Any
    privacy: Any
    sources: Mapping[str, str] = field(default_factory=dict)  # "llm.base_url" -> default|file|env
    environ: Any = field(default_factory=lambda: os.environ, repr=False)

    @property
    def values(self) -> dict[str, dict[str, Any]]:
        """Every section as a plain dict (a copy), for `doctor` and the README check."""
        return {section: asdict(getattr(self, section)) for section in DEFAULTS}

    def get(self, section: str, key: str) -> Any:
        return getattr(getattr(self, section), key)

    def llm_enabled(self) -> bool:
        return bool(self.llm.base_url)

    def machine_name(self) -> str:
        """The name this machine's memories carry next to file:line ([machine] name, else the host)."""
        import socket

        return self.machine.name.strip() or socket.gethostname() or "localhost"

    def llm_api_key(self) -> str:
        return self.llm.api_key or self.environ.get("OPENAI_API_KEY", "")

    def embed_api_key(self) -> str:
        return (
            self.embed.api_key
            or self.environ.get("OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS", "")
            or self.environ.get("OPENAI_API_KEY", "")
        )

    def redacted(self) -> dict[str, dict[str, Any]]:
        """The settings with secrets masked, for `doctor` and logs."""
        out = self.values
        for section in out.values():
            for key in section:
                if key.endswith("api_key") and section[key]:
                    section[key] = "***"
        out["store"]["url"] = without_password(out["store"]["url"])
        return out


def without_password(url: str) -> str:
    """A connection URL fit for logs, doctor and errors: its password (and any password=
    parameter) replaced by ***."""
    import re

    scheme, sep, rest = url.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        url = f"{scheme}://{netloc}{slash}{tail}"
    return re.sub(r"(?i)(password=)[^&\s]*", r"\1***", url)


def _check(name: str, value: Any, where: str) -> None:
    """Refuse a value outside its range or choices, naming where it came from.

    Trigger: a config.toml or environment value such as poll_interval = 0 or nan. Why: the daemon
    would spin a core or never wake; better to refuse at start-up than misbehave quietly.
    Outcome: ConfigError with the setting, the value and what is allowed.
    """
    if name in RANGES:
        low, inclusive = RANGES[name]
        ok = math.isfinite(value) and (value >= low if inclusive else value > low)
        if not ok:
            bound = f">= {low}" if inclusive else f"> {low}"
            raise ConfigError(f"{where}: must be a finite number {bound}, got {value!r}")
    if name in CHOICES and str(value).strip().lower() not in CHOICES[name]:
        allowed = ", ".join(repr(c) for c in sorted(CHOICES[name]))
        raise ConfigError(f"{where}: must be one of {allowed}, got {value!r}")


def env_name(section: str, key: str) -> str:
    return f"TOTAL_RECALL_{section.upper()}_{key.upper()}"


def _coerce(raw: Any, default: Any, where: str) -> Any:
    if isinstance(default, list):
        if isinstance(raw, str):  # environment: comma-separated
            return [part.strip() for part in raw.split(",") if part.strip()]
        if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            return list(raw)
        raise ConfigError(f"{where}: expected a list of strings, got {raw!r}")
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off", ""}:
            return False
        raise ConfigError(f"{where}: expected true/false, got {raw!r}")
    if isinstance(default, (int, float)):
        try:
            return type(default)(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {raw!r}") from None
    return str(raw)


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def load(environ: dict[str, str] | None = None, config_path: Path | None = None) -> Settings:
    """Defaults < config.toml < TOTAL_RECALL_<SECTION>_<KEY>, each value typed and range-checked."""
    environ = os.environ if environ is None else environ
    file_values = _read_toml(config_path or paths().config)
    sections: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for section, keys in DEFAULTS.items():
        file_section = file_values.get(section, {})
        if not isinstance(file_section, dict):
            raise ConfigError(f"config.toml: [{section}] must be a table")
        unknown = set(file_section) - set(keys)
        if unknown:
            raise ConfigError(f"config.toml: unknown key(s) in [{section}]: {', '.join(sorted(unknown))}")
        values = {}
        for key, default in keys.items():
            value, source, where = default, "default", f"default [{section}] {key}"
            if key in file_section:
                where = f"config.toml [{section}] {key}"
                value, source = _coerce(file_section[key], default, where), "file"
            name = env_name(section, key)
            if name in environ:
                value, source, where = _coerce(environ[name], default, name), "env", name
            _check(f"{section}.{key}", value, where)
            values[key] = value
            sources[f"{section}.{key}"] = source
        sections[section] = _section_type(section)(**values)
    return Settings(**sections, sources=MappingProxyType(sources), environ=environ)


def write_private(path: Path, text: str) -> None:
    """Atomically replace a small file with one readable by the user only (0600)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def set_store_url(url: str, path: Path | None = None) -> Path:
    """Record `[store] url` in config.toml (kept 0600: the URL may hold a password), keeping the
    rest of the file as it is."""
    import json as _json

    path = path or paths().config
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    line = f"url = {_json.dumps(url)}"
    lines = text.splitlines()
    start = next((i for i, s in enumerate(lines) if s.strip() == "[store]"), None)
    if start is None:
        lines += ["", "[store]", line]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        keys = [i for i in range(start + 1, end) if lines[i].split("=")[0].strip() == "url"]
        if keys:
            lines[keys[0]] = line
        else:
            lines.insert(start + 1, line)
    ensure_home()
    write_private(path, "\n".join(lines).lstrip("\n") + "\n")
    _read_toml(path)  # refuse to leave a file we cannot read back
    return path


def resource_dir(name: str) -> Path:
    """A folder shipped with the package (hooks, skills, migrations, assets).

    Installed wheels carry them inside the package; a source checkout has them at the
    repository root (pyproject maps one onto the other).
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"packaged folder {name!r} is missing; reinstall total-recall")
