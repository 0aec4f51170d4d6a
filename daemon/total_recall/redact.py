"""Secret redaction: API keys, tokens, passwords and private keys become ``[REDACTED:<kind>]``.

Runs over every message before it is stored or sent to an extraction endpoint. Two passes:

1. Token shapes that are secrets wherever they appear (provider key prefixes, JWTs, private key
   blocks, bearer headers, passwords inside URLs). Each pattern starts with a literal so the regex
   engine skips ordinary text quickly.
2. Assignments whose key names a secret (``DB_PASSWORD=...``, ``"api_key": "..."``,
   ``--token ...``). The scan finds the key word first (rare in prose) and only then looks
   around it, so 1 MB of text costs a few milliseconds.

Prose survives: "the password policy is weak" has no assignment, and a lowercase one-word key
followed by a colon and a plain word ("the token: it expires") is read as prose, not config.
"""

from __future__ import annotations

import re
from typing import Iterator

MARK = "[REDACTED:{}]"

# (kind, pattern): the whole match is replaced unless the pattern has a "secret" group, in
# which case only that group is.
_TOKEN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----"
            r"(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
    ),
    # Real keys contain digits; hyphenated prose ("task-specific-...") does not.
    ("anthropic_key", re.compile(r"sk-ant-(?=[\w\-]*\d)[A-Za-z0-9_\-]{16,}")),
    ("openai_key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?(?=[\w\-]*\d)[A-Za-z0-9_\-]{20,}")),
    ("github_token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("aws_access_key", re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("slack_token", re.compile(r"xox[abprs]-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", re.compile(r"AIza[0-9A-Za-z_\-]{35}")),
    ("jwt", re.compile(r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}")),
    # These two start one letter in ("earer", "uthorization"): a pattern that begins with a
    # literal is scanned many times faster than one that begins with a character class;
    # _substitute checks the dropped first letter (_LEAD).
    ("bearer_token", re.compile(r"earer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)")),
    (
        "authorization",
        re.compile(
            r"uthorization[\"']?\s*[:=]\s*[\"']?(?i:basic|token)\s+"
            r"(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)"
        ),
    ),
    # scheme://user:pass@host -> keep the user, hide the password.
    ("password", re.compile(r"://[^\s:/@\[\]]+:(?P<secret>[^\s@/\[\]]+)@")),
]

_LEAD = {"bearer_token": "Bb", "authorization": "Aa"}  # header names as written in practice
# Kinds whose match must start a word: "mask-..." or "xghp_..." are not keys.
_WORD_START = {"anthropic_key", "openai_key", "github_token", "aws_access_key", "slack_token",
               "google_api_key", "jwt"}

# A word that makes a key name sensitive. TOKEN is not sensitive in "max_tokens", "tokenizer".
# Matched against the lowercased text: a case-insensitive regex is several times slower.
_KEY_WORD_SOURCE = (
    r"passw(?:or)?d|secret|token(?!s|iz|_?count|_?limit|_?usage)|api[_\-]?key"
    r"|access[_\-]?key|private[_\-]?key|credentials"
)
_KEY_WORD = re.compile(_KEY_WORD_SOURCE)
_KEY_WORD_ANY_CASE = re.compile(_KEY_WORD_SOURCE, re.IGNORECASE)
_KEY_CHAR = re.compile(r"[\w.\-]")
# After the key: optional closing quote, a separator, then the value.
_ASSIGN_TAIL = re.compile(
    r"""(?P<close>["']?)(?P<sep>[ \t]*(?::(?!:)|=(?!=))[ \t]*)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;)}\]]+)"""
)
_FLAG_TAIL = re.compile(
    r"""(?P<sep>=|[ \t]+)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;)}\]-][^\s"',;)}\]]*)"""
)
# Unquoted values that are references, not secrets: calls, env lookups, null-ish literals.
_NOT_A_SECRET = re.compile(
    r"[A-Za-z_][\w.]*[(\[].*|\$\{?\w+\}?|<[^>]*>|\*+|\.\.\.|…"
    r"|None|null|nil|True|False|true|false",
)
_KIND_OF_WORD = {
    "passwd": "password",
    "password": "password",
    "secret": "secret",
    "token": "token",
    "credentials": "credentials",
}


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
    return redact_count(text)[0]


def redact_count(text: str) -> tuple[str, int]:
    """``(redacted text, number of secrets replaced)``."""
    if not text:
        return text, 0
    total = 0
    for kind, pattern in _TOKEN_PATTERNS:
        text, n = _substitute(text, kind, pattern)
        total += n
    text, n = _redact_assignments(text)
    return text, total + n


def _substitute(text: str, kind: str, pattern: re.Pattern[str]) -> tuple[str, int]:
    mark = MARK.format(kind)
    lead = _LEAD.get(kind)
    out: list[str] = []
    done = 0
    word_start = kind in _WORD_START
    for match in pattern.finditer(text):
        before = text[match.start() - 1] if match.start() else ""
        if lead and (not before or before not in lead):
            continue
        if word_start and before and (before.isalnum() or before == "_"):
            continue
        start, end = match.span("secret") if "secret" in pattern.groupindex else match.span()
        out.append(text[done:start])
        out.append(mark)
        done = end
    if not out:
        return text, 0
    out.append(text[done:])
    return "".join(out), len(out) // 2


def _redact_assignments(text: str) -> tuple[str, int]:
    out: list[str] = []
    done = 0  # text[:done] is already in out
    count = 0
    for word in _key_words(text):
        if word.start() < done:
            continue
        key_start, key_end = _expand_key(text, word.start(), word.end())
        value_span = _value_span(text, key_start, key_end)
        if value_span is None:
            continue
        start, end = value_span
        out.append(text[done:start])
        out.append(MARK.format(_kind(text[key_start:key_end], word.group(0))))
        done = end
        count += 1
    if not count:
        return text, 0
    out.append(text[done:])
    return "".join(out), count


def _key_words(text: str) -> Iterator[re.Match[str]]:
    lowered = text.lower()
    if len(lowered) == len(text):
        return _KEY_WORD.finditer(lowered)
    # Trigger: lowercasing changed the length (rare non-ASCII letters such as "İ").
    # Why: match offsets in the lowered copy would no longer line up with the text.
    # Outcome: the slower case-insensitive scan over the text itself.
    return _KEY_WORD_ANY_CASE.finditer(text)


def _expand_key(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and _KEY_CHAR.match(text, start - 1):
        start -= 1
    while end < len(text) and _KEY_CHAR.match(text, end):
        end += 1
    return start, end


def _value_span(text: str, key_start: int, key_end: int) -> tuple[int, int] | None:
    """Where the secret value of the key at text[key_start:key_end] lies, or None if no value."""
    key = text[key_start:key_end]
    if key.startswith("--"):
        match = _FLAG_TAIL.match(text, key_end)
    else:
        match = _ASSIGN_TAIL.match(text, key_end)
        close = match.group("close") if match else ""
        if close and text[key_start - 1 : key_start] != close:
            return None  # a quote after the key that did not open before it: not a quoted key
    if not match:
        return None
    value = match.group("value")
    start, end = match.span("value")
    if value[0] in "\"'":
        start, end, value = start + 1, end - 1, value[1:-1]
        if not value.strip():
            return None
    elif _NOT_A_SECRET.fullmatch(value) or _looks_like_prose(key, match, text, key_start):
        return None
    if value.startswith("[REDACTED:"):
        return None
    return start, end


def _looks_like_prose(key: str, match: re.Match[str], text: str, key_start: int) -> bool:
    """Trigger: "word: value" with a lowercase one-word key and a purely alphabetic value.
    Why: that is how sentences read ("the token: it expires"); config keys have _ or capitals,
    and real passwords rarely are a single dictionary-like word.
    Outcome: leave the text alone.
    """
    quoted_key = key_start > 0 and text[key_start - 1] in "\"'"
    if ":" not in match.group("sep") or quoted_key:
        return False
    config_like = any(c in key for c in "_-.") or key.isupper()
    return not config_like and match.group("value").isalpha()


def _kind(key: str, word: str) -> str:
    lowered = key.lower()
    if "aws_secret_access_key" in lowered:
        return "aws_secret"
    word = word.lower().replace("-", "_")
    if word in _KIND_OF_WORD:
        return _KIND_OF_WORD[word]
    if word.startswith("api"):
        return "api_key"
    return word if "_" in word else word.replace("key", "_key")
