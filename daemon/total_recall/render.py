"""Markdown for Claude and people: search results grouped by topic, and the topic tree."""

from __future__ import annotations

from collections import OrderedDict

from total_recall.transcript import pr_short


def shorten(text: str | None, n: int) -> str:
    """`text` on one line, cut to `n` characters with an ellipsis when longer."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _date(stamp: str | None) -> str:
    return (stamp or "")[:10] or "undated"


def _source(r: dict) -> str:
    """`file:line` in backticks, as it is copied and opened, then the machine it was said on."""
    if r["kind"] in ("idea", "message"):
        on = f" on {r['machine']}" if r.get("machine") else ""  # said on another machine, or this one
        return f"`{r['source_file']}:{r['source_line']}`{on}"
    return f"`{r['source_file']}:{r['start_line']}-{r['end_line']}`"


def other_places(r: dict) -> list[dict]:
    """The places of a result's `sources` other than its own line (merged mentions, lines saying the
    same text), for the text, MCP and web renderings."""
    here = (r.get("source_file"), r.get("source_line"))
    return [s for s in r.get("sources") or [] if (s.get("source_file"), s.get("source_line")) != here]


def _also(r: dict) -> str:
    """' · also at `file:line`' for the other places a result's text was said, or ''."""
    others = other_places(r)
    if not others:
        return ""
    shown = ", ".join(f"`{s['source_file']}:{s['source_line']}`" for s in others[:2])
    return f" · also at {shown}" + (f" and {len(others) - 2} more" if len(others) > 2 else "")


# Who a line found by its words is from, by what the transcript reader took it for (transcript.py's
# kinds): Claude Code stores a tool's output, a skill's text or a slash command in a "user" record, and
# a compaction summary in an "assistant" one; calling those "user said" puts words in the user's mouth.
SAID = {
    "prompt": "user said",
    "response": "assistant said",
    "tool_result": "tool output",
    "compact_summary": "summary of an earlier part",
    "compaction_prompt": "added to a compaction request",
    "subagent_prompt": "task given to a subagent",
    "subagent_response": "subagent said",
    "command": "user ran",
    "meta": "added by Claude Code",
    "interrupt": "user interrupted",
    "goal": "session goal",
    "pr_link": "session opened",
    "summariser_prompt": "given to a summariser",
    "summariser_response": "summariser said",
}


def said(r: dict) -> str:
    """'user said', 'tool output', ...: how a message result is introduced."""
    return SAID.get(r.get("message_kind") or "", f"{r.get('role') or 'someone'} said")


def results_markdown(results: list[dict], in_time: bool = False) -> str:
    """The results grouped by topic within a session, best group first, or (`in_time`: an overview
    asked for) the groups in the order they happened, each group's lines too."""
    if not results:
        return "No memories found."
    # Grouped by topic within a session: a group's heading names the session, date and project of
    # every line under it (lines of no topic, such as tool output, are grouped per session too).
    groups: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in results:
        topic = r["span"]["name"] if r.get("span") else (r.get("name") if r["kind"] == "span" else "no topic")
        groups.setdefault((topic, r.get("session"), r.get("project")), []).append(r)
    ordered = list(groups.items())
    if in_time:
        ordered = [(key, timeline(items)) for key, items in ordered]
        ordered.sort(key=lambda group: _when(group[1][0]))
    out = []
    for (topic, session, _), items in ordered:
        first = items[0]
        # A note stored with no session belongs to none: "no session", not "session None".
        said_in = f"session {str(session)[:8]}{_titled(first)}" if session else "no session"
        where = f"{said_in} · {_date(first['timestamp'])} · project {first['project'] or '?'}"
        out.append(f"## {topic}  \n_{where}_")
        for r in items:
            out.append(_line(r))
    return "\n".join(out)


def timeline(results: list[dict]) -> list[dict]:
    """The results in the order they were said (an overview asked for: query.OVERVIEW)."""
    return sorted(results, key=_when)


def _when(r: dict) -> tuple[bool, str, int]:
    """A result's place in time: its timestamp (none last), then its line."""
    stamp = r.get("timestamp")
    return (not stamp, str(stamp or ""), int(r.get("source_line") or r.get("start_line") or 0))


def _titled(r: dict) -> str:
    """ " (<the session's title>)" and " · PR #42 <url>" for each pull request it opened; nothing
    for a session without them."""
    title = f" ({r['session_title']})" if r.get("session_title") else ""
    return title + _prs(r.get("session_prs"))


def _prs(links: list[str] | None) -> str:
    """ " · PR #42 <url>" for each pull request a session opened."""
    return "".join(f" · {pr_short(link)}" for link in links or [])


def _line(r: dict) -> str:
    if r["kind"] == "span":
        return f"- **topic** {r['name']}: {r['summary']}  \n  {_source(r)}"
    if r["kind"] == "message":
        return f"- **{said(r)}** {r['content']}  \n  {_source(r)} · {_date(r['timestamp'])}{_also(r)}"
    flags = []
    if r["superseded_by"]:
        flags.append(f"superseded by #{r['superseded_by'][0]}")
    if r["intent"] == "question":
        flags.append("answered" if r["answered"] else "open")
    if r["intent"] == "problem":
        flags.append("fix given" if r["answered"] else "open")
    if r["intent"] == "todo":
        flags.append("done" if r.get("closed") else "open")
    extra = f" ({', '.join(flags)})" if flags else ""
    text = (
        f"- **{r['intent']}** ({r['confidence']:.2f}) {r['content']}{extra}  \n"
        f"  {_source(r)} · {_date(r['timestamp'])} · #{r['id']}{_also(r)}"
    )
    return ("  " + text.replace("\n", "\n  ")) if r["superseded_by"] else text


def topics_markdown(sessions: list[dict]) -> str:
    if not sessions:
        return "No topics indexed yet."
    out = []

    def walk(node: dict, depth: int) -> None:
        pad = "  " * depth
        summary = f": {node['summary']}" if node["summary"] else ""
        out.append(
            f"{pad}- {node['name']} (lines {node['start_line']}-{node['end_line']}, "
            f"{node['ideas']} ideas){summary}"
        )
        for child in node["children"]:
            walk(child, depth + 1)

    for s in sessions:
        title = f" — {s['title']}" if s.get("title") else ""
        out.append(f"## session {s['session']}{title}{_prs(s.get('prs'))}")
        for node in s["spans"]:
            walk(node, 0)
    return "\n".join(out)


def proposals_markdown(items: list[dict]) -> str:
    if not items:
        return "No proposals waiting for review."
    out = []
    for p in items:
        out.append(
            f"- proposal {p['id']}: #{p['new_idea_id']} {p['kind']} pinned #{p['target_id']}\n"
            f"  pinned: {p['target']}\n  new:    {p['new']}\n"
            f"  apply: total-recall review --apply {p['id']} · reject: total-recall review --reject {p['id']}"
        )
    return "\n".join(out)


def recent_markdown(days: list[dict]) -> str:
    if not days:
        return "Nothing recorded in that period."
    out = []
    for d in days:
        out.append(f"## {d['day']} · {d['name'] or d['project']}")
        if d["topics"]:
            out.append("topics: " + "; ".join(d["topics"][:8]))
        for idea in d["ideas"][:12]:
            out.append(f"- {idea['intent']}: {idea['content']} (#{idea['id']})")
    return "\n".join(out)
