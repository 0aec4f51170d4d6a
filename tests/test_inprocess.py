"""The queue, the daemon's step and its clock, driven in-process with an injected time (issue 11).

No sleeps and no subprocesses: leases, backoff, the batch window and parking are decided by the
`now` the test passes, so these run in milliseconds and cover what the slow real-process tests
(test_faults.py, marked slow) check end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import write_transcript
from total_recall import config, db, queue
from total_recall.daemon import Daemon

T0 = 1_800_000_000.0  # a fixed "now"; nothing here reads the wall clock


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def database(tmp_path):
    conn = db.connect(tmp_path / "memory.db")
    yield conn
    conn.close()


def states(database) -> dict[int, str]:
    return dict(database.execute("SELECT id, state FROM work_queue").fetchall())


# --- queue.claim_next(now=) ------------------------------------------------------------------------
def test_a_turn_waits_for_the_batch_window_and_backfill_does_not(database):
    turn = queue.enqueue(database, "/t/a.jsonl", event="Stop", now=T0)
    assert queue.claim_next(database, now=T0 + 4.9, window=5, lease=60) is None
    assert queue.next_ready_in(database, now=T0 + 4, window=5) == pytest.approx(1.0)
    back = queue.enqueue(database, "/t/b.jsonl", event="backfill", now=T0 + 4.9)
    assert queue.claim_next(database, now=T0 + 4.9, window=5, lease=60).row_ids == [back]
    assert queue.claim_next(database, now=T0 + 5, window=5, lease=60).row_ids == [turn]


def test_one_claim_takes_every_pending_row_of_the_transcript_that_waited_longest(database):
    first = [
        queue.enqueue(database, "/t/a.jsonl", event="Stop", session_id="s", now=T0 + i) for i in range(3)
    ]
    queue.enqueue(database, "/t/b.jsonl", event="Stop", now=T0 + 1.5)
    claim = queue.claim_next(database, now=T0 + 10, window=5, lease=60)
    assert (claim.transcript_path, claim.row_ids, claim.session_id) == ("/t/a.jsonl", first, "s")
    assert queue.claim_next(database, now=T0 + 10, window=5, lease=60).transcript_path == "/t/b.jsonl"


def test_an_expired_lease_is_claimed_again_and_a_live_one_is_not(database):
    """In-process replacement for waiting out a short lease (test_faults.py, slow)."""
    row = queue.enqueue(database, "/t/a.jsonl", event="backfill", now=T0)
    assert queue.claim_next(database, now=T0, window=0, lease=600).row_ids == [row]
    assert queue.claim_next(database, now=T0 + 599, window=0, lease=600) is None  # a live worker has it
    again = queue.claim_next(database, now=T0 + 601, window=0, lease=600)  # that worker died
    assert again.row_ids == [row] and again.attempts == 0  # an expired lease is not a failure


def test_a_transient_failure_backs_off_and_is_retried_for_ever(database):
    row = queue.enqueue(database, "/t/a.jsonl", event="backfill", now=T0)
    now = T0
    for attempt in range(1, 8):
        claim = queue.claim_next(database, now=now, window=0, lease=600)
        assert claim is not None and claim.attempts == attempt - 1
        assert (
            queue.fail(database, claim, "database is locked", transient=True, max_attempts=3, now=now)
            == "pending"
        )
        wait = queue.backoff(attempt)
        assert queue.claim_next(database, now=now + wait - 0.01, window=0, lease=600) is None
        now += wait
    assert states(database) == {row: "pending"}
    assert queue.backoff(1) < queue.backoff(2) <= queue.backoff(50) == queue.BACKOFF_CAP


def test_a_permanent_failure_parks_after_max_attempts_until_retry(database):
    row = queue.enqueue(database, "/t/a.jsonl", event="backfill", now=T0)
    now, outcomes = T0, []
    for _ in range(3):
        claim = queue.claim_next(database, now=now, window=0, lease=600)
        outcomes.append(
            queue.fail(database, claim, "ValueError: bad", transient=False, max_attempts=3, now=now)
        )
        now += queue.BACKOFF_CAP
    assert outcomes == ["pending", "pending", "parked"]
    assert queue.claim_next(database, now=now + 10**6, window=0, lease=600) is None
    assert queue.retry_parked(database) == 1
    assert queue.claim_next(database, now=now, window=0, lease=600).row_ids == [row]


def test_a_deferred_claim_goes_to_the_back_of_the_queue_without_an_attempt(database):
    a = queue.enqueue(database, "/t/a.jsonl", event="backfill", now=T0)
    b = queue.enqueue(database, "/t/b.jsonl", event="backfill", now=T0 + 1)
    claim = queue.claim_next(database, now=T0 + 2, window=0, lease=600)
    queue.defer(database, claim, now=T0 + 3)
    assert queue.claim_next(database, now=T0 + 3, window=0, lease=600).row_ids == [b]
    assert queue.claim_next(database, now=T0 + 3, window=0, lease=600).row_ids == [a]


def test_prune_keeps_a_day_of_done_rows(database):
    row = queue.enqueue(database, "/t/a.jsonl", event="backfill", now=T0)
    queue.complete(database, queue.claim_next(database, now=T0, window=0, lease=60))
    assert queue.prune_done(database, now=T0 + 86399) == 0
    assert queue.prune_done(database, now=T0 + 86401) == 1
    assert row not in states(database)


# --- Daemon.step(now=) ---------------------------------------------------------------------------
def offline_settings(tmp_path: Path) -> config.Settings:
    """The offline extractor and no embedder endpoint: vectors are skipped when sqlite-vec or the
    model is missing, and nothing leaves the process."""
    return config.load(environ={"TOTAL_RECALL_DAEMON_BATCH_WINDOW": "5"}, config_path=tmp_path / "none.toml")


@pytest.fixture
def daemon(tmp_path):
    config.ensure_home()
    settings = offline_settings(tmp_path)
    conn = db.connect(config.paths().db, settings=settings)
    clock = Clock()
    worker = Daemon(conn, settings, config.paths(), clock=clock)
    yield worker, clock
    conn.close()


def test_the_heartbeat_goes_on_after_the_clock_steps_back(daemon):
    """The status file, the repair pass and the other chores run at every heartbeat; a clock
    stepped back an hour (NTP, a resumed VM) must not stop them for that hour."""
    worker, clock = daemon

    def updated() -> float:
        return json.loads(config.paths().status.read_text(encoding="utf-8"))["updated"]

    worker.heartbeat()
    assert updated() == T0
    clock.advance(-3600)
    clock.advance(worker.settings.daemon.heartbeat)  # one interval later by the stepped clock
    worker.heartbeat()
    assert updated() == clock()


def claude_transcript(tmp_path: Path, name: str = "s1") -> Path:
    path = config.claude_config_dir() / "projects" / "-home-dev-demo" / f"{name}.jsonl"
    return write_transcript(
        path,
        [
            ("user", "We decided to use PostgreSQL for the billing service instead of MySQL."),
            ("assistant", "Agreed: PostgreSQL gives us transactional DDL for the billing migrations."),
        ],
    )


def test_step_waits_for_the_window_then_indexes_the_transcript(daemon, tmp_path):
    worker, clock = daemon
    path = claude_transcript(tmp_path)
    queue.enqueue(worker.db, str(path), event="Stop", session_id="s1", now=clock())
    assert worker.step() is False  # inside the 5 s window: nothing to do yet
    clock.advance(5)
    assert worker.step() is True
    assert queue.depth(worker.db)["done"] == 1
    assert worker.db.scalar("SELECT count(*) FROM ideas", default=0) > 0
    assert worker.status.batches == 1
    assert worker.step() is False  # the queue is empty


def test_step_with_an_explicit_now_overrides_the_clock(daemon, tmp_path):
    worker, clock = daemon
    queue.enqueue(worker.db, str(claude_transcript(tmp_path)), event="Stop", now=clock())
    assert worker.step(now=clock() + 1) is False
    assert worker.step(now=clock() + 6) is True


def test_step_completes_a_missing_transcript_with_a_note(daemon, tmp_path):
    worker, clock = daemon
    gone = config.claude_config_dir() / "projects" / "-home-dev-demo" / "gone.jsonl"
    gone.parent.mkdir(parents=True, exist_ok=True)
    queue.enqueue(worker.db, str(gone), event="SessionEnd", now=clock())
    assert worker.step() is True
    assert tuple(worker.db.one("SELECT state, last_error FROM work_queue")) == ("done", "transcript missing")


def test_step_drains_the_spool_the_hook_wrote(daemon, tmp_path):
    import json

    worker, clock = daemon
    path = claude_transcript(tmp_path)
    worker.paths.spool.write_text(
        json.dumps(
            {"transcript_path": str(path), "session_id": "s1", "event": "SessionEnd", "enqueued_at": clock()}
        )
        + "\n"
    )
    assert worker.step() is True
    assert not worker.paths.spool.read_text().strip()  # truncated once the rows committed
    assert queue.depth(worker.db)["done"] == 1


def test_a_locked_database_leaves_the_spool_whole_and_the_next_step_indexes(tmp_path):
    """In-process replacement for the real-process lock test in test_faults.py (slow): another
    connection holds the write lock past the busy timeout, so the step that would drain the spool
    fails as transient (the run loop logs step_failed and backs off); the spool keeps every record;
    once the lock is gone the next step drains it and indexes the transcript."""
    import json

    from total_recall.daemon import is_transient

    config.ensure_home()
    settings = config.load(
        environ={"TOTAL_RECALL_DB_BUSY_TIMEOUT": "0.2"}, config_path=tmp_path / "none.toml"
    )
    conn = db.connect(config.paths().db, settings=settings)
    clock = Clock()
    worker = Daemon(conn, settings, config.paths(), clock=clock)
    path = claude_transcript(tmp_path)
    record = {"transcript_path": str(path), "session_id": "s1", "event": "SessionEnd", "enqueued_at": clock()}
    worker.paths.spool.write_text(json.dumps(record) + "\n")
    # The other writer opens the file through the same SQLite library as the daemon: POSIX locks
    # of two different libraries in one process do not see each other.
    holder = db.connect(config.paths().db, settings=settings).conn
    try:
        holder.execute("BEGIN IMMEDIATE")  # a writer that keeps the lock
        for _ in range(2):  # more than once: the loop retries after its backoff
            with pytest.raises(Exception) as failed:
                worker.step()
            assert is_transient(failed.value, conn), failed.value
            assert json.loads(worker.paths.spool.read_text()) == record  # nothing drained, nothing lost
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert worker.step() is True
    assert not worker.paths.spool.read_text().strip()
    assert queue.depth(conn)["done"] == 1
    assert conn.scalar("SELECT count(*) FROM messages", default=0) == 2
    assert [tuple(r) for r in conn.execute("PRAGMA integrity_check").fetchall()] == [("ok",)]
    conn.close()


def test_run_daemon_once_releases_a_dead_workers_claims_under_the_lock(tmp_path):
    """In-process replacement for `daemon --once` as a subprocess after a SIGKILLed daemon
    (test_robustness.py, slow): rows claimed under a 10-minute lease that nobody holds are released
    when the lock is taken, not waited out, and indexed at once."""
    import os
    import time

    from total_recall.daemon import run_daemon

    config.ensure_home()
    settings = offline_settings(tmp_path)
    conn = db.connect(config.paths().db, settings=settings)
    path = claude_transcript(tmp_path)
    queue.enqueue(conn, str(path), event="backfill")
    assert queue.claim_next(conn, now=time.time(), window=0, lease=600) is not None  # then the worker died
    conn.close()
    umask = os.umask(0o077)  # run_daemon sets it for its process; the test process gets its own back
    try:
        assert run_daemon(once=True, settings=settings) == 0
    finally:
        os.umask(umask)
    conn = db.connect(config.paths().db, settings=settings)
    try:
        assert states(conn) and set(states(conn).values()) == {"done"}
        assert conn.scalar("SELECT count(*) FROM messages", default=0) == 2
    finally:
        conn.close()


# --- a transcript that shrinks, grows, is rewritten or replaced (test_faults.py, in-process) ------

FAULTS_PROJECT = "/home/dev/projects/faults"


def talk(words: str, n: int) -> list[tuple[str, str]]:
    return [
        (
            "user" if k % 2 else "assistant",
            f"We decided the {words} service {k} keeps its own queue and retries every {k} seconds.",
        )
        for k in range(1, n + 1)
    ]


class Turns:
    """What test_faults.py's `index` does with a hook and a `daemon --once` process, as daemon
    steps in this process: the turn is queued, the batch window passes, one step runs. With the
    fake server's embeddings, which keep the numbered sentences of `talk` apart as there."""

    def __init__(self, tmp_path: Path):
        import os

        config.ensure_home()
        self.settings = config.load(environ=dict(os.environ), config_path=tmp_path / "none.toml")
        self.db = db.connect(config.paths().db, settings=self.settings)
        self.clock = Clock()
        self.worker = Daemon(self.db, self.settings, config.paths(), clock=self.clock)

    def path(self, session: str) -> Path:
        return config.claude_config_dir() / "projects" / "-home-dev-projects-faults" / f"{session}.jsonl"

    def write(self, path: Path, turns: list, *, append: bool = False) -> Path:
        return write_transcript(path, turns, cwd=FAULTS_PROJECT, append=append)

    def index(self, path: Path) -> None:
        queue.enqueue(self.db, str(path), event="Stop", session_id=path.stem, now=self.clock())
        self.clock.advance(self.settings.daemon.batch_window)
        assert self.worker.step() is True

    def ideas(self, path: Path) -> list[tuple]:
        rows = self.db.all(
            "SELECT source_line, content FROM ideas WHERE file_id = (SELECT id FROM files WHERE path = ?) "
            "ORDER BY source_line, content",
            (str(path),),
        )
        return [(r["source_line"], r["content"]) for r in rows]

    def message_texts(self, path: Path) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for r in self.db.all(
            "SELECT source_line, content FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?)",
            (str(path),),
        ):
            out.setdefault(r["source_line"], []).append(r["content"])
        return out

    def assert_unique(self, path: Path) -> None:
        ideas = self.ideas(path)
        assert len(ideas) == len(set(ideas)), "duplicate ideas"
        rows = self.db.all(
            "SELECT source_line, content_hash FROM messages WHERE file_id = (SELECT id FROM files "
            "WHERE path = ?)",
            (str(path),),
        )
        assert len(rows) == len({tuple(r) for r in rows}), "duplicate messages"


