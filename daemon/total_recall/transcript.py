"""Claude Code transcripts: new complete JSONL lines in, Messages out (substantive, or saying why not).

A transcript is append-only JSONL written while the session runs, so a read starts at a byte
offset, consumes only complete lines and reports where the next read resumes. Nothing in a
line's content makes a read fail: bad JSON, bad UTF-8, giant lines and record types newer than
this code are counted in `ReadResult.counts` and skipped.

One assistant response is written as several lines sharing `message.id` (one content block per
line); those become one Message. A read stopped by `max_bytes` never ends inside such a
response, but a read that reaches the end of a file still being written can: the rest of the
response then comes back from the next read as a second Message with the same `message_id`.

Every user/assistant record becomes a Message; `skip_reason` is None only for text worth
handing to extraction, else one of: tool_output, acknowledgement, injected_context, meta,
command, interrupt, compaction_prompt, compact_summary, warmup, headless_summarizer, empty,
thinking_only, tool_use_only (tool calls and no prose: the text is then only tool descriptors
like "[tool Bash: git status]"), synthetic (API errors Claude Code wrote itself). Text our own
hooks injected (inside CONTEXT_MARKER tags) is removed everywhere, so memories are never
re-indexed as conversation. Two tool results are the user's words, so prompts: the answers to an
AskUserQuestion (each pick with its option's description) and what the user typed when refusing a call.
And one attachment is: a prompt typed while Claude was working (`queued_command`), for which Claude Code
writes no user record.

`counts` has one key per physical line: its record type, "unknown:<type>", "invalid_json",
"invalid_record" (JSON, but not an object with a string type), "blank" or "oversized_line";
plus "invalid_utf8" and "system:<subtype>" as detail on lines already counted.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import structlog

from total_recall.errors import TranscriptError, TranscriptRefused

log = structlog.get_logger(__name__)

CONTEXT_MARKER = "<total-recall-context>"
HEAD_BYTES = 4096
TAIL_BYTES = 4096  # the bytes before an indexed offset whose hash is recorded with it (was_rewritten)
CHUNK_BYTES = 1 << 20
PROFILE_SCAN_BYTES = 4 << 20  # how far into the head we look for the session's first prompt
TOOL_DESCRIPTOR_CHARS = 120
TOOL_CALL = "[tool "  # how a tool call reads as text: "[tool Bash: git status]" (indexer, search)
TOOL_RESULT_CHARS = 500
# A command's output (or a failed call's) past TOOL_RESULT_CHARS keeps its last characters as well: a
# traceback's exception, a test run's failures and counts, a build's error are written last.
TOOL_RESULT_TAIL = 200
# A Task/Agent call's result is the subagent's final report (before Claude Code 2.1.198; later ones
# launch subagents in the background and their answer is in the subagent's own file).
REPORT_TOOLS = ("Task", "Agent")  # a tuple: a name of any JSON shape is compared, never hashed
REPORT_CHARS = 20_000
_REPORT_USAGE = re.compile(r"\s*<usage>[^<]*</usage>\s*$")
# The resume id's note to the model: "(for resuming to continue this agent's work if needed)" (2.0.x),
# "(use SendMessage with to: 'a49…', summary: '<5-10 word recap>' to continue this agent)" (2.1.x);
# at the report's end; read as RESUME_NOTE, which keeps what it says for a developer in three words.
_REPORT_RESUME_NOTE = re.compile(r"(\bagentId: [\w-]+) \([^()\n]*\bcontinue this agent[^()\n]*\)\s*$")
RESUME_NOTE = "(to resume it)"
# Claude Code 2.1.332's note to the model after an Edit or Write result ("The file … has been updated
# successfully. (file state is current in your context — no need to Read it back)"): a dozen words of
# every edit's result that match questions about files, state, context and reading. Left out.
_FILE_STATE_NOTE = re.compile(r"\s*\(file state is current in your context\b[^()\n]*\)")
# A /loop tick's ScheduleWakeup result (2.1.332): "Next wakeup scheduled for 09:20:00 (in 60s)." and ~250
# characters telling the model how to end its turn, in every tick of a loop that may run for hours. The
# first sentence is kept.
_WAKEUP_NOTE = re.compile(r"\A(Next wakeup scheduled for [^\n]*?\(in \d+s\)\.)\s.*\Z", re.S)

# Record types documented or seen for Claude Code up to 2.1.x; anything else counts as "unknown:<type>".
KNOWN_TYPES = frozenset(
    "user assistant system summary progress file-history-snapshot queue-operation attachment "
    "permission-mode mode agent-name custom-title ai-title last-prompt pr-link frame-link "
    "worktree-state relocated bridge-session attribution-snapshot "
    # seen in 2.1.332: request records (what was sent to the API) and bookkeeping, nothing said
    "api-request api-request-shape api-request-blob atis-latch tools-used cost-state".split()
)
COMMAND_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<local-command-",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)
INJECTED_PREFIXES = ("<system-reminder>", "<user-prompt-submit-hook>")
META_PREFIXES = ("<task-notification>",)
# A session's title, as the /resume picker shows it: the one the user gave (`/rename`), else the one
# Claude Code generated. Stored as a message of its own kind, skipped ("title"), so forget, pause and
# redaction treat it as the line it is; never extracted or searched. (An older version's `summary`
# record is no title of its file: its `leafUuid` may be in another session's.)
TITLE_FIELDS = {"custom-title": ("customTitle", "title"), "ai-title": ("aiTitle", "ai_title")}
TITLE_KINDS = ("title", "ai_title")  # the order a title is chosen in (memories.session_titles)
# The pull request a session opened (Claude Code 2.1.332 writes a `pr-link` record when a `gh pr create`
# in the session prints a PR's address, and again, unchanged, with the session's metadata when it ends or
# resumes): a message of its own kind on its line, skipped ("pr_link": never extracted), searched by its
# words ("PR #42 (pull request) in acme/shop: <url>"), and named beside the session in results (I167).
PR_LINK = "pr_link"
PR_LINK_PREFIX = "PR #"
_PR_WORDS = " (pull request)"  # after the number: the words that find it, and where its label ends
TITLE_CHARS = 200
INTERRUPT_PREFIX = "[Request interrupted"
COMPACTION_PROMPT_PREFIXES = (
    "Your task is to create a detailed summary of the conversation so far",
    "Your task is to create a detailed summary of the RECENT portion of the conversation",
)
# Claude Code appends what the user typed after /compact (and what a PreCompact hook printed) to its
# fixed summarisation template after this line, then closes with COMPACTION_CLOSING.
COMPACTION_INSTRUCTIONS = "\nAdditional Instructions:\n"
COMPACTION_CLOSING = "IMPORTANT: Do NOT use any tools."
COMPACT_SUMMARY_PREFIXES = ("This session is being continued from a previous conversation",)
# What Claude Code wraps a compaction's summary in, the same every time: an opening line ("… ran out of
# context. The summary below covers the earlier portion of the conversation." / "The conversation is
# summarized below:"), in 2.1.332 a reminder naming the tools used before it, and closing
# instructions to the model (2.1.332: ~700 characters, "If you need specific details from before
# compaction (like exact code snippets, error messages, …), read the full transcript at: <path>",
# "Continue the conversation …", "The messages after this summary …"; older: "Please continue the
# conversation from where we left it off …"). Their words matched questions about errors, code and
# context in every summary; the summary alone is kept (_compact_summary).
_SUMMARY_OPENING = re.compile(r"\AThis session is being continued from a previous conversation[^\n]*\n+")
_SUMMARY_REMINDER = re.compile(r"\A<system-reminder>.*?</system-reminder>\s*", re.S)
_SUMMARY_CLOSING = re.compile(
    r"\n\s*(?:If you need specific details from before compaction|"
    r"Continue the conversation from where it left off|"
    r"Please continue the conversation from where we left it off)\b.*\Z",
    re.S,
)
# `claude -p` runs made by memory tools (e.g. episodic-memory's summariser), not by a person.
HEADLESS_PROMPT_PREFIXES = ("Summarize this part of a conversation",)
# A reply that assents ("yes", "ok go ahead", "do it") may approve what the assistant just proposed:
# it goes to extraction, which tells a decision from a bare "ok" (extract.offline.reply_decision).
ASSENT_WORDS = frozenset(
    "yes yep yeah yup ya yea y sure ok okay k kk alright approved approve lgtm sgtm agreed agree proceed "
    "ahead do go please pls plz".split()
)
ASSENT_PHRASES = re.compile(
    r"\b(?:sounds (?:good|great|right|fine)|looks good|makes sense|go for it|that works|works for me"
    r"|would be great|ship it)\b"
)
ASSENT_MARKS = frozenset("👍✅👌🚀")  # a reply of only a thumbs-up assents too


def assents(text: str) -> bool:
    """Whether a reply says yes in some way ("yes", "sounds good", "ship it", a thumbs-up)."""
    lowered = text.lower()
    return bool(
        ASSENT_WORDS.intersection(_WORD.findall(lowered))
        or ASSENT_MARKS.intersection(text)
        or ASSENT_PHRASES.search(lowered)
    )


ACK_WORDS = frozenset(
    "ok okay k kk yes yep yeah yup y sure thanks thank thx ty you continue go ahead on proceed "
    "please pls sounds looks good great cool nice perfect awesome lgtm do it that s works fine "
    "alright right correct done got agreed exactly hi hello hey".split()
)
# Which input field best says what a tool call did, in order of preference.
TOOL_ARG_KEYS = (
    "command",
    "file_path",
    "notebook_path",
    "pattern",
    "query",
    "url",
    "description",
    "summary",  # SendMessage's recap of its message (the message is in the receiving agent's file)
    "skill",
    "path",
    "prompt",
)

_CONTEXT_BLOCK = re.compile(r"<total-recall-context>.*?(?:</total-recall-context>|\Z)", re.S)
_INJECTED_BLOCK = re.compile(r"<(system-reminder|user-prompt-submit-hook)>.*?(?:</\1>|\Z)", re.S)
_HOOK_PREAMBLE = re.compile(r"[\w:.-]+ hook (?:success|additional context)\s*:", re.I)
_TAG = re.compile(r"</?[a-z][a-z-]*>")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_WORD = re.compile(r"[^\W\d_]+|\d+")


@dataclass
class Message:
    line: int  # 1-based physical JSONL line of the first record of this message
    last_line: int  # last physical line that contributed (merged assistant lines)
    end_offset: int  # byte offset just after last_line's newline
    role: str  # "user" | "assistant"
    # prompt | response | tool_result | compact_summary | compaction_prompt | subagent_prompt |
    # subagent_response | command | meta | interrupt
    kind: str
    text: str  # the text to extract from ("" when nothing)
    timestamp: str | None
    session_id: str | None
    cwd: str | None
    git_branch: str | None
    uuid: str | None
    is_sidechain: bool
    agent_id: str | None
    skip_reason: str | None  # None = substantive, hand to extraction; else why not
    message_id: str | None = None  # assistant `message.id`; equal ids = one response cut by a live read
    # (physical line, text) of every piece of `text`: a merged response's text block and its tool
    # descriptor sit on different lines, and an idea must point at the line that holds its words.
    parts: list[tuple[int, str]] = field(default_factory=list)
    # a tool output's shell command, when this read saw the call: redaction hides the output of a
    # command that prints a secret (redact.REVEALS). Never stored, and not part of what a message is
    # (a read that starts between the call and its output has none)
    command: str | None = field(default=None, compare=False)
    # when each line of a merged response was written (a response begun before a pause may say its
    # words during it): the indexer withholds the pieces of lines said while paused
    part_times: dict[int, str | None] = field(default_factory=dict, compare=False)

    def line_of(self, text: str) -> int:
        """The physical line whose piece holds most of `text`'s words (the first such on a tie)."""
        return line_holding(self.parts, text, self.line)


