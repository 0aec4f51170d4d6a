"""The weekly maintenance pass: merge duplicates, summarise closed topics, embed what is
pending, keep digests and archive copies right, archive transcripts Claude Code will delete,
checkpoint the WAL; and the hourly decay of working-memory activation."""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

import structlog

from total_recall import config, memories, state, store, trust, vectors
from total_recall import db as dbmod
from total_recall.db import Database
from total_recall.errors import TranscriptError

log = structlog.get_logger(__name__)


def checkpoint(db: Database) -> bool:
    """Copy the WAL into the database and truncate it; False when a reader kept it from finishing."""
    row = dbmod.checkpoint(db)
    return bool(row) and row["busy"] == 0


def merge_duplicates(db: Database) -> int:
    """Fold exact duplicates (same project, intent and normalised text) that slipped through."""
    groups = memories.duplicate_groups(db)
    merged = 0
    now = time.time()
    with db.write():
        for keep, *rest in groups:
            for dup in rest:
                memories.merge_idea(db, keep, dup)
                vectors.delete(db, "ideas", [dup])
                store.event(db, "idea", dup, "merge", {"id": dup}, {"into": keep}, "maintain", now)
                merged += 1
    return merged


def refresh_span_summaries(db: Database) -> int:
    """Closed spans without a summary get an extractive one: their most confident ideas."""
    rows = memories.spans_without_summary(db)
    with db.write():
        for span_id in rows:
            best = memories.best_ideas_of_span(db, span_id)
            if best:
                memories.set_span_summary(db, span_id, " ".join(best)[:600])
    return len(rows)


def cleanup_period_days(claude_dir: Path) -> int:
    try:
        value = json.loads((claude_dir / "settings.json").read_text()).get("cleanupPeriodDays", 30)
        return max(1, int(value))
    except (OSError, ValueError, TypeError, AttributeError):
        return 30


ARCHIVE_SLICE_BYTES = 16 << 20  # whole lines redacted together (4 times the indexer's read)
ARCHIVE_LINE_BYTES = 8 << 20  # a longer line is archived as `{}` (the indexer skips it too)


def archive_expiring(
    db: Database, settings: config.Settings, *, now: float | None = None, margin_days: float = 3.0
) -> list[str]:
    """Copy (gzip) indexed transcripts that Claude Code's cleanupPeriodDays sweep will soon delete.

    Only transcripts the path rule allows, opened as the indexer opens them (trust.open_transcript:
    the file opened must be one), and no forget covers; the copy is named after a hash of the
    transcript's path (never the path itself), written to a temporary name and renamed. The copy
    holds what we would store, not the raw file (``sanitized_transcript``), streamed slice by slice.
    """
    from total_recall import erasure

    now = now or time.time()
    limit = now - (cleanup_period_days(config.claude_config_dir()) - margin_days) * 86400
    archive = config.paths().archive
    done = []
    for row in state.transcripts(db):
        source, session, project = row["source_file"], row["session_id"], row["project"]
        if trust.forgotten(db, file=source, session=session):
            # Trigger: a forget of its session or project that left this copy (one on another
            # machine sharing the store, which cannot reach this disk). Outcome: the copy goes.
            for copy in erasure.archive_copies([source]):
                copy.unlink(missing_ok=True)
            continue
        if trust.excluded(settings, project, Path(source).parent.name):
            continue
        target = archive / trust.archive_name(source)
        if target.exists():
            # Trigger: a copy made before a line of it was forgotten (a forget that ended before
            # rewriting it, or one from another machine sharing the store). Why: the copy keeps
            # what we may keep, not what was forgotten since. Outcome: those lines become `{}`.
            scrub_archive(db, source, now=now)
        try:
            fh = trust.open_transcript(source, settings)
        except TranscriptError:
            continue  # refused by the path rule, or gone
        with fh:
            mtime = os.fstat(fh.fileno()).st_mtime
            if mtime > limit:
                continue
            if target.exists() and target.stat().st_mtime >= mtime and gzip_ok(target):
                continue
            archive.mkdir(mode=0o700, parents=True, exist_ok=True)
            pieces = (_sanitized_slice(db, source, project, n, lines, now) for n, lines in _slices(fh))
            _write_archive(target, pieces)
        done.append(str(target))
    return done


