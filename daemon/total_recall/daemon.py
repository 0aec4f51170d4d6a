"""The long-running worker: drain the spool, claim queued transcripts, index them.

Signal handlers only set a flag; the loop finishes the current batch and exits. A flock on
daemon.lock makes it single-instance per home folder. A small status file lets `status` answer
without talking to the daemon.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, queue, repoint, state, transcript, trust
from total_recall.db import Database
from total_recall.errors import DaemonRunning, TransientError
from total_recall.indexer import Indexer

log = structlog.get_logger(__name__)

MAINTAIN_EVERY = 7 * 86400.0


@dataclass
class Status:
    pid: int = field(default_factory=os.getpid)
    started: float = field(default_factory=time.time)
    state: str = "starting"
    queue: dict = field(default_factory=dict)
    last_error: str | None = None
    last_batch: dict | None = None
    batches: int = 0
    updated: float = 0.0


def write_json_private(path: Path, data: dict) -> None:
    config.write_private(path, json.dumps(data, default=str))


def read_status(paths: config.Paths) -> dict | None:
    try:
        data = json.loads(paths.status.read_text())
    except (OSError, ValueError):
        return None
    data["alive"] = pid_alive(int(data.get("pid", 0)))
    return data


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_pid(paths: config.Paths) -> int | None:
    """The pid of the process holding this home's daemon lock; None when nobody holds it.

    The kernel's answer (flock), not the status file's: a daemon killed by SIGKILL leaves a status
    file saying "running" but releases its lock. 0 when the holder has not written its pid yet.
    """
    try:
        fd = os.open(paths.lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = _written_pid(fd)
            return int(text) if text.isdecimal() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def daemon_state(paths: config.Paths) -> dict:
    """One truthful answer to "does a daemon run for this home?", used by every command."""
    pid = running_pid(paths)
    for _ in range(20):  # the holder writes its pid right after taking the lock
        if pid != 0:
            break
        time.sleep(0.05)
        pid = running_pid(paths)
    data = read_status(paths) or {}
    if pid is not None and data.get("pid") != pid:
        data = {}  # the status file is a previous daemon's
    return {
        "running": pid is not None,
        "pid": pid or None,
        "state": data.get("state") if pid else "stopped",
        "started": data.get("started") if pid else None,
        "status_updated": data.get("updated"),
        "last_error": data.get("last_error"),
        "last_batch": data.get("last_batch"),
    }


def wait_until_running(
    paths: config.Paths, timeout: float, *, gave_up: Callable[[], bool] = lambda: False
) -> dict:
    """daemon_state, once a daemon runs or after `timeout` seconds, or as soon as gave_up() (the
    process that was to become the daemon exited)."""
    deadline = time.monotonic() + timeout
    state = daemon_state(paths)
    while not state["running"] and time.monotonic() < deadline and not gave_up():
        time.sleep(0.05)
        state = daemon_state(paths)
    return state


def stop_running(paths: config.Paths, *, timeout: float = 30.0) -> dict:
    """SIGTERM the daemon of this home, SIGKILL it after `timeout`; remove a stale socket.

    The daemon finishes its current batch on SIGTERM (DESIGN.md I15); what is left stays queued.
    A service manager does not restart it: the exit is clean (systemd Restart=on-failure,
    launchd KeepAlive only after a failed exit).
    """
    state = daemon_state(paths)
    pid = state["pid"]
    out: dict[str, Any] = {"was_running": state["running"], "pid": pid, "signal": None}
    if pid:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            out["signal"] = sig.name
            log.info("daemon_stop_sent", pid=pid, signal=sig.name)
            deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 10.0)
            # Gone means gone: the lock is released a moment before the process has exited.
            while (running_pid(paths) is not None or not _exited(pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if running_pid(paths) is None and _exited(pid):
                break
    out["running"] = running_pid(paths) is not None
    if not out["running"]:
        out["removed_socket"] = _remove_stale_socket(paths)
    return out


def _exited(pid: int) -> bool:
    """The process is gone (or a zombie waiting for its parent to collect its exit status)."""
    if not pid_alive(pid):
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _remove_stale_socket(paths: config.Paths) -> bool:
    try:
        paths.socket.unlink()
        return True
    except FileNotFoundError:
        return False


HOLDER_WAIT = 1.0  # seconds a refused daemon waits for the lock holder's pid


def _written_pid(fd: int) -> str:
    """What the lock's holder wrote in daemon.lock (its pid), as text; '' when nothing yet."""
    return os.pread(fd, 32, 0).decode(errors="replace").strip()