# A record's uuid as Claude Code writes one (it is stored, I152); a value of any other shape, which a
# hand-made or hostile file could make a token, is no uuid.
UUID_SHAPE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _record_uuid(value: str | None) -> str | None:
    return value if value and UUID_SHAPE.fullmatch(value) else None


def line_holding(parts: list[tuple[int, str]], text: str, default: int) -> int:
    """Of (physical line, text) pieces, the line whose piece holds `text`, else most of its words
    (the first such on a tie); `default` when there is no piece. A response whose thinking line
    comes first holds its words on a later line, even when that line is its only piece."""
    if not parts:
        return default
    if len(parts) == 1:
        return parts[0][0]
    words = set(_WORD.findall(text.lower()))
    best, best_share = parts[0][0], -1.0
    for number, piece in parts:
        if text.strip() and text.strip() in piece:
            return number
        share = len(words & set(_WORD.findall(piece.lower()))) / max(1, len(words))
        if share > best_share:
            best, best_share = number, share
    return best


@dataclass
class ReadResult:
    messages: list[Message]
    end_offset: int  # byte offset after the last complete line consumed
    end_line: int  # physical lines consumed in total; the next read starts at end_line + 1
    counts: collections.Counter = field(default_factory=collections.Counter)
    head_hash: str = ""  # head_hash(path, min(HEAD_BYTES, end_offset)); pass both to was_rewritten
    # > end_offset: the bytes from end_offset to here are one oversized line with no newline yet;
    # pass it back as `scan_from` so the next read resumes there instead of scanning them again.
    scanned_to: int = 0


@dataclass
class _Line:
    number: int
    end: int  # byte offset just after this line's newline
    record: dict[str, Any] | None
    problems: tuple[str, ...] = ()


def read_new(
    path: Path,
    offset: int = 0,
    line: int = 0,
    *,
    fh: IO[bytes] | None = None,
    max_bytes: int | None = None,
    max_line_bytes: int = 8 * 1024 * 1024,
    scan_from: int | None = None,
    max_scan_bytes: int | None = None,
) -> ReadResult:
    """Messages from the complete lines after byte `offset`; line numbers continue from `line`.

    `fh`: the transcript already opened (open_transcript), read without opening `path` again;
    else `path` is opened here. `max_bytes` bounds one call (it stops at a line boundary,
    possibly earlier so as not to cut a response, or later when one response alone is bigger).
    A line longer than `max_line_bytes` is streamed past, never held in memory, and counted as
    "oversized_line". `max_scan_bytes` bounds how far one call streams through such a line;
    `scan_from` (a previous ReadResult.scanned_to) resumes inside it, so no byte is scanned twice.
    """
    path = Path(path)
    progress: dict[str, int] = {}
    resume = scan_from if scan_from is not None and scan_from > offset else None
    with contextlib.nullcontext(fh) if fh is not None else open_transcript(path) as fh:
        reader = _Reader(path, offset, line, fh)
        try:
            if offset > 0:
                reader.prime(_complete_lines(fh, 0, max_line_bytes, scan_limit=PROFILE_SCAN_BYTES), offset)
            lines = _complete_lines(
                fh, offset, max_line_bytes, skip_until=resume, scan_limit=max_scan_bytes, progress=progress
            )
            reader.consume(lines, max_bytes)
            head = _read_at(fh, 0, min(HEAD_BYTES, reader.end_offset))
        except OSError as exc:
            raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(head).hexdigest()
    scanned = progress.get("to", 0) if progress.get("line_start") == reader.end_offset else 0
    return ReadResult(reader.messages, reader.end_offset, reader.end_line, reader.counts, digest, scanned)


def record_lines(fh: IO[bytes], max_line_bytes: int = 8 * 1024 * 1024) -> dict[str, int]:
    """Each record uuid of the open transcript and the physical line that holds it (the first,
    should a hand-made file repeat one): where a rewritten transcript's records now are."""
    found: dict[str, int] = {}
    try:
        for number, (raw, end) in enumerate(_complete_lines(fh, 0, max_line_bytes), start=1):
            item = _parse(raw, number, end)
            if item.record is not None and (u := _record_uuid(_str(item.record.get("uuid")))):
                found.setdefault(u, number)
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript: {exc.strerror or exc}") from exc
    return found


def head_hash(path: Path, size: int = HEAD_BYTES) -> str:
    """sha256 hex of the first min(size, file size) bytes."""
    try:
        with open_transcript(path) as fh:
            return hashlib.sha256(_read_at(fh, 0, max(size, 0))).hexdigest()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc


def open_transcript(path: Path | str, roots: Sequence[str] | None = None) -> IO[bytes]:
    """Open a transcript for reading: every read of one goes through here.

    Only a regular file, opened non-blocking (a FIFO without a writer would hold the caller for
    ever). With `roots` (real paths: trust.allowed_roots), the file that was opened must also
    lie under one of them, judged by the open descriptor and not by the name: a name checked
    before (trust.refusal) can point elsewhere by the time it is opened, a symlink swapped in
    between. Raises TranscriptRefused for a file that may not be read, TranscriptError for one
    that cannot be opened.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise TranscriptError(f"cannot open transcript {path}: {exc.strerror or exc}") from exc
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise TranscriptRefused(str(path), "not a regular file")
        if roots is not None:
            where = _opened_path(fd, opened, str(path))
            if where is None or not any(where.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
                raise TranscriptRefused(str(path), "the file opened lies outside the allowed folders")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _opened_path(fd: int, opened: os.stat_result, path: str) -> str | None:
    """The real path of the file behind `fd`, or None when it cannot be told.

    Linux says it in /proc/self/fd, macOS through fcntl F_GETPATH. Trigger: neither answers (no
    /proc mounted). Why: the name's resolved path is only good if it is still this very file.
    Outcome: realpath(path), when lstat of it now finds the same device and inode, else None.
    """
    if sys.platform.startswith("linux"):
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = None
        if where is not None:
            if opened.st_nlink == 0 and where.endswith(" (deleted)"):
                where = where[: -len(" (deleted)")]  # unlinked since: where it was
            return where if where.startswith(os.sep) else None
    import fcntl

    if hasattr(fcntl, "F_GETPATH"):
        try:
            return os.fsdecode(fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024)).split(b"\0", 1)[0])
        except OSError:
            pass
    real = os.path.realpath(path)
    try:
        now = os.lstat(real)
    except OSError:
        return None
    return real if (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino) else None


def _read_at(fh: IO[bytes], offset: int, size: int) -> bytes:
    """Up to `size` bytes at `offset`, without moving the file's position (a read in progress
    on the same file goes on where it was)."""
    parts, fd = [], fh.fileno()
    while size > 0:
        part = os.pread(fd, size, offset)
        if not part:
            break
        parts.append(part)
        offset, size = offset + len(part), size - len(part)
    return b"".join(parts)


def tail_hash(fh: IO[bytes], offset: int) -> str:
    """sha256 hex of the TAIL_BYTES (fewer at the file's start) before `offset` of the open transcript:
    recorded with each indexed offset, read from the descriptor the lines were read from."""
    start = max(0, offset - TAIL_BYTES)
    try:
        return hashlib.sha256(_read_at(fh, start, offset - start)).hexdigest()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript: {exc.strerror or exc}") from exc


def was_rewritten(
    path: Path,
    offset: int,
    recorded_head_hash: str | None,
    *,
    fh: IO[bytes] | None = None,
    recorded_tail_hash: str | None = None,
) -> bool:
    """True when the file shrank below `offset`, no newline precedes `offset`, its head no longer
    hashes as recorded, or (when one was recorded: tail_hash) neither do the bytes just before
    `offset`. `fh`: the transcript already opened (else `path` is opened).

    `recorded_head_hash` is a ReadResult.head_hash. It covered min(HEAD_BYTES, end_offset) of
    that read, which may lie past `offset` (a caller committing part of a read), so it is
    compared with every prefix a read could have hashed: each line end within the first
    HEAD_BYTES, and HEAD_BYTES. Only identical bytes hash alike, so appending never looks like
    a rewrite and any change to the bytes that were hashed does.
    """
    if fh is None:
        try:
            size = Path(path).stat().st_size
        except FileNotFoundError:
            return offset > 0  # a vanished file cannot still hold what was read from it
        except OSError as exc:
            raise TranscriptError(f"cannot stat transcript {path}: {exc.strerror or exc}") from exc
        if size < offset:
            return True
        with open_transcript(path) as opened:
            return was_rewritten(
                path, offset, recorded_head_hash, fh=opened, recorded_tail_hash=recorded_tail_hash
            )
    try:
        if os.fstat(fh.fileno()).st_size < offset:
            return True
        head = _read_at(fh, 0, HEAD_BYTES)
        before = _read_at(fh, offset - 1, 1) if offset else b"\n"
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc
    if before != b"\n":
        # Trigger: the byte before the offset is not a newline. Why: every offset a read returns
        # follows one, so another file took this name even if it shares the hashed head (a copy
        # that forked after the first kilobytes). Outcome: read again from the start.
        return True
    hashed = min(HEAD_BYTES, offset)
    if recorded_head_hash is not None and recorded_head_hash not in _prefix_hashes(head, hashed):
        return True
    # Trigger: the head and the line end match, but the file is another one (replaced by a copy that
    # forked after its first kilobytes, its line end falling where the old offset was). Outcome: the
    # bytes before the offset tell it (rows written before 0017 have no tail hash: the head decides).
    return recorded_tail_hash is not None and recorded_tail_hash != tail_hash(fh, offset)


def _prefix_hashes(head: bytes, offset: int) -> set[str]:
    ends = {0, offset, len(head)} | {i + 1 for i, byte in enumerate(head) if byte == 10}
    digest, done, out = hashlib.sha256(), 0, set()
    for end in sorted(e for e in ends if e <= len(head)):
        digest.update(head[done:end])
        done = end
        out.add(digest.hexdigest())
    return out


SKIPPED_FOLDERS = frozenset({"tool-results", "memory", "file-history", "plans"})
SUBAGENTS = "subagents"  # `<session>/subagents/`: the session's subagents' (and workflows' agents') files


def discover(root: Path) -> list[Path]:
    """Every transcript under a folder, sorted: a `projects` root, one project folder, or any tree.

    Covers sessions, 2.0.x `agent-*.jsonl` files beside them, 2.1.x `<session>/subagents/` and a
    workflow's agents in `<session>/subagents/workflows/<run>/` (2.1.332); spilled tool output,
    other non-transcript folders and a workflow's `journal.jsonl` (its run log, whose agent results
    are their transcripts' last lines) are passed over: under `subagents` only `agent-*` files are
    transcripts.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    found = set()
    for p in root.rglob("*.jsonl"):
        folders = p.relative_to(root).parts[:-1]
        if not p.is_file() or SKIPPED_FOLDERS.intersection(folders):
            continue
        if _subagents_folder(p) is not None and not p.name.startswith("agent-"):
            continue
        found.add(p)
    return sorted(found)


def _subagents_folder(path: Path) -> Path | None:
    """The `<session>/subagents` folder a file is in: directly, or in a workflow's run folder
    (`subagents/workflows/<run>/`, Claude Code 2.1.332); None for any other file."""
    if path.parent.name == SUBAGENTS:
        return path.parent
    run = path.parent
    if run.parent.name == "workflows" and run.parent.parent.name == SUBAGENTS:
        return run.parent.parent
    return None


def session_of(path: Path, fh: IO[bytes] | None = None) -> str:
    """The session a transcript belongs to: sidechain files map to their parent session.
    `fh`: the transcript already opened (else `path` is opened when its records must say it)."""
    path = Path(path)
    if (subagents := _subagents_folder(path)) is not None and subagents.parent.name:
        return subagents.parent.name
    if path.name.startswith("agent-"):
        # Trigger: 2.0.x layout, agent file next to the sessions. Why: its name does not say
        # the parent, but every record carries the parent's sessionId. Outcome: first one found.
        try:
            with contextlib.nullcontext(fh) if fh is not None else open_transcript(path) as opened:
                found = _first_session_id(opened)
        except (OSError, TranscriptError):
            found = None
        if found:
            return found
    return path.stem


SESSION_SCAN_BYTES = 1 << 16  # the lines ending within this many bytes are searched for a sessionId
SESSION_LINE_BYTES = 1 << 20


def _first_session_id(fh: IO[bytes]) -> str | None:
    head = _read_at(fh, 0, SESSION_SCAN_BYTES + SESSION_LINE_BYTES)
    start = 0
    while (cut := head.find(b"\n", start)) >= 0:
        raw = head[start:cut] if cut - start <= SESSION_LINE_BYTES else None
        record = _parse(raw, 0, cut + 1).record
        if record and isinstance(record.get("sessionId"), str):
            return _str(record["sessionId"])
        if cut + 1 > SESSION_SCAN_BYTES:
            return None
        start = cut + 1
    return None


def _complete_lines(
    fh: IO[bytes],
    offset: int,
    max_line_bytes: int,
    *,
    skip_until: int | None = None,
    scan_limit: int | None = None,
    progress: dict[str, int] | None = None,
) -> Iterator[tuple[bytes | None, int]]:
    """Yield (line without its newline, offset after the newline) from `offset` on.

    A line over `max_line_bytes` is yielded as None once its newline is found; it is streamed
    past in chunks, never held whole. A last line without newline is not yielded.
    `skip_until`: the line at `offset` is known to be oversized with no newline before it.
    `scan_limit`: stop streaming through an oversized line after that many bytes from `offset`;
    `progress` then says {"line_start", "to"}: how far into that line the scan got.
    """
    fh.seek(skip_until if skip_until is not None else offset)
    buf = bytearray()
    pos = skip_until if skip_until is not None else offset  # file offset of buf[0]
    skipping = skip_until is not None
    line_start, begin = offset, pos
    while True:
        if skipping and scan_limit is not None and pos - begin >= scan_limit:
            break  # Trigger: a huge line without end (a sparse file). Outcome: resumable later.
        chunk = fh.read(CHUNK_BYTES)
        if not chunk:
            break
        if skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                pos += len(chunk)
                continue
            pos += cut + 1
            skipping = False
            yield None, pos
            chunk = chunk[cut + 1 :]
        scan_from, start = len(buf), 0
        buf += chunk
        while (cut := buf.find(b"\n", scan_from)) >= 0:
            yield (None if cut - start > max_line_bytes else bytes(buf[start:cut])), pos + cut + 1
            start = scan_from = cut + 1
        del buf[:start]
        pos += start
        if len(buf) > max_line_bytes:
            line_start = pos
            pos += len(buf)
            buf.clear()
            skipping = True
    if skipping and progress is not None:
        progress.update(line_start=line_start, to=pos)


def _parse(raw: bytes | None, number: int, end: int) -> _Line:
    if raw is None:
        return _Line(number, end, None, ("oversized_line",))
    if not raw.strip():
        return _Line(number, end, None, ("blank",))
    problems: tuple[str, ...] = ()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        problems, text = ("invalid_utf8",), raw.decode("utf-8", "replace")
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return _Line(number, end, None, problems + ("invalid_json",))
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return _Line(number, end, None, problems + ("invalid_record",))
    return _Line(number, end, record, problems)


class _Reader:
    """State of one read_new call: what was applied, the open response, the session profile."""

    def __init__(self, path: Path, offset: int, line: int, fh: IO[bytes]) -> None:
        self.path = path
        self.fh = fh  # the open transcript; earlier bytes are read at their offset (_read_at)
        self.agent_file = path.name.startswith("agent-")
        self.start, self.first_line = offset, line + 1
        self.end_offset, self.end_line = offset, line
        self.messages: list[Message] = []
        self.counts: collections.Counter = collections.Counter()
        self.pending: list[_Line] = []  # one assistant response (+ records between its lines)
        self.first_prompt_done = False
        self.file_skip: str | None = None  # set by the first prompt: headless/warmup sessions
        self._fallback_session: str | None = None
        self.plans: dict[str, str] = {}  # the latest plan file written in this read (ExitPlanMode shows it)
        self.tasks = _Tasks()  # the task list's ids and their todo texts (TaskCreate/TaskUpdate)
        self.tasks_scanned = False  # the lines before this read were searched for task ids
        self.reports: set[str] = set()  # ids of this read's Task/Agent calls: their results are reports
        self.commands: dict[str, str] = {}  # shell calls by id: their outputs' commands
        self.call_ids: set[str] = set()  # every tool call this read saw
        self.commands_scanned = False  # the calls before this read were looked for
        # The session goal in force (its condition), None when none is; looked for before this read's
        # start only when a goal_status needs it (_active_goal).
        self.goal: str | None = None
        self.goal_known = False
        self.pr_links: set[str] = set()  # the PR links this read stored (a repeated one is not stored again)

    # -- driving -------------------------------------------------------------------------

    def prime(self, head: Iterator[tuple[bytes | None, int]], offset: int) -> None:
        """Learn the session profile (its first prompt) from lines before `offset`."""
        for raw, end in head:
            # Trigger: no first prompt within PROFILE_SCAN_BYTES. Why: every later read would
            # rescan the head. Outcome: the session counts as ordinary (no headless/warmup mark).
            if end > offset or end > PROFILE_SCAN_BYTES or self.first_prompt_done:
                return
            item = _parse(raw, 0, end)
            if item.record is not None and item.record["type"] == "user":
                self._user(item.record, item)

    def consume(self, lines: Iterator[tuple[bytes | None, int]], max_bytes: int | None) -> None:
        number = self.first_line - 1
        for raw, end in lines:
            number += 1
            item = _parse(raw, number, end)
            if self._stop_before(item, max_bytes):
                break
            self._feed(item)
        self._flush()

    def _stop_before(self, item: _Line, max_bytes: int | None) -> bool:
        # Trigger: this line would take the read past max_bytes (the first line always goes in).
        # Why: bound one call without cutting a response in two. Outcome: stop here; or drop
        # the open response so the next read takes it whole; or, when the response began this
        # read, go on until it ends.
        if max_bytes is None or item.number == self.first_line or item.end - self.start <= max_bytes:
            return False
        if not self.pending:
            return True
        if self.pending[0].number > self.first_line:
            self.pending.clear()
            return True
        return not self._joins_pending(item.record)

    def _feed(self, item: _Line) -> None:
        if self.pending and self._joins_pending(item.record):
            self.pending.append(item if _group_key(item.record) else _slim(item))
            return
        self._flush()
        if item.record is not None and _group_key(item.record) is not None:
            self.pending.append(item)
        else:
            self._apply(item)

    def _joins_pending(self, record: dict[str, Any] | None) -> bool:
        if record is not None and record["type"] == "attachment" and _says_something(record):
            # what the user typed while Claude worked, a goal's news, an event: ends the response
            return False
        if record is None or record["type"] not in ("user", "assistant"):
            return True  # structure between a response's lines does not end it
        return _group_key(record) == _group_key(self.pending[0].record)

    def _flush(self) -> None:
        if not self.pending:
            return
        items, self.pending = self.pending, []
        parts = [i for i in items if i.record is not None and i.record["type"] == "assistant"]
        self.messages.append(self._assistant(parts))
        for item in items:
            self._count(item)
            self._read_session_record(item)  # a title or PR link between a response's lines joins it

    def _apply(self, item: _Line) -> None:
        self._count(item)
        record = item.record
        if record is None:
            return
        if record["type"] == "user":
            self.messages.append(self._user(record, item))
        elif record["type"] == "assistant":
            self.messages.append(self._assistant([item]))
        elif record["type"] == "attachment" and (queued := _queued_prompt(record)):
            # Typed while Claude was working: Claude Code hands it over as an attachment and writes
            # no user record for it, so this line is the only place the user's words are.
            env = self._envelope(record)
            kind, skip, text = self._classify_prompt(record, queued, env["is_sidechain"])
            self.messages.append(self._message(item, item, env, "user", kind, text, skip))
        elif record["type"] == "attachment" and (peer := _peer_message(record)):
            # What another agent told this conversation (a background subagent's report to "main"):
            # written nowhere else whole, the sender's call keeps only its recap. An agent's words,
            # not the user's.
            env = self._envelope(record)
            self.messages.append(self._message(item, item, env, "assistant", "subagent_response", peer, None))
        elif record["type"] == "attachment" and (goal := _goal_status(record)):
            said = _goal_text(goal, self._active_goal())
            self.goal, self.goal_known = None if goal.event in ("met", "cleared") else goal.condition, True
            if said:
                role, text = said
                self.messages.append(
                    self._message(item, item, self._envelope(record), role, "goal", text, None)
                )
        elif record["type"] == "attachment" and (events := _notified_events(_notification(record))):
            env = self._envelope(record)
            self.messages.append(self._message(item, item, env, "user", "tool_result", events, "tool_output"))
        else:
            self._read_session_record(item)

    def _read_session_record(self, item: _Line) -> None:
        """A line that titles the session becomes its title message (a subagent's file, stored under
        its parent's session, names no session). A title carries no time: like any line without one,
        a pause or a forget by date takes it by when it was read (the daemon reads it at the turn's
        end, with the lines it sums up). A line that links the session to a pull request becomes its
        PR link message, once per read for each pull request (Claude Code writes it again unchanged)."""
        record = item.record
        if record is None:
            return
        if (link := _pr_link(record)) is not None:
            if link in self.pr_links:
                return
            self.pr_links.add(link)
            kind, text, skip = PR_LINK, link, PR_LINK
        elif not self.agent_file and (title := _title(record)) is not None:
            (kind, text), skip = title, "title"
        else:
            return
        self.messages.append(self._message(item, item, self._envelope(record), "system", kind, text, skip))

    def _count(self, item: _Line) -> None:
        self.end_offset, self.end_line = item.end, item.number
        for problem in item.problems:
            self.counts[problem] += 1
        if "oversized_line" in item.problems:
            log.warning("transcript.oversized_line", path=str(self.path), line=item.number)
        record = item.record
        if record is None:
            return
        kind = record["type"]
        self.counts[kind if kind in KNOWN_TYPES else "unknown:" + kind[:40]] += 1
        if kind == "system" and isinstance(record.get("subtype"), str):
            self.counts["system:" + record["subtype"][:40]] += 1

    # -- user records --------------------------------------------------------------------

    def _user(self, record: dict[str, Any], item: _Line) -> Message:
        content = _content(record)
        blocks = _blocks(content)
        env = self._envelope(record)
        is_result = any(b.get("type") == "tool_result" for b in blocks)
        if is_result or (isinstance(content, list) and "toolUseResult" in record):
            self.tasks.result(record, blocks)
            # Two results are the user's own words, often a choice, so a prompt: the picks among the
            # options Claude offered (AskUserQuestion; the result's text names only each pick's label,
            # "Credo + Dialyxir + mix_audit", its description says what it means, "Skip Sobelow"), and
            # what the user typed when refusing a call ("no, use pnpm"), without Claude Code's boilerplate.
            if said := _answered_questions(record, blocks) or _refusal_feedback(blocks):
                kind = "subagent_prompt" if env["is_sidechain"] else "prompt"
                skip = "acknowledgement" if _is_acknowledgement(said) else None
                return self._message(item, item, env, "user", kind, said, skip)
            # A subagent's final report is what it found and proposed: kept whole, not cut to
            # TOOL_RESULT_CHARS like other tool output (sessions tune split: recall@1 0.393 -> 0.431).
            text = _background_launch(record) or _tool_result_text(
                record, blocks, report=self._is_report(record, blocks)
            )
            msg = self._message(item, item, env, "user", "tool_result", text, "tool_output")
            calls = [b["tool_use_id"] for b in blocks if isinstance(b.get("tool_use_id"), str)]
            if not self.commands_scanned and calls and not any(c in self.call_ids for c in calls):
                # the call was in an earlier read (the daemon reads a transcript in pieces)
                self.commands_scanned = True
                self.commands = {**self._commands_before(), **self.commands}
            msg.command = next((self.commands[c] for c in calls if c in self.commands), None)
            return msg
        kind, skip, text = self._classify_prompt(record, _text_of(blocks), env["is_sidechain"])
        return self._message(item, item, env, "user", kind, text, skip)

    def _is_report(self, record: dict[str, Any], blocks: list[dict[str, Any]]) -> bool:
        """A subagent's final report: the result of a Task/Agent call this read saw, or (the call
        was in an earlier read) a result whose structured data names the agent that ran. A refused
        or failed call is tool output like any other."""
        if any(b.get("is_error") is True for b in blocks):
            return False
        calls = {b.get("tool_use_id") for b in blocks if isinstance(b.get("tool_use_id"), str)}
        if calls & self.reports:
            return True
        result = record.get("toolUseResult")
        return isinstance(result, dict) and "agentId" in result and "totalDurationMs" in result

    def _classify_prompt(
        self, record: dict[str, Any], text: str, sidechain: bool
    ) -> tuple[str, str | None, str]:
        base = "subagent_prompt" if sidechain else "prompt"
        # A message that came in over a channel is meta to Claude Code but the user's words (I166).
        channel = _from_channel(record)
        is_meta = record.get("isMeta") is True and not channel
        text, injected_only = _strip_context(_channel_text(text) if channel else text)
        if record.get("isCompactSummary") is True or text.startswith(COMPACT_SUMMARY_PREFIXES):
            return "compact_summary", "compact_summary", _compact_summary(text)
        if injected_only:
            return ("meta" if is_meta else base), "injected_context", ""
        if is_meta:
            return "meta", "meta", "" if text.startswith(GOAL_INSTRUCTIONS) else _CAVEAT.sub("", text).strip()
        if sidechain and text.startswith(WORKFLOW_TASK_FRAME):
            text = _workflow_task(text)
        if text.startswith(COMMAND_PREFIXES):
            return "command", "command", _command_text(text)
        if text.startswith(INTERRUPT_PREFIX):
            return "interrupt", "interrupt", text
        if text.startswith(INJECTED_PREFIXES):
            # Trigger: hook output replayed as user text. Why: a person may still have typed
            # words after it. Outcome: keep those words, or skip when only hook text was there.
            text = _INJECTED_BLOCK.sub("", text).strip()
            if not text:
                return "meta", "injected_context", ""
        if events := _notified_events(text):
            return "tool_result", "tool_output", events
        if text.startswith(META_PREFIXES):
            return "meta", "meta", _notification_text(text)
        skip = self._prompt_skip(record, text, sidechain)
        if skip == "compaction_prompt":  # not the user's prompt: Claude Code's, with what was added to it
            return "compaction_prompt", skip, _compaction_instructions(text)
        return base, skip, text

    def _prompt_skip(self, record: dict[str, Any], text: str, sidechain: bool) -> str | None:
        if not text:
            return "empty"
        first, self.first_prompt_done = not self.first_prompt_done, True
        if self._is_compaction(record) or text.startswith(COMPACTION_PROMPT_PREFIXES):
            return "compaction_prompt"
        if first:
            self.file_skip = self._session_skip(text, sidechain)
        if self.file_skip:
            return self.file_skip
        if sidechain and text == "Warmup":
            return "warmup"
        return "acknowledgement" if _is_acknowledgement(text) else None

    def _session_skip(self, first_prompt: str, sidechain: bool) -> str | None:
        if not sidechain and first_prompt.startswith(HEADLESS_PROMPT_PREFIXES):
            return "headless_summarizer"
        if self.agent_file and first_prompt == "Warmup":
            return "warmup"
        return None

    # -- assistant records ---------------------------------------------------------------

    def _assistant(self, items: list[_Line]) -> Message:
        record = items[0].record or {}
        env = self._envelope(record)
        pieces: list[str] = []
        parts: list[tuple[int, str]] = []
        seen: set[str] = set()
        for item in items:
            blocks = _blocks(_content(item.record or {}))
            if "latest" not in self.plans and any(_needs_plan_file(b) for b in blocks):
                self.plans["latest"] = self._plan_before(item.end)
            if not self.tasks_scanned and any(self.tasks.unknown(b) for b in blocks):
                self.tasks_scanned = True
                self.tasks.learn_before(self._tasks_before())
            before = len(pieces)
            self.reports.update(
                b["id"]
                for b in blocks
                if b.get("type") == "tool_use"
                and b.get("name") in REPORT_TOOLS
                and isinstance(b.get("id"), str)
            )
            self.commands.update(_shell_calls(blocks))
            self.call_ids.update(
                b["id"] for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
            )
            _response_pieces(blocks, env["cwd"], pieces, seen, self.plans, self.tasks)
            parts += [(item.number, _clean(p)) for p in pieces[before:]]
        if self._is_compaction(record):
            kind, skip = "compact_summary", "compact_summary"
        else:
            kind = "subagent_response" if env["is_sidechain"] else "response"
            skip = self._response_skip(record, seen)
        message = self._message(items[0], items[-1], env, "assistant", kind, "\n".join(pieces), skip)
        message.message_id = _group_id(record)
        message.parts = parts
        message.part_times = {i.number: _timestamp(i.record.get("timestamp")) for i in items if i.record}
        return message

    def _response_skip(self, record: dict[str, Any], seen: set[str]) -> str | None:
        body = record.get("message")
        model = body.get("model") if isinstance(body, dict) else None
        if record.get("isApiErrorMessage") is True or model == "<synthetic>":
            return "synthetic"  # API errors and placeholders Claude Code wrote itself
        if "text" in seen:
            return self.file_skip
        for reason in ("injected_context", "tool_use_only", "thinking_only"):
            if reason in seen:
                return reason
        return "empty"

    def _records_before(
        self, end: int, scan_bytes: int, wanted: Callable[[bytes], bool]
    ) -> Iterator[dict[str, Any]]:
        """The records of the lines within `scan_bytes` before byte `end` that `wanted` keeps (the first,
        cut, line left out): what a read in pieces learns from lines an earlier read consumed, so it
        sees what a whole read sees."""
        start = max(0, end - scan_bytes)
        try:
            chunk = _read_at(self.fh, start, end - start) if end > 0 else b""
        except OSError:
            return
        for raw in chunk.split(b"\n")[1 if start else 0 :]:
            if wanted(raw) and (record := _parse(raw, 0, 0).record) is not None:
                yield record

    def _plan_before(self, end: int) -> str:
        """The last plan file written before byte `end`, for an ExitPlanMode whose Write an
        earlier read consumed."""
        plans: dict[str, str] = {}
        for record in self._records_before(
            end, PLAN_SCAN_BYTES, lambda raw: b"plan" in raw and b'"Write"' in raw
        ):
            if record["type"] == "assistant":
                for block in _blocks(_content(record)):
                    _plan_or_todos(block, plans)
        return plans.get("latest", "")

    def _active_goal(self) -> str | None:
        """The goal in force before the goal_status being read: this read's last, else the last one
        set (and not met or cleared) within GOAL_SCAN_BYTES before its start."""
        if not self.goal_known:
            self.goal_known = True
            for record in self._records_before(
                self.start, GOAL_SCAN_BYTES, lambda raw: b'"goal_status"' in raw
            ):
                if (status := _goal_status(record)) is not None:
                    self.goal = None if status.event in ("met", "cleared") else status.condition
        return self.goal

    def _commands_before(self) -> dict[str, str]:
        """The shell calls within COMMAND_SCAN_BYTES before this read, for an output whose call an
        earlier read consumed (redaction hides the output of a command that prints a secret)."""
        found: dict[str, str] = {}
        for record in self._records_before(
            self.start, COMMAND_SCAN_BYTES, lambda raw: b'"tool_use"' in raw and b'"command"' in raw
        ):
            if record["type"] == "assistant":
                found.update(_shell_calls(_blocks(_content(record))))
        return found

    def _tasks_before(self) -> _Tasks:
        """The task ids created before this read (a TaskUpdate can complete a task whose
        TaskCreate an earlier read consumed: the daemon reads a transcript in pieces)."""
        found = _Tasks()
        marks = (b'"TaskCreate"', b'"task"', b" created successfully: ")  # a TaskCreate call or its result
        for record in self._records_before(
            self.start, TASK_SCAN_BYTES, lambda raw: any(m in raw for m in marks)
        ):
            blocks = _blocks(_content(record))
            if record["type"] == "assistant":
                for block in blocks:
                    if block.get("type") == "tool_use" and block.get("name") == "TaskCreate":
                        found.create(block)
            elif record["type"] == "user":
                found.result(record, blocks)
        return found

    # -- shared --------------------------------------------------------------------------

    def _is_compaction(self, record: dict[str, Any]) -> bool:
        agent = record.get("agentId")
        return self.path.name.startswith("agent-acompact") or (
            isinstance(agent, str) and agent.startswith("acompact")
        )

    def _envelope(self, record: dict[str, Any]) -> dict[str, Any]:
        agent = _str(record.get("agentId"))
        if agent is None and self.agent_file:
            agent = self.path.stem[len("agent-") :]
        session = _str(record.get("sessionId")) or _str(record.get("session_id"))
        return {
            "timestamp": _timestamp(record.get("timestamp")),
            "session_id": session or self._session_fallback(),
            "cwd": _str(record.get("cwd")),
            "git_branch": _str(record.get("gitBranch")),
            "uuid": _record_uuid(_str(record.get("uuid"))),
            "is_sidechain": record.get("isSidechain") is True or self.agent_file,
            "agent_id": agent,
        }

    def _session_fallback(self) -> str:
        if self._fallback_session is None:
            self._fallback_session = session_of(self.path, self.fh)
        return self._fallback_session

    @staticmethod
    def _message(
        first: _Line, last: _Line, env: dict[str, Any], role: str, kind: str, text: str, skip: str | None
    ) -> Message:
        text = _clean(text)
        return Message(
            line=first.number,
            last_line=last.number,
            end_offset=last.end,
            role=role,
            kind=kind,
            text=text,
            skip_reason=skip,
            parts=[(first.number, text)],
            **env,
        )


def _compaction_instructions(text: str) -> str:
    """Trigger: Claude Code's request to summarise the conversation (a compaction).
    Why: its 8 KB template is the same in every compaction and holds the words of many questions
    ("errors and fixes", "pending tasks", "current work", "user feedback"): a line of it outranked
    the lines that answer them. Outcome: only what the user or a hook added after the template is
    kept (the /compact instructions, injected project context); a bare template keeps nothing."""
    _, found, added = text.partition(COMPACTION_INSTRUCTIONS)
    if not found:
        return ""
    closing = added.rfind(COMPACTION_CLOSING)
    return (added[:closing] if closing >= 0 else added).strip()


def _response_pieces(
    blocks: list[dict[str, Any]],
    cwd: str | None,
    pieces: list[str],
    seen: set[str],
    plans: dict[str, str] | None = None,
    tasks: _Tasks | None = None,
) -> None:
    """Append one response line's text and tool descriptors; note what else it held.

    TodoWrite lists, TaskCreate/TaskUpdate calls and ExitPlanMode plans are what was decided and
    what is left to do, so they are text for extraction (``[todos]`` / ``[plan]`` blocks), not
    tool descriptors.
    """
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text, injected_only = _strip_context(block["text"].strip())
            if injected_only:
                seen.add("injected_context")
            elif text and text != "(no content)":
                pieces.append(text)
                seen.add("text")
        elif kind in ("tool_use", "server_tool_use"):
            structured = _plan_or_todos(block, plans if plans is not None else {}, tasks)
            if structured:
                pieces.append(structured)
                seen.add("text")
            else:
                pieces.append(_tool_descriptor(block, cwd))
                seen.add("tool_use_only")
        elif kind in ("thinking", "redacted_thinking"):
            seen.add("thinking_only")


TODO_STATUSES = ("pending", "in_progress", "completed")
PLAN_CHARS = 8_000
PLAN_SCAN_BYTES = 4 << 20  # how far back an ExitPlanMode looks for its plan file in an earlier read
TASK_SCAN_BYTES = 16 << 20  # how far back a TaskUpdate looks for its task's TaskCreate in an earlier read
COMMAND_SCAN_BYTES = 1 << 20  # how far back a tool output looks for its shell call in an earlier read


def _shell_calls(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """A response's shell calls: tool_use id -> command."""
    return {
        b["id"]: b["input"]["command"]
        for b in blocks
        if b.get("type") == "tool_use"
        and isinstance(b.get("id"), str)
        and isinstance(b.get("input"), dict)
        and isinstance(b["input"].get("command"), str)
    }


TASK_DETAIL_CHARS = 120  # the part of a task's description kept with its subject
_TASK_CREATED = re.compile(r"^Task #(\S+) created successfully: ")


def _needs_plan_file(block: dict[str, Any]) -> bool:
    args = block.get("input") if isinstance(block.get("input"), dict) else {}
    return block.get("name") == "ExitPlanMode" and not isinstance(args.get("plan"), str)


def _plan_or_todos(block: dict[str, Any], plans: dict[str, str], tasks: _Tasks | None = None) -> str | None:
    """A ``[todos]`` block for TodoWrite, TaskCreate and a completing TaskUpdate, a ``[plan]``
    block for ExitPlanMode, else None.

    ExitPlanMode carries its plan in ``input.plan`` (Claude Code 1.x/2.0) or shows the plan file
    written just before it (2.1: a Write to ``plan.md`` or under ``plans/``), remembered in ``plans``.
    TaskCreate is one pending entry; TaskUpdate to "completed" is a completed entry with the same
    text, found through ``tasks`` (its input names the task by id only).
    """
    name = _str(block.get("name"))
    args = block.get("input") if isinstance(block.get("input"), dict) else {}
    if name in ("Write", "Edit") and isinstance(args.get("file_path"), str):
        path = args["file_path"]
        if path.rsplit("/", 1)[-1].lower() == "plan.md" or "/plans/" in path:
            if isinstance(args.get("content"), str):
                plans["latest"] = args["content"]
        return None
    if name == "ExitPlanMode":
        plan = args.get("plan") if isinstance(args.get("plan"), str) else plans.get("latest", "")
        return f"[plan]\n{_cut(plan.strip(), PLAN_CHARS, '')}\n[/plan]" if plan.strip() else None
    if name == "TodoWrite" and isinstance(args.get("todos"), list):
        rows = []
        for todo in args["todos"]:
            if isinstance(todo, dict) and isinstance(todo.get("content"), str) and todo["content"].strip():
                status = todo.get("status") if todo.get("status") in TODO_STATUSES else "pending"
                rows.append(f"- [{status}] {_cut(' '.join(todo['content'].split()), 300, '')}")
        return "[todos]\n" + "\n".join(rows) + "\n[/todos]" if rows else None
    if name == "ReportFindings" and isinstance(args.get("findings"), list):
        return _review_findings(args["findings"])
    if name == STRUCTURED_OUTPUT:
        return _cut("\n".join(_structured_lines(args)), REPORT_CHARS) or None
    if name in ("TaskCreate", "TaskUpdate"):
        tasks = tasks if tasks is not None else _Tasks()
        text = tasks.create(block) if name == "TaskCreate" else tasks.completed(args)
        status = "pending" if name == "TaskCreate" else "completed"
        return f"[todos]\n- [{status}] {text}\n[/todos]" if text else None
    return None


# A workflow agent asked for a schema (Claude Code 2.1.332) gives its result as this call's input, not as
# text: its report is the call, read as lines (_structured_lines).
STRUCTURED_OUTPUT = "StructuredOutput"
STRUCTURED_DEPTH = 6  # deeper values are left out


# How Claude Code 2.1.332 frames a workflow agent's task, computed by the workflow's script: a first line
# (~420 characters: "… carries no user authority … The computed task text follows:"), then the task,
# every line indented by two spaces.
WORKFLOW_TASK_FRAME = "[Workflow harness"


def _workflow_task(text: str) -> str:
    """The task a workflow's script gave its agent, without the harness's frame around it."""
    frame, _, task = text.partition("\n")
    task = textwrap.dedent(task).strip()
    return task if task and frame.rstrip().endswith(":") else text


def _structured_lines(value: Any, depth: int = 0) -> list[str]:
    """A structured result as the lines a person would write: a scalar as itself, an object's plain
    values as "key: value" (its first text bare when it stands for an item of a list), a list one
    item a line. {"findings": [{"title": "Counter never reset", "file": "queue.py"}]} reads
    "findings:" then "- Counter never reset; file: queue.py"."""
    if depth > STRUCTURED_DEPTH:
        return []
    if isinstance(value, str):
        return [" ".join(value.split())] if value.strip() else []
    if isinstance(value, (bool, int, float)):
        return [json.dumps(value)]
    if isinstance(value, list):
        return [
            f"- {line}" if n == 0 else f"  {line}"
            for item in value
            for n, line in enumerate(_structured_lines(item, depth + 1))
        ]
    if not isinstance(value, dict):
        return []
    flat = all(isinstance(v, (str, bool, int, float)) or v is None for v in value.values())
    if flat and depth > 0:
        parts, bare = [], True
        for key, v in value.items():
            [text] = _structured_lines(v, depth + 1) or [""]
            if text:
                parts.append(text if bare and isinstance(v, str) else f"{key}: {text}")
                bare = bare and not isinstance(v, str)
        return ["; ".join(parts)] if parts else []
    lines = []
    for key, v in value.items():
        inner = _structured_lines(v, depth + 1)
        if not inner:
            continue
        if isinstance(v, (dict, list)):
            lines += [f"{key}:", *inner]
        else:
            lines.append(f"{key}: {inner[0]}")
    return lines


FINDING_CHARS = 600  # one review finding: its statement and how it fails
# How a finding re-reported after fixes reads ("was fixed" is what the extractors take for a solution).
FINDING_OUTCOMES = {
    "fixed": "Review finding was fixed",
    "skipped": "Review finding was skipped",
    "no_change_needed": "Review finding needs no change",
}
REVIEW_SEVERITIES = ("important", "pre_existing", "nit")


def _review_findings(findings: list[Any]) -> str | None:
    """A code review's findings (Claude Code's ReportFindings tool, seen in 2.1.332: the review's
    result is this call's input, not text), one line each: "Issue: <summary> (<severity>, in
    <file:line>) <how it fails>", so they read as the problems they are, or, re-reported after
    fixes, as what became of them ("Review finding was fixed: <summary> …")."""
    rows = []
    for finding in findings:
        if not isinstance(finding, dict) or not isinstance(finding.get("summary"), str):
            continue
        summary = " ".join(finding["summary"].split())
        if not summary:
            continue
        where = _str(finding.get("file")) or ""
        line = finding.get("line")
        if where and isinstance(line, int) and not isinstance(line, bool) and line > 0:
            where += f":{line}"
        details = [finding["severity"]] if finding.get("severity") in REVIEW_SEVERITIES else []
        details += [f"in {where}"] if where else []
        row = f"{FINDING_OUTCOMES.get(finding.get('outcome'), 'Issue')}: {summary}"
        row += f" ({', '.join(details)})" if details else ""
        scenario = finding.get("failure_scenario")
        if isinstance(scenario, str) and scenario.strip() and finding.get("outcome") is None:
            row += " " + " ".join(scenario.split())
        rows.append(_cut(row, FINDING_CHARS))
    return "\n".join(rows) if rows else None


class _Tasks:
    """Claude Code's task list as a transcript shows it (2.1.x; tool input and result shapes
    seen in sdk-tools.d.ts and in the CLI's own transcripts):

    - assistant ``tool_use`` TaskCreate ``{subject, description, activeForm?}``; its ``tool_result``
      line says "Task #<id> created successfully: <subject>" and carries
      ``toolUseResult: {"task": {"id", "subject"}}``: the id exists only from here on;
    - assistant ``tool_use`` TaskUpdate ``{taskId, status?, subject?, ...}``; its result has no subject.

    So a task's todo text is remembered by the TaskCreate call's id, then by the task id its
    result names, and a TaskUpdate to "completed" renders that same text: the completed entry
    closes exactly the todo the TaskCreate opened.
    """

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # TaskCreate tool_use id -> its todo text
        self.ids: dict[str, str] = {}  # task id -> its todo text
        self.subjects: dict[str, str] = {}  # task id -> subject, from a result whose call was not seen

    def create(self, block: dict[str, Any]) -> str | None:
        args = block.get("input") if isinstance(block.get("input"), dict) else {}
        text = _task_text(args.get("subject"), args.get("description"))
        if text and isinstance(block.get("id"), str):
            self.calls[block["id"]] = text
        return text

    def result(self, record: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
        """Learn the task id a TaskCreate's result names (toolUseResult, else the result text)."""
        task = record.get("toolUseResult")
        task = task.get("task") if isinstance(task, dict) else None
        task = task if isinstance(task, dict) and isinstance(task.get("id"), str) else {}
        for block in blocks:
            call = block.get("tool_use_id") if block.get("type") == "tool_result" else None
            if not isinstance(call, str) or call not in self.calls:
                continue
            said = _TASK_CREATED.match(_result_body(block.get("content")).strip())
            ident = task.get("id") or (said.group(1) if said else None)
            if ident:
                self.ids[ident] = self.calls[call]
        if task and isinstance(task.get("subject"), str):
            self.subjects.setdefault(task["id"], task["subject"])

    def unknown(self, block: dict[str, Any]) -> bool:
        """A TaskUpdate completing a task whose TaskCreate this read has not seen."""
        args = block.get("input") if isinstance(block.get("input"), dict) else {}
        return (
            block.get("type") == "tool_use"
            and block.get("name") == "TaskUpdate"
            and args.get("status") == "completed"
            and _task_id(args) not in (None, *self.ids)
        )

    def learn_before(self, earlier: _Tasks) -> None:
        """Add what earlier lines said; what this read saw stays (it is newer)."""
        self.ids = {**earlier.ids, **self.ids}
        self.subjects = {**earlier.subjects, **self.subjects}

    def completed(self, args: dict[str, Any]) -> str | None:
        """The todo text a TaskUpdate closes: only one to "completed" closes anything, and an
        update naming a task never seen closes by the subject it carries, or not at all."""
        if args.get("status") != "completed":
            return None  # in_progress, pending, deleted, or other fields: nothing new, nothing closed
        task = _task_id(args)
        if task in self.ids:
            return self.ids[task]
        return _task_text(args.get("subject") or self.subjects.get(task or ""), None)


def _task_id(args: dict[str, Any]) -> str | None:
    task = args.get("taskId")
    return str(task) if isinstance(task, (str, int)) and not isinstance(task, bool) else None


def _task_text(subject: Any, description: Any) -> str | None:
    """A task's todo text: its subject, and the description's first sentence (shortened) when
    that says something the subject does not (a word of 4+ letters the subject lacks)."""
    subject = " ".join(subject.split()) if isinstance(subject, str) else ""
    detail = " ".join(description.split()) if isinstance(description, str) else ""
    detail = re.split(r"(?<=[.!?])\s", detail, maxsplit=1)[0]
    if not subject:
        subject, detail = detail, ""
    if not subject:
        return None
    known = [w[:5] for w in _WORD.findall(subject.lower())]
    new = [
        w for w in _WORD.findall(detail.lower()) if len(w) >= 4 and not any(_same_word(w, k) for k in known)
    ]
    if new:
        if len(detail) > TASK_DETAIL_CHARS:
            detail = detail[:TASK_DETAIL_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "…"
        subject = f"{subject} — {detail}"
    return _cut(subject, 300, "")


def _same_word(word: str, other: str) -> bool:
    """Crude stemming: "tests" is "test", "released" is "release"; "in" is not "install"."""
    a, b = word[:5], other[:5]
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def _tool_descriptor(block: dict[str, Any], cwd: str | None) -> str:
    """One short line saying which tool ran on what, e.g. "[tool Edit: src/app.py]"."""
    name = _str(block.get("name")) or "?"
    args = block.get("input") if isinstance(block.get("input"), dict) else {}
    arg = next((args[k] for k in TOOL_ARG_KEYS if isinstance(args.get(k), str) and args[k].strip()), "")
    if cwd and arg.startswith(cwd.rstrip("/") + "/"):
        arg = arg[len(cwd.rstrip("/")) + 1 :]
    arg = " ".join(_head(arg, TOOL_DESCRIPTOR_CHARS * 2).split())
    text = f"{TOOL_CALL}{name}: {arg}]" if arg else f"{TOOL_CALL}{name}]"
    return _cut(text, TOOL_DESCRIPTOR_CHARS, "…]")


def _background_launch(record: dict[str, Any]) -> str | None:
    """A Task/Agent call that started its subagent in the background (seen in Claude Code 2.1.332) has
    no report yet, only instructions to the model (about 900 characters: "Async agent launched
    successfully … do not report, assume, or predict them …"), whose words would match questions about
    agents, progress and files. It reads as what happened; the report is in the subagent's own file,
    and the notification that later brings it to the parent is a meta line (META_PREFIXES).

    A Monitor (2.1.332: a command whose every printed line is an event for the model) starts so too
    and reads as "Monitor started (task <id>)"; a message SendMessage queued for an agent (or resumed it
    with) reads as the first sentence of its result ("Message queued for delivery to <agent> at its next
    tool round.").

    A Workflow call (2.1.332: a script of subagents) is launched the same way, with ~1,500 characters
    of paths and resume instructions; it reads as "Workflow launched in the background: <summary>" and
    its run id (what `resumeFromRunId` takes). Its agents write their own files under
    `<session>/subagents/workflows/<run>/`, where their reports are read."""
    result = record.get("toolUseResult")
    if not isinstance(result, dict):
        return None
    if ("pin" in result or "resumedAgentId" in result) and (sent := _str(result.get("message"))):
        # SendMessage: "Message queued for delivery to <agent> at its next tool round. If it finishes
        # first, it is resumed …" (2.1.332), 'Agent "<id>" had no active task; resumed from transcript
        # in the background with your message. You'll be notified … Output: <path>' (2.1.197): what
        # happened is the first sentence; the rest tells the model how to wait.
        first = re.split(r"(?<=[.!?])\s", sent.strip(), maxsplit=1)[0]
        return _cut(" ".join(first.split()), TOOL_RESULT_CHARS)
    if isinstance(result.get("timeoutMs"), int) and (task := _str(result.get("taskId"))):
        # A Monitor (2.1.332): ~330 characters telling the model to keep working; its events follow
        # as notifications (_notified_events).
        return _cut(f"Monitor started (task {' '.join(task.split())})", TOOL_RESULT_CHARS)
    if result.get("status") != "async_launched":
        return None
    workflow = result.get("taskType") == "local_workflow" or _str(result.get("runId")) is not None
    description = (_str(result.get("description")) or _str(result.get("summary")) or "").strip()
    text = ("Workflow" if workflow else "Agent") + " launched in the background"
    text += f": {' '.join(description.split())}" if description else ""
    if workflow:
        run = (_str(result.get("runId")) or "").strip()
        return _cut(text + (f"\nrunId: {run}" if run else ""), TOOL_RESULT_CHARS)
    agent = (_str(result.get("agentId")) or "").strip()
    return _cut(text + (f"\nagentId: {agent} {RESUME_NOTE}" if agent else ""), TOOL_RESULT_CHARS)


def _tool_result_text(record: dict[str, Any], blocks: list[dict[str, Any]], report: bool = False) -> str:
    """A tool's output, cut to TOOL_RESULT_CHARS; a subagent's report (`report`) up to REPORT_CHARS,
    without the token and time counts Claude Code appends; its note to the model on how to resume
    the agent is RESUME_NOTE (the resume id stays: a developer may want it back; the note's dozen
    words made a short report too unlike the subagent's own line to be shown as one result with it).
    A call the user refused is REFUSED_MARK, not Claude Code's boilerplate ("if it was a file edit,
    the new_string was NOT written…"), whose words ranked it for questions about edits and
    rejections; the refused call is on a line before it."""
    limit = REPORT_CHARS if report else TOOL_RESULT_CHARS
    parts, bodies = [], []
    for block in blocks:
        if block.get("type") == "tool_result":
            whole = _result_body(block.get("content"))
            body = _head(whole, limit * 2)
            if block.get("is_error") is True and body.startswith(REFUSED):
                parts.append(REFUSED_MARK)
                continue
            parts.append(("[error] " if block.get("is_error") is True else "") + body)
            bodies.append(whole)
    text = "\n".join(p for p in parts if p).strip()
    if not text and isinstance(record.get("toolUseResult"), str):
        text = record["toolUseResult"].strip()
        bodies = [text]
    text = _WAKEUP_NOTE.sub(r"\1", _FILE_STATE_NOTE.sub("", _strip_context(_head(text, limit * 2))[0]))
    if report:
        text = _REPORT_RESUME_NOTE.sub(rf"\1 {RESUME_NOTE}", _REPORT_USAGE.sub("", text)).strip()
    elif _ran_or_failed(record, blocks):
        if sum(map(len, bodies)) > limit + TOOL_RESULT_TAIL:
            from total_recall.redact import tail as ending  # lazy, as in _cut

            end = "\n".join(b[-4 * TOOL_RESULT_TAIL :] for b in bodies if b).rstrip()[-4 * TOOL_RESULT_TAIL :]
            tail = ending(_strip_context(end)[0], TOOL_RESULT_TAIL)
            return f"{_cut(text, limit)}\n{tail}" if tail else _cut(text, limit)
        return _cut(text, limit + TOOL_RESULT_TAIL)
    return _cut(text, limit)


def _ran_or_failed(record: dict[str, Any], blocks: list[dict[str, Any]]) -> bool:
    """A shell command's result (Claude Code's structured result has its stdout and stderr) or a
    failed call's: their last lines say how it ended. A file read's or a search's end is no more
    telling than any other part of it."""
    result = record.get("toolUseResult")
    ran = isinstance(result, dict) and ("stdout" in result or "stderr" in result)
    return ran or any(b.get("is_error") is True for b in blocks if b.get("type") == "tool_result")


def _cut(text: str, limit: int, suffix: str = "…") -> str:
    """``text`` cut to ``limit`` characters, ``suffix`` included, never ending in half a secret: the
    indexer redacts after the cut, when half a token no longer looks like one (redact.cut)."""
    if len(text) <= limit:
        return text
    from total_recall.redact import cut  # lazy: detect-secrets takes ~0.2 s to import

    return cut(text, limit, suffix)


def _head(text: str, limit: int) -> str:
    """A first, cheap cut of a text that may be huge, far past where it is cut for good (``_cut``):
    it ends on a whitespace boundary, so no token there is halved."""
    if len(text) <= limit:
        return text
    return text[: _TOKEN_REST.match(text, limit).end()]


_TOKEN_REST = re.compile(r"\S{0,4096}")


# The notes a user may add to an AskUserQuestion's picks, as the result's text gives them.
ANSWER_NOTES = re.compile(
    r"\buser notes: (.*?)(?:\.? You can now continue with the user's answers in mind\.|\Z)", re.S
)


def _answered_questions(record: dict[str, Any], blocks: list[dict[str, Any]]) -> str:
    """The user's answers to an AskUserQuestion call, one sentence per question: 'For "Which tools
    should we set up" I chose Credo + Dialyxir + mix_audit: Skip Sobelow.' (each picked option with
    its description; a multi-select's picks come comma-separated), or 'I answered: ...' for words the
    user typed instead of an option, then any notes the user added. "" for any other tool result, or a
    dismissed question."""
    result = record.get("toolUseResult")
    if not isinstance(result, dict) or any(b.get("is_error") is True for b in blocks):
        return ""
    questions, answers = result.get("questions"), result.get("answers")
    if not isinstance(questions, list) or not isinstance(answers, dict):
        return ""
    said = []
    for asked in questions:
        if not isinstance(asked, dict) or not isinstance(asked.get("question"), str):
            continue
        answer = answers.get(asked["question"])
        if not isinstance(answer, str) or not answer.strip():
            continue
        options = {
            o["label"]: o.get("description") if isinstance(o.get("description"), str) else ""
            for o in asked.get("options") or []
            if isinstance(o, dict) and isinstance(o.get("label"), str)
        }
        picked = [answer] if answer in options else [part.strip() for part in answer.split(",")]
        # The question without its question marks: one sentence per answer, not a question the
        # user asked (the extractor reads sentences).
        question = " ".join(asked["question"].replace("?", "").split())
        if all(p in options for p in picked):
            chosen = "; ".join(f"{p}: {options[p]}" if options[p] else p for p in picked)
            said.append(f'For "{question}" I chose {chosen}.')
        else:
            said.append(f'For "{question}" I answered: {answer.strip()}')
    if said:
        # Words the user added to the picks ("... user notes: go with sorted keys.") are theirs too.
        notes = ANSWER_NOTES.search("\n".join(_result_body(b.get("content")) for b in blocks))
        if notes and notes.group(1).strip():
            said.append(notes.group(1).strip())
    return _cut("\n".join(said), REPORT_CHARS, "")


# Claude Code's result for a refused tool call, and the mark it is read as.
REFUSED = "The user doesn't want to proceed with this tool use."
REFUSED_MARK = "[refused by the user]"
# Claude Code's result for a refused tool call, when the user typed why; the note some versions append
# after the user's words is Claude Code's, and so is the text of a refused AskUserQuestion's "clarify".
REFUSAL_SAID = "To tell you how to proceed, the user said:"
_REFUSAL_NOTE = re.compile(r"\n\s*Note: The user's next message may contain\b.*\Z", re.S)
REFUSAL_NOT_SAID = ("The user wants to clarify these questions.",)


def _refusal_feedback(blocks: list[dict[str, Any]]) -> str:
    """The words the user typed when refusing a tool call, from its error result ("" when none)."""
    said: list[str] = []
    for block in blocks:
        if block.get("type") != "tool_result" or block.get("is_error") is not True:
            continue
        body = _result_body(block.get("content"))
        if REFUSAL_SAID not in body:
            continue
        words = _REFUSAL_NOTE.sub("", body.split(REFUSAL_SAID, 1)[1]).strip()
        if words and not words.startswith(REFUSAL_NOT_SAID) and words not in said:
            said.append(words)
    return _cut("\n".join(said), REPORT_CHARS, "")


def _text_of(blocks: list[dict[str, Any]]) -> str:
    """What a prompt's text blocks say (images and other blocks left out)."""
    return "\n".join(
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    ).strip()


def _result_body(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _strip_context(text: str) -> tuple[str, bool]:
    """Remove our own injected context; True when nothing else of substance was there."""
    if CONTEXT_MARKER not in text:
        return text, False
    stripped = _CONTEXT_BLOCK.sub("", text).strip()
    residue = _HOOK_PREAMBLE.sub("", _TAG.sub("", stripped))
    if _WORD.search(residue):
        return stripped, False
    return "", True


def _compact_summary(text: str) -> str:
    """A compaction's summary without the wrapper Claude Code puts around it (_SUMMARY_OPENING …), or
    the text as it is when nothing would be left."""
    summary = _SUMMARY_CLOSING.sub("", _SUMMARY_REMINDER.sub("", _SUMMARY_OPENING.sub("", text, count=1)))
    return summary.strip() or text


def _says_something(attachment: dict[str, Any]) -> bool:
    """An attachment read as a message: a prompt typed while Claude worked, another agent's message,
    a goal's news, events."""
    return bool(
        _queued_prompt(attachment)
        or _peer_message(attachment)
        or _goal_status(attachment) is not None
        or _notified_events(_notification(attachment))
    )


def _queued_command(record: dict[str, Any]) -> dict[str, Any] | None:
    """The `queued_command` attachment a record hands over (a prompt typed while Claude worked, a
    background task's notification, another agent's message), else None."""
    attachment = record.get("attachment")
    return attachment if isinstance(attachment, dict) and attachment.get("type") == "queued_command" else None


def _notification(record: dict[str, Any]) -> str:
    """The text of a background task's notification handed over as an attachment ("" for others)."""
    attachment = _queued_command(record)
    if attachment is None or attachment.get("commandMode") != "task-notification":
        return ""
    return _text_of(_blocks(attachment.get("prompt")))


_NOTIFICATION_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
BACKGROUND_COMMAND = "Background command "  # a notification's summary of a Bash call run in the background
_NOTIFICATION_EVENT = re.compile(r"<event>(.*?)</event>", re.S)


def _notified_events(text: str) -> str | None:
    """What a watched command printed, from a `<task-notification>` carrying `<event>`s (Claude Code
    2.1.332's Monitor tool: each line its command prints is an event, given to the model as a
    notification and written nowhere else): "<summary>\n<event>…" as tool output, so the error a
    dev server logged while Claude watched it is found; and how a command run in the background ended
    (its summary, with the exit code). Other notifications (a background agent or workflow finishing,
    whose words are in its own files) stay meta lines."""
    if not text.startswith("<task-notification>"):
        return None
    events = [" ".join(e.split()) for e in _NOTIFICATION_EVENT.findall(text)]
    events = [e for e in events if e]
    head = _notification_summary(text) or ""
    if not events:
        # How a command run in the background ended ('Background command "Build" completed (exit code
        # 0)'): its output went to a file of Claude Code's, which is never read; this line is the record.
        return _cut(head, TOOL_RESULT_CHARS) if head.startswith(BACKGROUND_COMMAND) else None
    return _cut("\n".join([head or "Event", *events]), TOOL_RESULT_CHARS)


def _notification_text(text: str) -> str:
    """A notification that a background agent or workflow finished: its summary ('Agent "Find the
    flaky test's cause" finished'). Its `<result>` is the agent's report, read in the agent's own file
    (found there once, not a second time here: I103), and the rest is task ids, a path of Claude
    Code's and a note to the model."""
    summary = _notification_summary(text)
    return text if summary is None else summary


def _notification_summary(text: str) -> str | None:
    """A `<task-notification>`'s `<summary>`, its whitespace folded; None without one."""
    summary = _NOTIFICATION_SUMMARY.search(text)
    return " ".join(summary.group(1).split()) if summary else None


_PR_URL = re.compile(r"https?://\S{1,300}")
_PR_REPOSITORY = re.compile(r"[\w.-]{1,100}(?:/[\w.-]{1,100}){1,3}")


def _pr_link(record: dict[str, Any]) -> str | None:
    """ "PR #42 (pull request) in acme/shop: https://github.com/acme/shop/pull/42" of a `pr-link`
    record with a number, an address and a repository, else None."""
    if record.get("type") != "pr-link":
        return None
    number, url = record.get("prNumber"), _str(record.get("prUrl"))
    repository = _str(record.get("prRepository"))
    if type(number) is not int or number < 0 or not url or not _PR_URL.fullmatch(url):
        return None
    where = f" in {repository}" if repository and _PR_REPOSITORY.fullmatch(repository) else ""
    return f"{pr_link_head(number)}{where}: {url}"


def pr_link_head(number: int) -> str:
    """ "PR #42 (pull request)": how the text of pull request `number`'s PR link begins."""
    return f"{PR_LINK_PREFIX}{number}{_PR_WORDS}"


def pr_parts(link: str) -> tuple[str, str]:
    """("PR #42", "<url>") of a PR link's text ("PR #42 (pull request) in acme/shop: <url>", _pr_link)."""
    label, _, rest = link.partition(_PR_WORDS)
    return label.strip(), rest.rpartition(": ")[2].strip()


def pr_short(link: str) -> str:
    """The PR link's "PR #42 <url>"."""
    return " ".join(part for part in pr_parts(link) if part)


def _title(record: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, text) of a record that titles the session (TITLE_FIELDS), else None."""
    field_kind = TITLE_FIELDS.get(record.get("type"))  # type: ignore[arg-type]
    if field_kind is None:
        return None
    text = " ".join((_str(record.get(field_kind[0])) or "").split())
    return (field_kind[1], _cut(text, TITLE_CHARS)) if text else None


def _queued_prompt(record: dict[str, Any]) -> str:
    """The text of a prompt the user typed while Claude was busy ("" for anything else): an
    `attachment` of type `queued_command` in the prompt mode from a person, not a background task's
    notification or another agent's message. In a subagent's own file, the message its coordinator
    (the parent session's model) sent it with SendMessage while it worked (Claude Code 2.1.332: origin
    "coordinator", a meta attachment, written nowhere else) is its next task, read as its first
    prompt is."""
    attachment = _queued_command(record)
    if attachment is None or attachment.get("commandMode", "prompt") != "prompt":
        return ""
    origin = attachment.get("origin")
    kind = origin.get("kind") if isinstance(origin, dict) else None
    coordinator = kind == "coordinator" and record.get("isSidechain") is True
    channel = kind == CHANNEL_ORIGIN
    if not (coordinator or channel) and (
        attachment.get("isMeta") is True or (origin is not None and kind != "human")
    ):
        return ""
    text = _text_of(_blocks(attachment.get("prompt")))
    if channel:
        return _channel_text(text)
    return "" if text.startswith(META_PREFIXES) else text


# Claude Code's channels (2.1.332): an MCP server with the `claude/channel` capability (a chat bridge
# such as Telegram or Discord, a webhook) pushes a message into the session; Claude Code queues it as a
# meta prompt whose origin is {"kind": "channel", "server": …}, its words wrapped in
# `<channel source="…" user="…" …>`. Written to the transcript as a user line, or as a `queued_command`
# attachment when it arrives while Claude works, with that origin. The user's words from elsewhere,
# read as a prompt (I166).
CHANNEL_ORIGIN = "channel"
_CHANNEL_WRAPPER = re.compile(r"\A<channel\b[^>]*>(.*)</channel>\s*\Z", re.S)


def _from_channel(record: dict[str, Any]) -> bool:
    """A user line, or a `queued_command` attachment, whose origin is a channel."""
    attachment = _queued_command(record)
    origin = (attachment or record).get("origin")
    return isinstance(origin, dict) and origin.get("kind") == CHANNEL_ORIGIN


def _channel_text(text: str) -> str:
    """A channel message's words without the `<channel …>` wrapper (the text as it is without one)."""
    found = _CHANNEL_WRAPPER.match(text.strip())
    return found.group(1).strip() if found else text.strip()


_AGENT_MESSAGE = re.compile(r"</?agent-message\b[^>]*>")


def _peer_message(record: dict[str, Any]) -> str:
    """The text of another agent's message to this one ("" for anything else): Claude Code 2.1.332
    hands a message sent with SendMessage (a background subagent's to "main", another session's) to
    the receiving agent as a meta `queued_command` attachment whose origin is "peer", with the words
    as the origin's `body` and, wrapped in `<agent-message from=…>`, as its prompt. The sender's own
    file holds only the call's recap (its `summary`), so this line is where the words are."""
    attachment = _queued_command(record)
    if attachment is None:
        return ""
    origin = attachment.get("origin")
    if not isinstance(origin, dict) or origin.get("kind") != "peer":
        return ""
    body = origin.get("body")
    if isinstance(body, str) and body.strip():
        return body.strip()
    return _AGENT_MESSAGE.sub("", _text_of(_blocks(attachment.get("prompt")))).strip()


GOAL_CHARS = 300  # a goal's condition, as a todo entry (TodoWrite's entries are cut so too)
# Claude Code's instructions to the model when a goal is set (a meta line after the goal's own): ~600
# characters ("Briefly acknowledge the goal, then immediately start …") around the condition, which the
# goal's line already holds. Left out.
GOAL_INSTRUCTIONS = "A session-scoped Stop hook is now active with condition:"
GOAL_SCAN_BYTES = TASK_SCAN_BYTES  # how far back a goal set in a later read looks for the goal it replaces


@dataclass
class _GoalStatus:
    """A `goal_status` attachment (Claude Code 2.1.332's session goal): `set` (sentinel, not met: by
    `/goal <condition>`, or a goal the model proposed and the user approved), `met` (its Stop hook's
    check found it met, with the check's reason), `cleared` (sentinel and met: `/goal clear`), or
    `checked` (not yet met; its reason is also the hook's feedback, a meta line)."""

    event: str
    condition: str
    reason: str = ""


def _goal_status(record: dict[str, Any]) -> _GoalStatus | None:
    attachment = record.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "goal_status":
        return None
    condition = " ".join((_str(attachment.get("condition")) or "").split())
    if not condition:
        return None
    met, sentinel = attachment.get("met") is True, attachment.get("sentinel") is True
    event = ("cleared" if met else "set") if sentinel else ("met" if met else "checked")
    return _GoalStatus(event, condition, " ".join((_str(attachment.get("reason")) or "").split()))


def _goal_todo(condition: str) -> str:
    return _cut(f"Goal: {condition}", GOAL_CHARS, "")


def _goal_text(status: _GoalStatus, replaced: str | None) -> tuple[str, str] | None:
    """A session goal's news as (role, text): a goal set is the user's pending todo "Goal:
    <condition>" (and closes the goal it replaces: a session has one goal at a time, and Claude Code
    writes nothing for the old one); met, that todo completed and the check's reason; cleared early
    by the user, that todo closed too, saying so, since no one will do that work. A check that found
    it not yet met adds nothing."""
    if status.event == "checked":
        return None
    todo = _goal_todo(status.condition)
    if status.event == "set":
        if replaced and replaced != status.condition:
            rows = f"- [completed] {_goal_todo(replaced)}\n- [pending] {todo}"
            return "user", f"[todos]\n{rows}\n[/todos]\n{_cut(f'Goal replaced: {replaced}', GOAL_CHARS)}"
        return "user", f"[todos]\n- [pending] {todo}\n[/todos]"
    said = "Goal cleared before it was met." if status.event == "cleared" else "Goal met."
    said = f"Goal met: {status.reason}" if status.event == "met" and status.reason else said
    role = "user" if status.event == "cleared" else "assistant"  # the user cleared it; a check found it met
    return role, f"[todos]\n- [completed] {todo}\n[/todos]\n{_cut(said, GOAL_CHARS)}"


# Claude Code's note before the output of a local command (`!ls`, `/mcp`): the same words every time.
_CAVEAT = re.compile(r"<local-command-caveat>.*?(?:</local-command-caveat>|\Z)", re.S)


def _command_text(text: str) -> str:
    """A slash command as "/name args"; other command echoes as their text without tags."""
    name = re.search(r"<command-name>(.*?)</command-name>", text, re.S)
    if name is None:
        return _ANSI.sub("", _TAG.sub("", text)).strip()
    args = re.search(r"<command-args>(.*?)</command-args>", text, re.S)
    return f"{name.group(1).strip()} {args.group(1).strip() if args else ''}".strip()


def _is_acknowledgement(text: str) -> bool:
    if len(text) > 40:
        return False
    if assents(text):
        return False
    words = _WORD.findall(text.lower())
    return not words or (len(words) <= 4 and all(w in ACK_WORDS for w in words))


def _content(record: dict[str, Any]) -> Any:
    body = record.get("message")
    return body.get("content") if isinstance(body, dict) else None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _group_id(record: dict[str, Any]) -> str | None:
    """The response's `message.id`; an empty one is none (it would join unrelated records)."""
    body = record.get("message")
    return (_str(body.get("id")) or None) if isinstance(body, dict) else None


def _group_key(record: dict[str, Any] | None) -> tuple[str, bool, str | None] | None:
    """Lines of one assistant response share this key; None for anything that is not one."""
    if record is None or record["type"] != "assistant":
        return None
    ident = _group_id(record)
    if ident is None:
        return None
    return ident, record.get("isSidechain") is True, _str(record.get("agentId"))


def _slim(item: _Line) -> _Line:
    """Keep only what counting needs: an open response can be followed by thousands of
    progress records (a long Task call), held until the response is known to be complete."""
    if item.record is None or _title(item.record) is not None or _pr_link(item.record) is not None:
        return item  # a title or PR link is read when the response ends (_flush)
    kept = {k: item.record[k] for k in ("type", "subtype") if k in item.record}
    return _Line(item.number, item.end, kept, item.problems)


_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _timestamp(value: Any) -> str | None:
    """An ISO-8601 time as Claude Code writes it; anything else is no time at all (time filters,
    ordering and the session-start digest compare these strings)."""
    return _clean(value) if isinstance(value, str) and _ISO_TIME.match(value) and len(value) <= 40 else None


def _str(value: Any) -> str | None:
    """A metadata string (cwd, gitBranch, sessionId, timestamp, ids) made safe to store like text."""
    return _clean(value) if isinstance(value, str) else None


def _clean(text: str) -> str:
    """Text safe to store: JSON escapes can leave lone surrogates that UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
