"""Hook shim for Stop, UserPromptSubmit, PreCompact, SessionEnd and SubagentStop.

Records "this transcript, seen at this size" in the work queue and exits 0. It never reads the
transcript, never calls the daemon and never prints: Claude Code injects a UserPromptSubmit
hook's stdout into the conversation, and a non-zero exit would surface as a hook error.

Run as `<python> -I -S enqueue.py [EVENT]`: that small shim imports this module, whose compiled
bytecode Python caches (a script it runs directly is compiled on every start). Standard library
only, and only cheap modules, because it runs on every prompt: it must not import total_recall
(that would pull in the daemon's dependencies and break when the package is mid-upgrade).

Where the record goes:
  1. $TOTAL_RECALL_HOME/memory.db, table work_queue, when the database exists and is writable
     within 0.2 s;
  2. otherwise one JSON line appended to $TOTAL_RECALL_HOME/spool.jsonl under an exclusive
     flock; the daemon drains it under the same lock.
Then $TOTAL_RECALL_HOME/wake is touched so the daemon's file watcher wakes at once.

Only a regular *.jsonl file under $CLAUDE_CONFIG_DIR/projects (or a root named in config.toml
[privacy] extra_roots / TOTAL_RECALL_PRIVACY_EXTRA_ROOTS), named by an absolute path without
"..", whose resolved path stays under that root, is even stat'ed and recorded. Anything else
is dropped; the reason goes to $TOTAL_RECALL_HOME/refused.log (the daemon re-checks every path).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time

DEFAULT_HOME = "~/.claude-plugin-total-recall"
MAX_STDIN = 1 << 20  # hook input is a few KB; more than 1 MB is a huge last_assistant_message
DB_TIMEOUT = 0.2  # seconds; past it the record goes to the spool instead
SPOOL_LOCK_WAIT = 1.0  # seconds
SPOOL_KEYS = ("transcript_path", "session_id", "cwd", "event", "size_seen", "enqueued_at")
SALVAGE_KEYS = ("hook_event_name", "session_id", "transcript_path", "agent_transcript_path", "cwd")


def read_stdin(limit: int = MAX_STDIN) -> tuple[bytes, bool]:
    """Up to `limit` bytes of stdin, and whether there was more."""
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(0, min(65536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit], True


def salvage(head: bytes) -> dict:
    """The top-level string fields found in the first bytes of a JSON object too big to parse.

    A JSON string value cannot contain an unescaped quote, so `"key"` followed by `:` can only be
    a real key; keys come before the bulky fields (prompt, last_assistant_message) in hook input.
    """
    text = head.decode("utf-8", "ignore")
    found = {}
    for key in SALVAGE_KEYS:
        at = text.find('"%s"' % key)
        if at < 0:
            continue
        rest = text[at + len(key) + 2 :].lstrip()
        if not rest.startswith(":"):
            continue
        rest = rest[1:].lstrip()
        if rest.startswith('"'):
            try:
                found[key] = json.decoder.scanstring(rest, 1)[0]
            except ValueError:
                pass
    return found


def parse(raw: bytes, truncated: bool) -> dict:
    if truncated:
        # Trigger: stdin over MAX_STDIN. Why: a huge last message must not lose the enqueue, and
        # reading it all would cost memory and time. Outcome: the leading string fields only.
        return salvage(raw)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        # Trigger: bytes that are not UTF-8, nesting past the parser's depth, or a payload cut
        # off, all after the leading fields. Why: those fields still name the transcript, and
        # the event must not be lost for a fault in a bulky field. Outcome: the leading fields.
        return salvage(raw)
    return data if isinstance(data, dict) else {}


def text_field(data: dict, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def size_of(path: str) -> int | None:
    """Size of a regular file; None for anything else (never opens FIFOs or devices)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def claude_projects() -> str:
    return os.path.join(os.path.expanduser(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude"), "projects")


def extra_roots(home: str) -> list[str]:
    """Roots besides the Claude projects folder, from the environment or config.toml [privacy]."""
    raw = os.environ.get("TOTAL_RECALL_PRIVACY_EXTRA_ROOTS")
    if raw is not None:
        return absolute(r.strip() for r in raw.split(","))
    path = os.path.join(home, "config.toml")
    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return []
    if all(line.lstrip().startswith(b"#") for line in text.splitlines() if b"extra_roots" in line):
        # Trigger: config.toml names the key only in comments, or not at all (`init` writes it
        # commented out: `# extra_roots = []`). Why: importing tomllib and parsing cost
        # milliseconds on every prompt; a key set on a line of its own cannot start with "#".
        # Outcome: no extra roots, as the parser would have said.
        return []
    try:
        import tomllib

        roots = tomllib.loads(text.decode("utf-8")).get("privacy", {}).get("extra_roots", [])
    except Exception:
        # Trigger: Python 3.10 (no tomllib) or an unreadable config. Why: stdlib only, and a
        # broken config must not break the hook. Outcome: only the Claude projects folder.
        return []
    return absolute(roots) if isinstance(roots, list) else []


def absolute(entries) -> list[str]:
    """The entries that name a folder: absolute paths (after ~). An empty or relative one would be
    the hook's working directory; total_recall.trust.extra_roots ignores the same."""
    folders = (os.path.expanduser(e) for e in entries if isinstance(e, str) and e)
    return [f for f in folders if os.path.isabs(f)]


def refusal(path: str, home: str) -> str | None:
    """Why the transcript must not be touched, or None. Same rule as total_recall.trust.refusal."""
    if "\x00" in path:
        return "not a path"
    if not os.path.isabs(path):
        return "not an absolute path"
    if ".." in path.split(os.sep):
        return "path contains '..'"
    if not path.endswith(".jsonl"):
        return "not a .jsonl file"
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return "path cannot be resolved"

    def under(roots: list[str]) -> bool:
        resolved = [os.path.realpath(os.path.expanduser(r)).rstrip(os.sep) + os.sep for r in roots]
        return any(real.startswith(r) for r in resolved)

    if not under([claude_projects()]) and not under(extra_roots(home)):
        return "outside the Claude projects folder (and [privacy] extra_roots)"
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            return "not a regular file"
    except FileNotFoundError:
        return None  # not written yet: recorded without a size, the daemon finds it missing
    except (OSError, ValueError):
        return "cannot be examined"
    return None


def log_refusal(home: str, reason: str, path: str) -> None:
    line = json.dumps({"at": time.time(), "reason": reason, "path": path[:300]}, ensure_ascii=True) + "\n"
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(home, "refused.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < (1 << 20):  # bounded: a flood of bad payloads cannot fill the disk
                os.write(fd, line.encode("ascii"))
        finally:
            os.close(fd)
    except OSError:
        pass


def build_record(data: dict, argv: list[str]) -> dict | None:
    event = text_field(data, "hook_event_name") or (argv[1] if len(argv) > 1 and argv[1] else "unknown")
    path = text_field(data, "transcript_path")
    if event == "SubagentStop":
        # The subagent's own file; transcript_path there is the parent's.
        path = text_field(data, "agent_transcript_path") or path
    if path is None:
        return None
    return {
        "transcript_path": path,
        "session_id": text_field(data, "session_id"),
        "cwd": text_field(data, "cwd"),
        "event": event,
        "size_seen": None,  # stat'ed only once the path is allowed
        "enqueued_at": time.time(),
    }


def uri_path(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def insert_row(db_path: str, record: dict) -> bool:
    """Insert into work_queue; False when the database is missing, busy or unusable."""
    if not os.path.isfile(db_path):
        return False
    try:
        import sqlite3  # some minimal Pythons ship without it; the spool still works

        # mode=rw: never create an empty database here; the daemon owns creation and settings.
        conn = sqlite3.connect("file:%s?mode=rw" % uri_path(db_path), uri=True, timeout=DB_TIMEOUT)
    except Exception:
        return False
    try:
        conn.execute("PRAGMA busy_timeout = %d" % int(DB_TIMEOUT * 1000))
        # As the daemon's connections: in WAL mode a commit then appends to the WAL without an
        # fsync (durable across a crash of any process; a power cut may lose this hint, which
        # the next turn's hook records again).
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(
            "INSERT INTO work_queue (transcript_path, session_id, cwd, event, size_seen, enqueued_at, state) "
            "VALUES (?, ?, ?, ?, ?, ?, 'pending')",
            tuple(record[k] for k in SPOOL_KEYS),
        )
        conn.commit()
        return True
    except Exception:
        # sqlite3.Error (locked, no such table, not a database) and UnicodeEncodeError (lone
        # surrogates in a path) alike: the spool takes the record.
        return False
    finally:
        conn.close()


def lock_spool(fd: int) -> None:
    import fcntl

    deadline = time.monotonic() + SPOOL_LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                # Trigger: the daemon held the spool lock for over a second. Why: a hook must
                # not stall Claude Code. Outcome: append unlocked; a one-line O_APPEND write is
                # atomic, and if the daemon's truncate drops it the next hook re-records this
                # transcript (records are idempotent hints).
                return
            time.sleep(0.01)


def append_spool(home: str, record: dict) -> None:
    os.makedirs(home, mode=0o700, exist_ok=True)
    line = (json.dumps({k: record[k] for k in SPOOL_KEYS}) + "\n").encode("ascii")
    fd = os.open(os.path.join(home, "spool.jsonl"), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        lock_spool(fd)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # Trigger: the spool ends inside a line (an earlier append cut short by a full disk
            # or a file size limit). Why: glued to that half line, this record would be dropped
            # with it when the daemon drains the spool. Outcome: the half line ends first.
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)  # closing releases the flock


def touch_wake(home: str) -> None:
    path = os.path.join(home, "wake")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.utime(path)
    except OSError:
        pass  # the daemon's poll picks the record up a little later


def main(argv: list[str]) -> None:
    os.umask(0o077)  # whatever the user's umask, what we create is private
    raw, truncated = read_stdin()
    record = build_record(parse(raw, truncated), argv)
    if record is None:
        return
    home = os.path.expanduser(os.environ.get("TOTAL_RECALL_HOME") or DEFAULT_HOME)
    reason = refusal(record["transcript_path"], home)
    if reason is not None:
        log_refusal(home, reason, record["transcript_path"])
        return
    record["size_seen"] = size_of(record["transcript_path"])
    if not insert_row(os.path.join(home, "memory.db"), record):
        # Trigger: no database yet, locked past DB_TIMEOUT, or unusable. Why: the hook must
        # finish fast and never lose the event. Outcome: the daemon imports the spool line.
        try:
            append_spool(home, record)
        except Exception:
            return
    touch_wake(home)


if __name__ == "__main__":
    # The one boundary: whatever happens (bad input, full disk, Ctrl-C), exit 0 silently, so
    # Claude Code neither blocks the user nor shows a hook error.
    try:
        main(sys.argv)
    except BaseException:
        pass
    sys.exit(0)