def _slices(fh: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """A transcript as (lines before, whole lines) of about ARCHIVE_SLICE_BYTES each, the last
    one ending where the file does. Never more than a slice and a line in memory (a runaway file
    must not cost its size in RAM); a line over ARCHIVE_LINE_BYTES is `{}`, so every line keeps
    its number."""
    before, pending, line, oversized = 0, bytearray(), bytearray(), False
    while chunk := fh.read(1 << 20):
        start = 0
        while (cut := chunk.find(b"\n", start)) >= 0:
            if oversized or len(line) + cut - start > ARCHIVE_LINE_BYTES:
                pending += b"{}\n"
            else:
                pending += line + chunk[start : cut + 1]
            line.clear()
            oversized, start = False, cut + 1
        if not oversized:
            line += chunk[start:]
            if len(line) > ARCHIVE_LINE_BYTES:
                line.clear()
                oversized = True
        if len(pending) >= ARCHIVE_SLICE_BYTES:
            yield before, bytes(pending)
            before += pending.count(b"\n")
            pending.clear()
    pending += b"{}" if oversized else line
    if pending or not before:
        yield before, bytes(pending)


def _sanitized_slice(
    db: Database, source: str, project: str | None, before: int, lines: bytes, now: float
) -> bytes:
    """``sanitized_transcript`` of the lines that follow `before` others, numbered from there (a
    forgotten line is known by its number). The slice's last newline is put back after, so the line
    after it (the next slice's first) is never judged here."""
    end = b"\n" if lines.endswith(b"\n") else b""
    return (
        sanitized_transcript(db, source, project, lines[: len(lines) - len(end)], now, first=before + 1) + end
    )


def scrub_archive(db: Database, source: str, before: str | None = None, now: float | None = None) -> bool:
    """Rewrite the archive copies of a transcript without its forgotten lines (each becomes `{}`, so
    line numbers stay), and with ``before`` (a `forget --before` date) without every line said before
    that day too; those lines get line tombstones, so a later copy of the transcript leaves them out
    as well. Whether a copy changed."""
    from total_recall import erasure

    changed = False
    for target in erasure.archive_copies([source]):
        try:
            lines = gzip.decompress(target.read_bytes()).split(b"\n")
        except (OSError, EOFError, zlib.error):
            continue  # a broken copy: verify_archives deletes it
        gone = trust.forgotten_lines(db, source)
        dated = (
            set() if before is None else {n for n, line in enumerate(lines, 1) if _said_before(line, before)}
        )
        if dated - gone:
            with db.write():
                trust.tombstone_lines(db, source, dated - gone, now or time.time(), "user: forget scope")
        drop = [
            n for n in sorted(gone | dated) if n <= len(lines) and lines[n - 1].strip() not in (b"", b"{}")
        ]
        if not drop:
            continue
        for n in drop:
            lines[n - 1] = b"{}"
        _write_archive(target, b"\n".join(lines))
        changed = True
    return changed


def _said_before(line: bytes, before: str) -> bool:
    """Whether a transcript line's record carries a time before the day ``before`` (UTC dates)."""
    try:
        stamp = json.loads(line).get("timestamp") if line.strip() else None
    except (ValueError, AttributeError):
        return False
    return isinstance(stamp, str) and stamp[:10] < before[:10]


def _write_archive(target: Path, data: bytes | Iterable[bytes]) -> None:
    """gzip `data` (bytes, or pieces written one by one so a large copy is never whole in memory)
    to a temporary name beside `target` (0600) and rename it into place."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as fout:
            for piece in [data] if isinstance(data, bytes) else data:
                fout.write(piece)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def sanitized_transcript(
    db: Database, source: str, project: str | None, raw: bytes, now: float, first: int = 1
) -> bytes:
    """A transcript as we may keep it: every line redacted (secrets, ``<private>`` parts, values
    that recur), lines said while paused or forgotten (by line or by project) replaced by ``{}``
    so line numbers stay those of the original. ``first``: the number of raw's first line (a
    slice of a longer transcript).

    Each line is redacted twice: as written, where a key stands beside its value
    (``"password":"X"``), then string by string as parsed, where a newline escaped as ``\\n`` is a
    newline again (a secret opening a line of a tool's output or of a file's content) and a
    pretty-printed config's ``"password": "X"`` is no longer escaped. A line that is not JSON is
    redacted as text both times. A line that changes is written again (compact, as Claude Code
    writes), one that does not is kept byte for byte.
    """
    from total_recall.redact import redact_batch, redact_json_batch

    ranges = trust.paused_ranges(db)
    cutoff = trust.project_cutoff(db, project)
    gone = trust.forgotten_lines(db, source)
    lines = raw.decode("utf-8", "replace").split("\n")
    parsed: list = []
    for number, line in enumerate(lines, first):
        try:
            obj = json.loads(line) if line.strip() else None
        except ValueError:
            obj = None
        stamp = obj.get("timestamp") if isinstance(obj, dict) else None
        drop = number in gone or (line.strip() and trust.withheld(stamp, ranges, cutoff, now))
        parsed.append((None if drop else line, obj))
    kept = [(line, obj) for line, obj in parsed if line is not None]
    first = redact_batch([line for line, _ in kept], decoded=False)  # the strings are read decoded next
    values = [text if obj is None else _parsed(text, obj) for text, (_, obj) in zip(first, kept)]
    second = iter(zip(first, values, redact_json_batch(values)))
    out = []
    for line, obj in parsed:
        if line is None:
            out.append("{}")
            continue
        text, value, clean = next(second)
        if obj is None:
            out.append(clean)
        elif clean == value and value is not obj:
            out.append(text)
        else:
            out.append(json.dumps(clean, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(out).encode("utf-8")


def _parsed(text: str, obj):
    """The line as redacted, parsed; or the original's value when redaction broke its JSON.

    Trigger: a replacement cut through a JSON escape (or an unclosed <private> ran to the end
    of the line). Why: the copy must stay readable. Outcome: its strings are redacted one by one
    from the original (``redact_json_batch``)."""
    try:
        return json.loads(text)
    except ValueError:
        return obj


def refresh_all_digests(db: Database) -> list[str]:
    """Rewrite every project's digests from what the database holds now, and delete every other
    file in digests/ (forgotten projects', and those named by an older key scheme, which the
    SessionStart hook no longer reads but which would still hold their text). Returns the removed."""
    from total_recall import digest

    # and every checkout on this machine whose memories are stored under another checkout's path
    projects = sorted({*memories.projects(db), *filter(os.path.isdir, memories.checkouts(db))})
    try:
        written = {p.name for p in digest.write_digests(db, projects)}
    except OSError as exc:
        log.warning("digest_write_failed", error=str(exc))
        return []
    removed = []
    for path in config.paths().digests.glob("*.md"):
        if path.name not in written:
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def gzip_ok(path: Path) -> bool:
    """The `gzip -t` check: the whole file decompresses and its checksum matches."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
        return True
    except (OSError, EOFError, zlib.error):
        return False