@pytest.fixture
def turns(tmp_path, fake):
    t = Turns(tmp_path)
    yield t
    t.db.close()


def test_a_truncated_then_rewritten_transcript_is_read_again_without_duplicates(turns):
    """In-process replacement for test_faults.py::test_truncated_then_rewritten_transcript_is_reread_
    without_duplicates (slow)."""
    path = turns.write(turns.path("rewrite"), talk("billing", 10))
    turns.index(path)
    first = turns.ideas(path)
    assert {line for line, _ in first} == set(range(1, 11))
    # Truncated below what was read: read again from the start, nothing new, nothing twice.
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:5]))
    turns.index(path)
    assert turns.ideas(path) == first
    state = turns.db.one("SELECT byte_offset, line_number FROM index_state")
    assert (state["byte_offset"], state["line_number"]) == (path.stat().st_size, 5)
    # It grows again with different lines 6-8: those are new memories.
    turns.write(path, talk("shipping", 8)[5:], append=True)
    turns.index(path)
    new = [c for _, c in turns.ideas(path) if "shipping" in c]
    assert len(new) >= 3 and set(turns.ideas(path)) >= set(first)
    # Rewritten in place with a different conversation (same name, same size class).
    turns.write(path, talk("payroll", 12))
    turns.index(path)
    texts = turns.message_texts(path)
    assert all(any("payroll" in t for t in texts[k]) for k in range(1, 13))
    assert len([c for _, c in turns.ideas(path) if "payroll" in c]) >= 12
    turns.assert_unique(path)
    # Indexing again changes nothing.
    before = turns.db.scalar("SELECT count(*) FROM ideas")
    turns.index(path)
    assert turns.db.scalar("SELECT count(*) FROM ideas") == before


