"""What every benchmark shares: an isolated home, the CLI and daemon as processes, statistics, the machine.

Every run points TOTAL_RECALL_HOME and CLAUDE_CONFIG_DIR at a fresh temporary folder (in this
process and in every child), so a benchmark never reads or writes the user's real memory.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
DEFAULT_LOCOMO = REPO.parent / "shared" / "bench" / "locomo-dev.json"
INHERITED_SETTINGS = ("OPENAI_API_KEY", "OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS", "OPENAI_BASE_URL")


def quiet() -> None:
    """Entry-point logging for a benchmark: warnings only, on stderr, so stdout carries the figures."""
    from total_recall import log

    log.configure("warning")


def compile_package() -> None:
    """Byte-compile the package as installing it does, so that the processes a benchmark times load
    compiled modules: with PYTHONDONTWRITEBYTECODE set (or a read-only checkout) an edited module
    was compiled again by every process, 4 ms for cli.py alone, which no installed copy pays."""
    import compileall

    import total_recall

    compileall.compile_dir(str(Path(total_recall.__file__).parent), quiet=1)


def cli_argv() -> list[str]:
    """The `total-recall` command of this interpreter's environment (console script when installed)."""
    script = Path(sys.executable).with_name("total-recall")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "total_recall"]


class Sandbox:
    """A temporary home + Claude config dir; a context manager that also sets them in os.environ.

    `root` keeps the files (for a cached database); otherwise a temp folder is made and removed.
    """

    def __init__(
        self, root: Path | None = None, *, extra_env: dict[str, str] | None = None, keep: bool = False
    ):
        self._made = root is None
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="tr-bench-"))
        self.home = self.root / "home"
        self.claude = self.root / "claude"
        self.extra_env = dict(extra_env or {})
        self.keep = keep or not self._made
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> Sandbox:
        self.claude.mkdir(parents=True, exist_ok=True)
        for name, value in self.env_overrides().items():
            self._saved[name] = os.environ.get(name)
            os.environ[name] = value
        for name in [n for n in os.environ if n.startswith("TOTAL_RECALL_") or n in INHERITED_SETTINGS]:
            if name not in self._saved:
                self._saved[name] = os.environ.pop(name)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def env_overrides(self) -> dict[str, str]:
        return {"TOTAL_RECALL_HOME": str(self.home), "CLAUDE_CONFIG_DIR": str(self.claude), **self.extra_env}

    def env(self) -> dict[str, str]:
        """The environment of a child process: inherited minus our settings, plus this sandbox's."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("TOTAL_RECALL_") and k not in INHERITED_SETTINGS
        }
        env.update(self.env_overrides())
        env["PYTHONUNBUFFERED"] = "1"
        return env

    @property
    def db_path(self) -> Path:
        return self.home / "memory.db"

    def cli(
        self, *args: str, cwd: str | Path | None = None, timeout: float = 3600, check: bool = True
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [*cli_argv(), *args], capture_output=True, text=True, env=self.env(), cwd=cwd, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"total-recall {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        return proc

    def start_daemon(self, log_name: str = "daemon.out") -> subprocess.Popen:
        self.home.mkdir(parents=True, exist_ok=True)
        log = (self.root / log_name).open("ab")
        proc = subprocess.Popen([*cli_argv(), "daemon"], stdout=log, stderr=log, env=self.env())
        log.close()
        return proc

    def wait_for_socket(self, proc: subprocess.Popen, timeout: float = 120) -> None:
        """Until the daemon answers a ping on its socket (model not necessarily loaded yet)."""
        self._ping_until(proc, timeout, lambda answer: True, "daemon socket did not answer in time")

    def wait_for_vector_cache(self, proc: subprocess.Popen, timeout: float = 600) -> tuple[str, float]:
        """Until the daemon's vectors in memory are loaded, or it decided not to hold them
        (vector_cache.py); returns its state and the seconds waited."""
        answer, seconds = self._ping_until(
            proc,
            timeout,
            lambda answer: answer.get("vector_cache", "off") not in ("empty", "loading", "reloading"),
            "the daemon's vectors were not loaded in time",
        )
        return answer.get("vector_cache", "off"), seconds

    def _ping_until(self, proc: subprocess.Popen, timeout: float, done, late: str) -> tuple[dict, float]:
        """Ping the daemon every 0.1 s until an answer satisfies `done`: (that answer, seconds)."""
        from total_recall import server

        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {proc.returncode}; see {self.root / 'daemon.out'}")
            answer = server.ask(self.home / "daemon.sock", {"op": "ping"})
            if answer and done(answer):
                return answer, time.monotonic() - started
            time.sleep(0.1)
        raise RuntimeError(late)


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGTERM one process we started and wait for it (the daemon finishes its batch first)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- statistics -------------------------------------------------------------------------------
def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * p / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    return statistics.median(values), percentile(values, 95)


def timed(fn, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - started, value


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# -- reporting --------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (readable in a terminal too)."""
    rows = [[_cell(v) for v in row] for row in rows]
    widths = [
        max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)
    ]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def machine() -> dict[str, Any]:
    """Cores, memory, Python, SQLite and sqlite-vec versions of the driver total-recall picks."""
    info: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_1_5_15": [round(v, 2) for v in os.getloadavg()],
    }
    with Sandbox() as box:
        from total_recall import db as dbmod

        database = dbmod.connect(box.db_path)
        try:
            info["sqlite"] = database.scalar("SELECT sqlite_version()")
            info["sqlite_driver"] = database.driver
            info["sqlite_vec"] = database.vec_version
        finally:
            database.close()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def print_machine() -> None:
    print("machine: " + json.dumps(machine()))


def rss_kb(pid: int, field: str = "VmRSS") -> int | None:
    """A memory figure of a live process from /proc (kB); None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