def verify_archives() -> list[str]:
    """Delete broken archive copies (a crash mid-write before archives were renamed into place,
    a truncated disk write) and leftover temporary files; the next pass writes them again."""
    archive = config.paths().archive
    removed = []
    if not archive.is_dir():
        return removed
    for path in archive.rglob("*"):
        if path.is_file() and (path.name.endswith(".tmp") or not gzip_ok(path)):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def maintain(db: Database, settings: config.Settings) -> dict:
    """The weekly pass (also `total-recall maintain`)."""
    report: dict = {"duplicates_merged": merge_duplicates(db), "span_summaries": refresh_span_summaries(db)}
    if db.get_meta("embed_model_mismatch"):
        report["reembed"] = vectors.reembed(db, settings)
    report["embedded"] = vectors.Vectors(db, settings).embed_pending()
    report["integrity"] = dbmod.integrity(db)
    with db.write():
        memories.optimize_fts(db)
    report["digests_removed"] = refresh_all_digests(db)
    report["archives_repaired"] = verify_archives()
    report["archived"] = archive_expiring(db, settings)
    report["wal_checkpointed"] = checkpoint(db)
    with db.write():
        db.set_meta("last_maintain", time.time())
    report["at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return report


ACTIVATION_HALF_LIFE = 3600.0  # seconds: working memory fades within hours
ACTIVATION_FLOOR = 0.01


def decay_activation(db: Database, elapsed: float) -> None:
    """Working memory: what a batch touched is 'active'; activation halves every hour, tiny values
    prune to 0."""
    factor = 0.5 ** (max(0.0, elapsed) / ACTIVATION_HALF_LIFE)
    with db.write():
        memories.decay_activation(db, factor, ACTIVATION_FLOOR)