def test_records_a_hand_edit_moved_keep_their_rows_and_a_forgotten_one_stays_forgotten(turns):
    """A transcript edited by hand (`sed -i 1d`, a line pasted in) is read again from its start. The
    records still in it are known by their uuid: their memories, sources, windows and forgets move
    to the lines that now hold them, nothing is stored or mentioned twice, and the words of a
    forgotten line are not stored again at its new place."""
    from helpers import record
    from total_recall import curate

    path = turns.path("edited")
    turns.write(path, talk("billing", 6))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # A response written over two lines (its thinking, then its words), as Claude Code writes one.
    when = "2026-03-02T10:30:00.000Z"
    said_then = {"session": path.stem, "cwd": FAULTS_PROJECT, "when": turns_time(when)}
    thinking = record("assistant", "", msg_id="m7", **said_then)
    thinking["message"]["content"] = [{"type": "thinking", "thinking": "weigh the ledger options"}]
    ledger = "We decided the ledger service keeps its own queue and retries every 7 seconds."
    words = record("assistant", ledger, msg_id="m7", **said_then)
    lines += [json.dumps(thinking) + "\n", json.dumps(words) + "\n"]
    path.write_text("".join(lines), encoding="utf-8")
    turns.index(path)
    first_ideas = turns.ideas(path)
    said = {c: n for n, c in first_ideas}
    secret = next(c for c in said if "service 4 " in c)
    idea = turns.db.scalar("SELECT id FROM ideas WHERE content = ?", (secret,))
    curate.forget(turns.db, idea)
    # The first line goes, a user's line is pasted in after the response; then the talk goes on.
    aside = record("user", "An aside pasted in by hand about nothing.", **said_then)
    edited = lines[1:] + [json.dumps(aside) + "\n"]
    path.write_text("".join(edited), encoding="utf-8")
    turns.write(
        path,
        [("user", "We decided the payroll service keeps its own queue and retries every 9 seconds.")],
        append=True,
    )
    turns.index(path)

    now = path.read_text(encoding="utf-8").splitlines()
    for line, content in turns.ideas(path):
        assert content in now[line - 1], (line, content)  # every memory on the line holding its words
    # The record the edit removed is no longer said: its memory went with it (no tombstone).
    assert not any("billing service 1 " in c for _, c in turns.ideas(path))
    texts = turns.message_texts(path)
    stored = [t for said in texts.values() for t in said if t]
    assert len(stored) == len(set(stored)), "a line stored twice"
    assert not any("service 4 " in t for t in stored)
    windows = turns.db.column("SELECT content FROM chunks")
    assert not any("service 4 " in w for w in windows) and len(windows) == len(set(windows))
    assert trust_lines(turns, path) == {3}  # the forget moved with its line (4 -> 3)
    assert all(n == 1 for n in turns.db.column("SELECT mention_count FROM ideas"))
    # The response moved with both its lines: its memory is on its words' line (7), not its thinking's.
    ledger = turns.db.one("SELECT id, source_line FROM ideas WHERE content LIKE '%ledger service%'")
    assert ledger["source_line"] == 7
    assert turns.db.column("SELECT source_line FROM chunks WHERE content LIKE '%ledger service%'") == [7]
    assert turns.db.column(
        "SELECT cause FROM memory_events WHERE kind = 'idea' AND object_id = ? AND action = 'update'",
        (ledger["id"],),
    ) == ["transcript rewritten"]
    assert any("payroll" in c and n == 9 for n, c in turns.ideas(path))
    assert any("aside pasted" in t for t in texts[8])
    turns.assert_unique(path)
    before = (turns.ideas(path), turns.message_texts(path))
    path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    turns.index(path)
    assert (turns.ideas(path), turns.message_texts(path)) == before
    # The edit undone (the first line back, the pasted one out): every memory on its own line again,
    # the first line's remembered again, each said once.
    payroll = path.read_text(encoding="utf-8").splitlines(keepends=True)[-1]
    path.write_text("".join(lines) + payroll, encoding="utf-8")
    turns.index(path)
    restored = turns.ideas(path)
    assert {c for _, c in restored} >= {c for _, c in first_ideas if "service 4 " not in c}
    original = path.read_text(encoding="utf-8").splitlines()
    assert all(content in original[line - 1] for line, content in restored)
    assert all(n == 1 for n in turns.db.column("SELECT mention_count FROM ideas"))
    turns.assert_unique(path)