class InstanceLock:
    """flock on daemon.lock; the kernel releases it when the process dies, even by SIGKILL."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise DaemonRunning(
                f"another total-recall daemon (pid {holder}) is already running for {self.path.parent}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        """The pid the lock's holder wrote. It writes it just after taking the lock, so a daemon
        started at the same instant may read the file empty, or still holding the pid of the
        daemon before: wait a moment (HOLDER_WAIT) for a pid that is alive."""
        deadline = time.monotonic() + HOLDER_WAIT
        while True:
            holder = _written_pid(fd)
            if (holder.isdecimal() and pid_alive(int(holder))) or time.monotonic() >= deadline:
                return holder or "?"
            time.sleep(0.01)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def is_transient(exc: BaseException, db: Database) -> bool:
    if isinstance(exc, TransientError) or isinstance(exc, OSError):
        return True
    if isinstance(exc, db.dbapi.OperationalError):
        text = str(exc).lower()
        return any(w in text for w in ("locked", "busy", "disk", "full", "i/o"))
    return False


class Daemon:
    def __init__(
        self,
        db: Database,
        settings: config.Settings,
        paths: config.Paths,
        *,
        indexer: Indexer | None = None,
        clock: Callable[[], float] = time.time,
        store: Any = None,
    ):
        self.db = db  # the local SQLite file: work queue (and memories when no [store] url)
        # The memory store: `db`, or the PostgreSQL store that [store] url names (the queue stays here).
        self.store = store if store is not None else db
        self.clock = clock  # tests drive leases, backoff and the batch window without sleeping
        self.settings = settings
        self.paths = paths
        self.indexer = indexer or Indexer(self.store, settings)
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.status = Status()
        self._last_heartbeat = 0.0
        self._last_decay: float | None = None
        self._seen_event: int | None = None  # memory_events id the digests were written at
        self._unrecorded: list[Callable[[], Any]] = []  # queue updates the database refused

    def install_signal_handlers(self) -> None:
        def handler(signum, _frame):
            log.info("signal", signal=signal.Signals(signum).name)
            self.stop.set()
            self.wake.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def start_watcher(self) -> threading.Thread:
        """Wake the loop at once when a hook touches `wake` or appends to the spool."""

        def run() -> None:
            try:
                import watchfiles

                names = {self.paths.wake.name, self.paths.spool.name}
                for changes in watchfiles.watch(
                    self.paths.home,
                    stop_event=self.stop,
                    rust_timeout=1000,
                    yield_on_timeout=True,
                    debounce=50,
                    recursive=False,
                ):
                    if any(Path(p).name in names for _, p in changes):
                        self.wake.set()
            except Exception as exc:  # the poll below still runs every poll_interval seconds
                log.warning("watcher_stopped", error=str(exc))

        thread = threading.Thread(target=run, name="watcher", daemon=True)
        thread.start()
        return thread

    def step(self, *, now: float | None = None, immediate: bool = False) -> bool:
        """Do one unit of work; return whether there was any."""
        now = self.clock() if now is None else now
        while self._unrecorded:  # raises while the database still refuses them: step_failed, backoff
            self._unrecorded[0]()
            self._unrecorded.pop(0)
        queue.drain_spool(self.db, self.paths.spool)
        claim = queue.claim_next(
            self.db,
            now=now,
            window=self.settings.daemon.batch_window,
            lease=self.settings.daemon.lease_seconds,
            immediate=immediate,
        )
        if claim is None:
            return False
        self._run_claim(claim)
        return True

    def _run_claim(self, claim: queue.Claim) -> None:
        started = self.clock()
        bound = log.bind(file=claim.transcript_path, rows=len(claim.row_ids), attempt=claim.attempts + 1)
        try:
            report = self.indexer.process(
                claim.transcript_path,
                session_hint=claim.session_id,
                cwd_hint=claim.cwd,
                should_stop=self.stop.is_set,
            )
        except Exception as exc:  # loop boundary: log with traceback, retry or park, never drop
            transient = is_transient(exc, self.db)
            error = f"{type(exc).__name__}: {exc}"
            self.status.last_error = f"{claim.transcript_path}: {error}"
            bound.error(
                "batch_failed", transient=transient, error=str(exc), traceback=traceback.format_exc(limit=8)
            )
            state = self._record(
                lambda: queue.fail(
                    self.db,
                    claim,
                    error,
                    transient=transient,
                    max_attempts=self.settings.daemon.max_attempts,
                    now=self.clock(),
                )
            )
            bound.info("batch_requeued", outcome=state)
            return
        if report.interrupted:
            self._record(lambda: queue.release(self.db, claim))
            bound.info("stopped_between_batches", batches=report.batches, ideas=report.ideas_added)
            return
        if report.deferred:  # daemon.file_timeout: the rest after the other transcripts
            self._record(lambda: queue.defer(self.db, claim, now=self.clock()))
            bound.info(
                "deferred",
                lines=report.lines,
                batches=report.batches,
                seconds=round(self.clock() - started, 3),
            )
        else:
            note = "transcript missing" if report.missing else None
            note = f"refused: {report.refused}" if report.refused else note
            self._record(lambda: queue.complete(self.db, claim, note))
            if not (report.missing or report.refused):
                self._follow_subagents(claim.transcript_path, claim.session_id)
        if (
            report.scrubbed
        ):  # a secret hidden in rows of other projects too: every digest, this one's included
            from total_recall import maintain

            maintain.refresh_all_digests(self.store)
        else:
            self._refresh_digest(claim.transcript_path)
        self.status.batches += 1
        self.status.last_batch = {
            **report.__dict__,
            "seconds": round(self.clock() - started, 3),
            "at": self.clock(),
        }
        bound.info(
            "indexed",
            lines=report.lines,
            messages=report.messages,
            batches=report.batches,
            ideas=report.ideas_added,
            llm_calls=report.llm_calls,
            rewritten=report.rewritten,
            missing=report.missing,
            seconds=round(self.clock() - started, 3),
        )

    def _record(self, update: Callable[[], Any]) -> Any:
        """Apply a queue update now, or keep it for the next step if the database refuses it.

        Trigger: the disk is full or the database stays locked past busy_timeout. Why: the rows
        would otherwise stay 'claimed' until their lease expires (10 min by default) although
        this daemon is alive and the fault may clear in seconds. Outcome: `step` applies the kept
        updates before claiming anything new.
        """
        try:
            return update()
        except Exception as exc:
            if is_transient(exc, self.db):  # anything else is left to the lease, not retried here
                self._unrecorded.append(update)
            raise

    def _follow_subagents(self, transcript_path: str, session: str | None) -> None:
        """Trigger: a session's transcript was read. Why: a subagent's file (a workflow agent's too)
        is announced by SubagentStop only, and an agent that never finishes (killed with its session:
        the user quit while it ran, and 2.1.332 runs agents in the background by default) never fires
        it, though its file holds all it did. Outcome: each agent file under `<session>/subagents/`
        with bytes not yet indexed, and no row waiting in the queue, is queued."""
        folder = Path(transcript_path).with_suffix("") / transcript.SUBAGENTS
        if not folder.is_dir():
            return
        try:
            agents = {str(p): p.stat().st_size for p in transcript.discover(folder)}
        except OSError:
            return
        read = state.byte_offsets_under(self.store, str(folder))
        behind = [p for p, size in agents.items() if size > read.get(p, 0)]
        for path in sorted(set(behind) - queue.waiting(self.db, behind)):
            if trust.refusal(path, self.settings) is None:
                self._record(
                    lambda path=path: queue.enqueue(
                        self.db, path, session_id=session, event="subagent", size_seen=agents[path]
                    )
                )

    def _refresh_digest(self, transcript_path: str) -> None:
        """Keep the SessionStart digest of the transcript's project current (read by the hook), and
        of every other checkout of it on this machine (a second clone or worktree of the repository)."""
        from total_recall import digest, memories, state

        project = state.project_of(self.store, transcript_path)
        if project:
            same = memories.same_projects(self.store, [project])
            try:
                digest.write_digests(self.store, [project, *(p for p in same[1:] if os.path.isdir(p))])
            except OSError as exc:  # a full disk must not fail the batch that was already committed
                log.warning("digest_write_failed", project=project, error=str(exc))

    def housekeeping(self, now: float) -> None:
        """Heartbeat chores: prune old queue rows, repair vectors (and refresh a slice of those an
        older recipe made), move a slice of the pointers an older indexer left, decay working
        memory, weekly maintain."""
        from total_recall import maintain

        queue.prune_done(self.db, now=now)
        self.indexer.embed_pending()
        self.indexer.vectors.refresh_stale()  # one slice: indexing new turns waits a few seconds at most
        if repoint.run_slice(self.store, self.settings)["moved"]:  # likewise: pointers an older indexer left
            maintain.refresh_all_digests(self.store)  # they cite file:line
        self.indexer.reextract_fallbacks()
        if self.store is not self.db:
            self._follow_shared_store()
        maintain.decay_activation(self.store, now - (self._last_decay or now))
        self._last_decay = now
        last = float(self.store.get_meta("last_maintain") or 0)
        if now - last > MAINTAIN_EVERY:
            log.info("maintenance", report=maintain.maintain(self.store, self.settings))

    def _follow_shared_store(self) -> None:
        """Trigger: a shared (PostgreSQL) store changed since the last heartbeat. Why: another
        machine may have forgotten, pinned or added what this machine's SessionStart digests show.
        Outcome: this home's digests are rewritten from the store."""
        from total_recall import maintain, memories

        latest = memories.last_event(self.store)
        if latest != self._seen_event:
            maintain.refresh_all_digests(self.store)
            self._seen_event = latest

    def heartbeat(self, *, force: bool = False) -> None:
        now = self.clock()
        # A negative elapsed time is a clock stepped back (NTP, a resumed VM): the heartbeat is
        # due, or the chores and the status file would wait for the size of the step.
        if not force and 0 <= now - self._last_heartbeat < self.settings.daemon.heartbeat:
            return
        self._last_heartbeat = now
        try:
            self.status.queue = queue.depth(self.db)
            self.status.updated = now
            write_json_private(self.paths.status, self.status.__dict__)
            if not force:
                self.housekeeping(now)
                log.info(
                    "heartbeat", state=self.status.state, queue=self.status.queue, batches=self.status.batches
                )
        except Exception as exc:  # loop boundary for chores
            # Trigger: the disk is full (status file), the database stays locked past busy_timeout
            # (pruning, decay), or the repair pass fails. Why: chores must never stop indexing.
            # Outcome: logged with its traceback, tried again at the next heartbeat.
            self.status.last_error = f"heartbeat: {type(exc).__name__}: {exc}"
            log.warning("heartbeat_failed", error=str(exc), traceback=traceback.format_exc(limit=8))

    def run(self, *, once: bool = False) -> int:
        self.status.state = "running"
        self.heartbeat(force=True)
        while not self.stop.is_set():
            try:
                worked = self.step(immediate=once)
            except Exception as exc:  # e.g. database locked by another writer for > busy_timeout
                self.status.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("step_failed", error=str(exc))
                worked = False
                if not self.stop.wait(queue.backoff(3)):
                    continue
            self.heartbeat(force=worked and once)
            if once and not worked:
                break
            if not worked:
                self._sleep()
        self.status.state = "stopped"
        self.heartbeat(force=True)
        return 0

    def _sleep(self) -> None:
        wait = self.settings.daemon.poll_interval
        try:
            ready = queue.next_ready_in(self.db, now=time.time(), window=self.settings.daemon.batch_window)
        except Exception:
            ready = None
        if ready is not None:
            wait = min(wait, max(0.05, ready))
        self.wake.wait(wait)
        self.wake.clear()


def run_daemon(*, once: bool = False, settings: config.Settings | None = None) -> int:
    """Entry point of `total-recall daemon`: lock, open, loop, clean up."""
    from total_recall import db as dbmod

    os.umask(0o077)
    settings = settings or config.load()
    config.ensure_home()
    paths = config.paths()
    lock = InstanceLock(paths.lock)
    lock.acquire()
    database = dbmod.connect(paths.db, settings=settings)
    store = None
    try:
        queue.release_all_claims(database)  # we hold the lock: every claim is a dead worker's
        store = dbmod.memory_store_for(settings, database)
        daemon = Daemon(database, settings, paths, store=store)
        if not once:
            daemon.install_signal_handlers()
            daemon.start_watcher()
            from total_recall import server

            server.start(daemon)
        log.info(
            "daemon_started",
            pid=os.getpid(),
            home=str(paths.home),
            driver=database.driver,
            vec=database.vec_version,
            llm=settings.llm_enabled(),
        )
        ignored = trust.extra_roots(settings)[1]
        if ignored:
            log.warning("extra_roots_ignored", entries=ignored, fix=trust.EXTRA_ROOTS_FIX)
        return daemon.run(once=once)
    finally:
        daemon_stop = locals().get("daemon")
        if daemon_stop is not None:
            daemon_stop.stop.set()
        database.close()
        if store is not None and store is not database:
            store.close()
        if not once:
            _remove_stale_socket(paths)  # nobody answers on it any more
        lock.release()
