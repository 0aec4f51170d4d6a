"""SessionStart hook: print the project's memory digest so Claude starts with it in context.

Plain stdout of a SessionStart hook is added to Claude's context. The daemon keeps one digest per
project in $TOTAL_RECALL_HOME/digests/<key>.md; this shim only reads the nearest one, trims it to
the budget and prints it between <total-recall-context> tags. It records nothing and always
exits 0. Standard library only; it must not import total_recall.

Settings (environment wins over config.toml, as in the daemon):
  TOTAL_RECALL_CONTEXT_ENABLED       0/false/no/off turns injection off
  TOTAL_RECALL_CONTEXT_BUDGET_CHARS  most characters of digest to print (default 4000)
"""

from __future__ import annotations

import json
import os
import stat
import sys

DEFAULT_HOME = "~/.claude-plugin-total-recall"
DEFAULT_BUDGET = 4000
MAX_STDIN = 1 << 20
MAX_DIGEST_BYTES = 1 << 20
FALSE_WORDS = {"0", "false", "no", "off", ""}
OPEN_TAG, CLOSE_TAG = "<total-recall-context>", "</total-recall-context>"


def digest_key(project_dir: str) -> str:
    """File name stem for a project: Claude Code's folder rule (every character outside
    [A-Za-z0-9] becomes '-') plus a short hash of the NFC-normalised path, so client-a and
    client_a never share a digest. Same as total_recall.projects.digest_key (a test pins it).
    """
    import hashlib
    import unicodedata

    norm = unicodedata.normalize("NFC", project_dir)
    norm = os.path.normpath(norm) if norm else norm
    folder = "".join(c if c.isascii() and c.isalnum() else "-" for c in norm)[:120]
    return folder + "-" + hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def read_input() -> dict:
    chunks, size = [], 0
    while size <= MAX_STDIN:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    else:
        # Trigger: stdin over 1 MB. Why: SessionStart input is tiny; this is not hook JSON.
        # Outcome: treated as no input, so the digest for the current directory is used.
        return {}
    raw = b"".join(chunks)
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def file_settings(home: str) -> dict:
    """The [context] table of config.toml, when this Python can read TOML (3.11+)."""
    path = os.path.join(home, "config.toml")
    if not os.path.isfile(path):
        return {}
    try:
        import tomllib
    except ImportError:
        # Trigger: Python 3.10 runs the hook. Why: tomllib is 3.11+, and this shim stays
        # stdlib-only. Outcome: environment settings and defaults only.
        return {}
    try:
        with open(path, "rb") as fh:
            section = tomllib.load(fh).get("context", {})
    except (OSError, ValueError):
        return {}
    return section if isinstance(section, dict) else {}


def context_settings(home: str) -> tuple[bool, int]:
    section = file_settings(home)
    enabled = os.environ.get("TOTAL_RECALL_CONTEXT_ENABLED", section.get("enabled", True))
    if isinstance(enabled, str):
        enabled = enabled.strip().lower() not in FALSE_WORDS
    budget = os.environ.get("TOTAL_RECALL_CONTEXT_BUDGET_CHARS", section.get("budget_chars", DEFAULT_BUDGET))
    try:
        budget = int(budget)
    except (TypeError, ValueError):
        budget = DEFAULT_BUDGET
    return bool(enabled), max(budget, 0)


def project_dir(data: dict) -> str:
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        # Trigger: old Claude Code versions send no cwd at SessionStart. Why: hooks run in the
        # project, so the environment still knows it. Outcome: project dir, else process cwd.
        cwd = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    return os.path.normpath(os.path.abspath(cwd))


def read_regular(path: str) -> str | None:
    """A regular file's text (never opens FIFOs or devices); None when absent."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            return fh.read(MAX_DIGEST_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def find_digest(digests: str, directory: str) -> str | None:
    """The digest of `directory` or of its nearest parent that has one."""
    while True:
        text = read_regular(os.path.join(digests, digest_key(directory) + ".md"))
        if text is not None and text.strip():
            return text
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def trim(text: str, budget: int) -> str:
    """At most `budget` characters, cut at the end of a line when the text is longer."""
    text = text.strip("\n")
    if len(text) <= budget:
        return text
    head = text[:budget]
    cut = head.rfind("\n")
    # A first line longer than the whole budget is cut mid-line rather than dropped.
    return (head[:cut] if cut > 0 else head).rstrip()


def main() -> None:
    data = read_input()
    home = os.path.expanduser(os.environ.get("TOTAL_RECALL_HOME") or DEFAULT_HOME)
    enabled, budget = context_settings(home)
    if not enabled or budget == 0:
        return
    text = find_digest(os.path.join(home, "digests"), project_dir(data))
    body = trim(text, budget) if text else ""
    if body.strip():
        out = "%s\n%s\n%s\n" % (OPEN_TAG, body, CLOSE_TAG)
        sys.stdout.buffer.write(out.encode("utf-8", "replace"))
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    # The one boundary: a broken digest or odd input must never stop a session from starting.
    try:
        main()
    except BaseException:
        pass
    sys.exit(0)