def test_a_record_whose_words_were_edited_by_hand_is_remembered_as_it_now_reads(turns):
    """`sed -i 's/.../.../'` on a transcript: the same record (uuid, line) with other words. Read
    again, its old row, window and memories go and its new words are stored and extracted once; a
    second edit likewise; forgetting the memory then leaves no older one citing the line (I215)."""
    from total_recall import curate

    path = turns.write(turns.path("reworded"), talk("billing", 4))
    turns.index(path)
    for word in ("mango", "papaya"):
        text = path.read_text(encoding="utf-8")
        before = "billing service 2 " if word == "mango" else "mango service 2 "
        path.write_text(text.replace(before, f"{word} service 2 "), encoding="utf-8")
        turns.index(path)
        at_two = [c for n, c in turns.ideas(path) if n == 2]
        assert at_two == [f"We decided the {word} service 2 keeps its own queue and retries every 2 seconds."]
        assert [t for t in turns.message_texts(path)[2] if t] == at_two
        assert turns.db.column("SELECT content FROM chunks WHERE source_line = 2") == at_two
        # The next line's window no longer quotes the old words as the turn before it.
        assert not any("billing service 2 " in c for c in turns.db.column("SELECT context FROM chunks"))
    turns.assert_unique(path)
    curate.forget(turns.db, turns.db.scalar("SELECT id FROM ideas WHERE source_line = 2"))
    assert not [c for n, c in turns.ideas(path) if n == 2]
    assert turns.db.scalar("SELECT count(*) FROM idea_sources WHERE source_line = 2") == 0


def test_a_record_replaced_by_another_by_hand_takes_its_memories_with_it(turns):
    """A line replaced by a record of its own (another uuid), and the edit undone: each time the line's
    memories are those of the record on it, none left of the one that went (I200)."""
    path = turns.write(turns.path("replaced"), talk("billing", 4))
    turns.index(path)
    original = path.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    other = turns.write(
        turns.path("scratch"), [("assistant", "We decided the zulu service 2 keeps no queue.")]
    )
    path.write_text(lines[0] + other.read_text(encoding="utf-8") + "".join(lines[2:]), encoding="utf-8")
    turns.index(path)
    assert [c for n, c in turns.ideas(path) if n == 2] == ["We decided the zulu service 2 keeps no queue."]
    path.write_text(original, encoding="utf-8")
    turns.index(path)
    now = path.read_text(encoding="utf-8").splitlines()
    assert all(content in now[line - 1] for line, content in turns.ideas(path))
    assert not any("zulu" in c for _, c in turns.ideas(path))
    turns.assert_unique(path)


def turns_time(iso: str):
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def trust_lines(turns, path) -> set[int]:
    from total_recall import trust

    return trust.forgotten_lines(turns.db, str(path))


def test_a_transcript_replaced_by_one_with_the_same_head_and_line_end_is_read_again(turns):
    """A file that takes the transcript's name with the same first kilobytes (a copy that forked after
    them) and a line end exactly where the old one was read up to: only the bytes before that offset
    tell it from the old one. It is read again from its start; what it says is stored, once, and its
    records whose words changed are remembered as they now read."""
    from total_recall.transcript import HEAD_BYTES

    path = turns.write(turns.path("forked"), talk("billing", 40))
    turns.index(path)
    first = turns.ideas(path)
    old = path.read_bytes()
    cut = old.index(b"\n", HEAD_BYTES) + 1
    assert len(old) - cut > 2000  # the replacement differs well past the hashed head
    # Same length ("billing" / "payroll"), same line ends, same head; different words after it.
    path.write_bytes(old[:cut] + old[cut:].replace(b"billing", b"payroll"))
    assert path.stat().st_size == len(old)
    turns.index(path)
    texts = turns.message_texts(path)
    changed = sorted(n for n, said in texts.items() if any("payroll" in t for t in said))
    assert changed and changed[-1] == 40  # read again from its start, to its last line
    assert len([c for _, c in turns.ideas(path) if "payroll" in c]) == len(changed)
    # The same records (their uuids) with other words: remembered as they now read (I215); the lines
    # before the change keep what they said.
    kept = {(n, c) for n, c in first if n not in changed}
    assert set(turns.ideas(path)) == kept | {(n, c) for n, c in turns.ideas(path) if "payroll" in c}
    turns.assert_unique(path)


def test_a_transcript_deleted_while_queued_then_replaced_by_another_file(turns):
    """In-process replacement for test_faults.py::test_transcript_deleted_while_queued_then_replaced_
    by_another_file (slow)."""
    import os

    path = turns.write(turns.path("gone"), talk("billing", 6))
    queue.enqueue(turns.db, str(path), event="Stop", session_id="gone", now=turns.clock())
    path.unlink()
    turns.clock.advance(turns.settings.daemon.batch_window)
    assert turns.worker.step() is True
    row = turns.db.one("SELECT state, last_error FROM work_queue")
    assert (row["state"], row["last_error"]) == ("done", "transcript missing")
    assert turns.db.scalar("SELECT count(*) FROM messages") == 0
    # A different file appears under the same name: all of it is indexed.
    turns.write(path, talk("catalogue", 7))
    turns.index(path)
    assert sorted(turns.message_texts(path)) == list(range(1, 8))
    # Replaced again by another, longer conversation: detected and read from the start.
    replacement = turns.write(path.with_name("other.tmp"), talk("inventory", 15))
    os.replace(replacement, path)
    turns.index(path)
    texts = turns.message_texts(path)
    assert all(any("inventory" in t for t in texts[k]) for k in range(1, 16))
    turns.assert_unique(path)


def test_a_replacement_sharing_the_first_kilobytes_is_still_detected(turns):
    """In-process replacement for test_faults.py::test_replacement_sharing_the_first_kilobytes_is_
    still_detected (slow): a different file whose head (the bytes the rewrite check hashes) equals
    the old one's."""
    import os

    path = turns.write(turns.path("fork"), talk("billing", 40) + talk("alpha", 20)[:10])
    turns.index(path)
    old_size = path.stat().st_size
    shared = b"".join(path.read_bytes().splitlines(keepends=True)[:40])  # well over 4 KB, byte for byte
    assert len(shared) > 4096
    replacement = turns.write(
        path.with_name("fork.tmp"),
        [("user", "Let us instead talk about the omega rollout plan " * 3)] + talk("omega", 30)[:15],
    )
    replacement.write_bytes(shared + replacement.read_bytes())
    assert replacement.stat().st_size > old_size
    assert replacement.read_bytes()[old_size - 1 : old_size] != b"\n"  # the old offset is mid-line now
    os.replace(replacement, path)
    turns.index(path)
    texts = turns.message_texts(path)
    assert all(any("omega" in t for t in texts.get(k, [])) for k in range(41, 41 + 16)), sorted(texts)[-20:]
    turns.assert_unique(path)


def test_a_partial_last_line_waits_and_is_indexed_once(turns):
    """In-process replacement for test_faults.py::test_partial_last_line_waits_and_is_indexed_once
    (slow)."""
    path = turns.write(turns.path("partial"), talk("billing", 6))
    data = path.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1 + 40  # 40 bytes into line 6
    path.write_bytes(data[:cut])
    turns.index(path)
    assert sorted(turns.message_texts(path)) == [1, 2, 3, 4, 5]
    path.write_bytes(data)
    turns.write(path, talk("billing", 7)[6:], append=True)
    turns.index(path)
    assert sorted(turns.message_texts(path)) == list(range(1, 8))
    assert all(len(v) == 1 for v in turns.message_texts(path).values())
    turns.assert_unique(path)
