"""Query analysis: temporal qualifiers, intent filters, entity mentions, safe FTS5 terms."""

from __future__ import annotations

import calendar
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

MAX_QUERY_CHARS = 4000
EXPANSION_TERMS = 40  # words of a HyDE passage a lexical search ORs (a 2-4 sentence passage has ~25)
MAX_TERMS = 32
WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what
when where which while who whom why will with would you your yours yourself yourselves did does what's whats
tell remember recall know anything something thing things ever
couldn wouldn shouldn didn doesn isn wasn aren weren hasn haven hadn mustn needn
""".split()
)
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
# (pattern, intent, open ones only, may filter). A query that opens by naming a kind of memory
# ("decisions about the deploy", "open questions") asks for that kind only: a filter. A question
# about what happened ("what did we decide about tracing?", "how did we fix the build?") asks about
# its subject, whatever the extractor took the answer for: those words only boost the kind (as a
# filter, real sessions' "what did we decide about X" questions found none of their evidence lines;
# as a boost, 8 of 9: BENCHMARKS.md §4).
INTENT_PATTERNS = [
    (re.compile(r"\b(open|unanswered|unresolved|pending) questions?\b", re.I), "question", True, True),
    (re.compile(r"\bdecisions?\b", re.I), "decision", False, True),
    (re.compile(r"\bwhat did we decide\b|\bdecided\b", re.I), "decision", False, False),
    (re.compile(r"\bquestions\b", re.I), "question", False, True),
    (re.compile(r"\b(problems?|issues|bugs|errors)\b( with| about| in)?", re.I), "problem", False, True),
    (re.compile(r"\b(todos?|to-dos?|to do list|action items|next steps)\b", re.I), "todo", False, True),
    (re.compile(r"\b(solutions?|fixes|workarounds?)\b", re.I), "solution", False, True),
    (re.compile(r"\bhow did we fix\b", re.I), "solution", False, False),
    # "what broke", "what went wrong with the deploy": a question about what happened, as "how did we fix"
    (re.compile(r"\bwhat (?:broke|went wrong|was wrong|was broken|failed)\b", re.I), "problem", False, False),
    (re.compile(r"\bconclusions?\b|\blearnings?\b|\binsights?\b", re.I), "conclusion", False, True),
]


# Code a question names; not hyphenated words, capitalised names or "e.g.".
IDENTIFIER = re.compile(
    r"`[^`\n]+`"  # anything in backticks
    r"|\b\w*[A-Za-z]_\w+"  # snake_case
    r"|\b[A-Za-z]\w+\.[A-Za-z]\w*|\b[A-Za-z]\w*\.[A-Za-z]\w+"  # dotted names: mix.exs, xterm.js
    r"|\b[a-z]+[A-Z]\w*"  # camelCase
    r"|(?<!\w)--?[a-z][\w-]+"  # --flags
    r"|\b\w+\(\)|\w+/\w+/\w+"  # calls(), a/b/c paths
)


# Work asked for as left to do, with no kind named ("what is left to do", "what is not done yet"); a todo
# named in a state ("open todos", "remaining tasks", "which tasks are still open") is OPEN_STATE's.
OPEN_WORK = re.compile(
    r"\b(?:(?:still )?left to do|still to do|(?:is|are|remains?|'s)(?: still)? left|"
    r"remaining work|not (?:yet )?done)\b",
    re.I,
)


# How the state of a kind of memory is asked for: "open todos", "unresolved problems", "which todos
# are still open", "questions not answered yet". The state's words frame the question, they are not
# its subject (a subject no memory of the kind mentions makes the filter give way: search.search); for
# todos, questions and problems they ask for the open ones only (a closed todo, an answered question, a
# problem a solution answered is not).
_STATE = r"open|unresolved|unsolved|unanswered|pending|outstanding|unfinished|remaining|undone|incomplete"
_NOT_DONE = r"not (?:yet )?(?:done|finished|answered|resolved|solved|fixed|closed)(?: yet)?"
_STATE_AFTER = rf"{_STATE}|left(?: open)?|{_NOT_DONE}"
_TODO_NOUN = r"todos?|to-dos?|tasks?|action items?|next steps?"
_KIND_NOUN = rf"{_TODO_NOUN}|questions?|problems?|issues|bugs|errors"
OPEN_STATE = re.compile(
    rf"\b(?:still )?(?:{_STATE}) (?:{_KIND_NOUN})\b"
    rf"|\b(?:{_KIND_NOUN}) (?:(?:that|which) )?(?:(?:are|is|were|was|remain|remains|stay|stays) )?(?:still )?"
    rf"(?:{_STATE_AFTER})\b",
    re.I,
)
TODO_NOUN = re.compile(rf"\b(?:{_TODO_NOUN})\b", re.I)


# Words that frame a question rather than name its subject: "what kind of art" asks about art, and
# "kind" matched every line saying "your kind words" (LoCoMo tune recall@10 +0.009 / +0.006, every other
# figure identical: BENCHMARKS.md §4).
QUESTION_FRAME = re.compile(
    r"\b(?:what|which) (kinds?|sorts?|types?) of\b|\bin (?:what|which) (ways?)\b"
    r"|\bhow (many|much)(?: (times))?\b|\b(?:be|is|are) (likely) to\b",
    re.I,
)
# The verb of a question about what someone did ("what errors did we hit", "which bugs have you
# seen"): how the question is put, not what it is about.
FRAME_VERB = re.compile(r"\b(?:did|do|does|have|has|had) (?:we|i|you|they) (\w+)", re.I)


# What was settled or left open ranks before what was merely said ("context") in a recap.
RECAP_INTENTS = frozenset({"decision", "conclusion", "question", "problem", "solution", "todo"})

# The words of a question that asks what happened in a time ("what did we do in February", "what
# happened last week", "the sessions from December"), not what it is about.
WINDOW_FRAME = frozenset(
    "do doing done happen happened happening work worked working talk talked discuss discussed say said "
    "session sessions conversation conversations chat chats everything anything stuff things summary "
    "summarize summarise recap overview activity progress going".split()
)


# A question asking for an overview of a subject over time ("summarize the auth work", "a recap of
# the migration", "in what order did we ...", "the history of the flaky test"): the topics about it,
# each a stretch of the conversation with its name, summary and lines, answer it better than single
# lines (search.OVERVIEW_SPANS). "Summary" as a name ("the monthly summary report") and an order not
# of what was said ("the alias runs them in which order?") do not ask so.
OVERVIEW = re.compile(
    r"\b(?:summari[sz](?:e|es|ed|ing)|(?:summary|overview|recap|timeline|history) of|recap\b|"
    r"(?:the order in which|in (?:what|which) order)\s+(?:(?:did|do|have|had)\s+)?(?:i|we|you)\b)",
    re.I,
)


# "Where did we leave off?", "what was I working on?": the session before this one is the subject
# (search.search picks it); the words that ask so are not words to match.
LAST_SESSION = re.compile(
    r"\b(?:(?:pick(?:ing)? up )?where (?:did|do|had) (?:we|i) (?:leave|left) off|where were we|"
    r"(?:pick(?:ing)? up where )?(?:we|i) left off|"
    r"what (?:was|were|had) (?:we|i) (?:been )?(?:working on|doing|in the middle of)|"
    r"(?:last|previous|prior) session|"
    r"what (?:did|have|had) (?:we|i) (?:been )?(?:work(?:ed|ing)? on|do(?:ne|ing)?)"
    r"(?: (?:most )?recently| last)|"
    r"the last thing (?:we|i) (?:asked|said|did|worked on|talked about))\b",
    re.I,
)


# A pull request named by its number ("PR #42", "pull request 42", ".../pull/42"): search.search asks
# the session that opened it (its PR link line, transcript.PR_LINK), when one of the scope did (I168).
PULL_REQUEST = re.compile(r"\b(?:PR|pull request)\s*#?\s*(\d{1,7})\b|/pull/(\d{1,7})\b", re.I)


@dataclass
class Query:
    text: str
    terms: list[str]
    since: datetime | None = None
    until: datetime | None = None
    intents: set[str] = field(default_factory=set)
    boost_intents: set[str] = field(default_factory=set)
    unanswered_only: bool = False
    time_sensitive: bool = False
    session: str | None = None  # --session: only memories of this session (a full id)
    speaker: str | None = None  # the side of the conversation the question asks about: "user"/"assistant"
    # The range comes from a day the question names ("on 8 May"): an event is often told days after
    # it happened, so the range ranks lines (search.OUTSIDE_DAY) instead of filtering them out.
    soft_window: bool = False
    # named people: their side (search); None until a lower-case query's vote runs (search.gather)
    participants: dict[str, str | None] | None = field(default_factory=dict)
    kind_words: list[str] = field(default_factory=list)  # the terms that named a kind ("decisions")
    time_words: list[str] = field(default_factory=list)  # the terms that named its time ("february")
    month_only: bool = False  # its range is a month named without a year (TimeRange.month_only)
    identifier: bool = False  # it names code (IDENTIFIER): its exact words matter more than its meaning
    overview: bool = False  # it asks for an overview of its subject over time (OVERVIEW): topics answer it
    last_session: bool = False  # it asks where the previous session ended (LAST_SESSION)
    pull_request: int | None = None  # the pull request it names (PULL_REQUEST)
    pull_request_terms: list[str] = field(default_factory=list)  # the terms that named it ("pr", "42")
    # The meaning strategies' weight is multiplied by this: set by search.gather when the lines the
    # query's words find and the lines its meaning finds are not the same (search.MEANING_BOOST).
    dense_factor: float = 1.0

    def fts(self) -> str | None:
        """An FTS5 expression in which every user word is a quoted literal: no syntax survives."""
        return any_of(self.terms)

    def expanded_fts(self, passage: str, limit: int = EXPANSION_TERMS) -> str | None:
        """The query's words and, after them, the words of a passage written to answer it (HyDE):
        the vocabulary the answer is likely said in, for BM25 (query expansion, as query2doc)."""
        return any_of(list(dict.fromkeys([*self.terms, *terms_of(clean(passage))]))[:limit])

    def subject(self) -> list[str]:
        """Its terms but those that named a kind of memory ("decisions", "what did we decide") or its
        time ("in february", "last week")."""
        return [t for t in self.terms if t not in self.kind_words and t not in self.time_words]

    def asks_listing(self) -> bool:
        """It asks for a kind of memory and names nothing else ("todos", "latest decisions", "what
        questions are still open"): that kind's memories, newest first."""
        return bool(self.intents) and not self.topic()

    def asks_window(self) -> bool:
        """It names a time and nothing else to look for ("what did we do in February", "what
        happened yesterday", "last week's sessions"): what was settled and said then is the answer."""
        has_range = self.since is not None or self.until is not None
        return has_range and not self.intents and not [t for t in self.topic() if t not in WINDOW_FRAME]

    def asks_recap(self) -> bool:
        """It asks where the last session ended, or what a pull request's session did, and names
        nothing else ("where did we leave off", "what did we do in PR #42" once its session is known)."""
        named = self.last_session or (self.pull_request is not None and self.session is not None)
        return named and not self.terms

    def lists_newest_first(self) -> bool:
        """Its answer is a list, newest first: a recap, or a kind or a time asked for alone. Its order
        is its own, and there is no answer to imagine (HyDE) or to judge (re-ranking)."""
        return self.asks_recap() or self.asks_listing() or self.asks_window()

    def topic(self) -> list[str]:
        """What it is about: its subject without the verb that frames the question ("hit" in
        "what errors did we hit")."""
        framing = {m.group(1).lower() for m in FRAME_VERB.finditer(self.text)}
        return [t for t in self.subject() if t not in framing]


def any_of(words) -> str | None:
    """An FTS5 expression matching any of these words, each a quoted literal; None for none."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or None


def clean(text: str) -> str:
    """Drop control characters and cap the length; queries are data, never syntax."""
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text[:MAX_QUERY_CHARS])
    return " ".join(text.split())


def terms_of(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in WORD.findall(text.lower()):
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


def _day(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


_MONTH = "(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
DAY_PATTERNS = (
    re.compile(r"\b" + _YEAR + r"-(?P<month_number>\d{2})-(?P<day>\d{2})\b"),  # 2023-02-01
    re.compile(r"\b" + _DAY + r" (?:of )?" + _MONTH + r",? " + _YEAR + r"\b"),  # 1 February, 2023
    re.compile(r"\b" + _MONTH + r" " + _DAY + r",? " + _YEAR + r"\b"),  # February 1st, 2023
    re.compile(r"\bon (?:the )?" + _DAY + r" (?:of )?" + _MONTH + r"\b"),  # on the 1st of February
    re.compile(r"\bon " + _MONTH + r" " + _DAY + r"\b"),  # on February 1st
)


def named_day(t: str, now: datetime) -> datetime | None:
    """The calendar day a lower-cased query names, if any; without a year, its latest past date."""
    found = named_day_match(t, now)
    return found[0] if found else None


def named_day_match(t: str, now: datetime) -> tuple[datetime, str] | None:
    """named_day, with the words that named it."""
    for pattern in DAY_PATTERNS:
        m = pattern.search(t)
        if not m:
            continue
        g = m.groupdict()
        month = int(g["month_number"]) if g.get("month_number") else MONTHS[g["month"]]
        try:
            found = datetime(int(g.get("year") or now.year), month, int(g["day"]), tzinfo=timezone.utc)
            if not g.get("year") and found > now:
                found = found.replace(year=now.year - 1)
        except ValueError:
            continue  # "February 30th" names no day
        return found, m.group(0)
    return None


def temporal(text: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """Relative and absolute time qualifiers -> a UTC [since, until) range."""
    return time_range(text, now).range


@dataclass
class TimeRange:
    range: tuple[datetime | None, datetime | None] = (None, None)
    words: str = ""  # the words that named it ("in february", "last week"): not a subject
    month_only: bool = False  # a month named without its year ("in september"): its latest past one
    day: bool = False  # a calendar day named ("on March 3rd"): the day either side too, ranked, not filtered


_MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
MONTH_RANGE = re.compile(
    rf"\b(?:(?:in|during|since|from|of) )?(?:the month of )?({_MONTH_NAMES})\b(?:,? (\d{{4}}))?"
)


def time_range(text: str, now: datetime) -> TimeRange:
    """temporal, with the words that named the range; none for a date no calendar has ("since
    2026-02-30", "March 0000") or a span longer than the calendar ("last 99999999 days"): its words
    are then searched as words, and the search never fails on them."""
    try:
        return _time_range(text, now)
    except (ValueError, OverflowError):
        return TimeRange()


def _time_range(text: str, now: datetime) -> TimeRange:
    t = text.lower()
    today = _day(now)
    if m := re.search(r"\bsince (\d{4}-\d{2}-\d{2})\b", t):
        return TimeRange((datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc), None), m.group(0))
    if m := re.search(r"\bbefore (\d{4}-\d{2}-\d{2})\b", t):
        return TimeRange((None, datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc)), m.group(0))
    if found := named_day_match(t, now):
        # "on 1 February, 2023", "on March 3rd", "on 2023-02-01": that day, a day either side
        # (a conversation's clock is UTC, the asker's calendar may not be).
        day, words = found
        return TimeRange((day - timedelta(days=1), day + timedelta(days=2)), words, day=True)
    if m := re.search(r"\b(?:in the )?(?:last|past) (\d+) (day|week|month)s?\b", t):
        days = int(m.group(1)) * {"day": 1, "week": 7, "month": 30}[m.group(2)]
        return TimeRange((now - timedelta(days=days), None), m.group(0))
    if m := re.search(r"\byesterday\b", t):
        return TimeRange((today - timedelta(days=1), today), m.group(0))
    if m := re.search(r"\btoday\b", t):
        return TimeRange((today, None), m.group(0))
    if m := re.search(r"\b(last|past) week\b", t):
        return TimeRange((now - timedelta(days=7), None), m.group(0))
    if m := re.search(r"\bthis week\b", t):
        return TimeRange((today - timedelta(days=today.weekday()), None), m.group(0))
    if m := re.search(r"\b(last|past) month\b", t):
        return TimeRange((now - timedelta(days=31), None), m.group(0))
    for m in MONTH_RANGE.finditer(t):
        # "in march", "during March 2026", "since february", "february 2026": a bare month name
        # ("may", "march") is a month only with a preposition before it or a year after it.
        said = m.group(0)
        if said == m.group(1) or (said.startswith("of ") and not m.group(2)):
            continue
        month = MONTHS[m.group(1)]
        year = int(m.group(2)) if m.group(2) else (now.year if month <= now.month else now.year - 1)
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        if said.startswith("since"):
            return TimeRange((start, None), said)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
        return TimeRange((start, end), said, month_only=not m.group(2))
    return TimeRange()


# "did you suggest", "your advice": the assistant's side; "did I ask", "my app": the user's.
ASKS_ASSISTANT = re.compile(
    r"\b(?:(?:did|have|has|had|would|do|does|were) you|you (?:said|suggested|recommended|"
    r"told|mentioned|proposed|explained|advised|gave|wrote)|your)\b",
    re.I,
)
ASKS_USER = re.compile(r"\bI\b|\b(?:[Mm]y|[Mm]e|[Mm]ine)\b")


def speaker(text: str) -> str | None:
    """Which side of a user-assistant conversation a question asks about, if its pronouns say."""
    if ASKS_ASSISTANT.search(text):
        return "assistant"
    if ASKS_USER.search(text):
        return "user"
    return None


def analyze(text: str, now: datetime | None = None) -> Query:
    now = now or datetime.now(timezone.utc)
    text = clean(text)
    when = time_range(text, now)
    since, until = when.range
    framing = {g.lower() for m in QUESTION_FRAME.finditer(text) for g in m.groups() if g}
    words = terms_of(text)
    q = Query(text=text, terms=[t for t in words if t not in framing] or words, since=since, until=until)
    q.time_words, q.month_only = terms_of(when.words), when.month_only
    q.speaker = speaker(text)
    q.identifier = IDENTIFIER.search(text) is not None
    if overview := OVERVIEW.search(text):
        q.overview = True
        # "summarize", "the order in which": how the overview is asked for, not what it is about
        frame = set(terms_of(overview.group(0)))
        q.terms = [t for t in q.terms if t not in frame] or q.terms
    q.soft_window = when.day
    q.time_sensitive = (
        since is not None
        or until is not None
        or bool(re.search(r"\b(latest|recent|last|current)\b", text, re.I))
    )
    if last := LAST_SESSION.search(text):
        q.last_session = q.time_sensitive = True  # with a subject: the latest said about it first
        # ... and "summarize the last session": its verb asks for the recap, it is not a subject
        q.terms = [t for t in q.terms if t not in terms_of(last.group(0)) and t not in WINDOW_FRAME]
        # what was settled or left open, before what was merely said ("context")
        q.boost_intents |= RECAP_INTENTS
    if pr := PULL_REQUEST.search(text):
        q.pull_request = int(pr.group(1) or pr.group(2))
        q.pull_request_terms = terms_of(pr.group(0))
    state = OPEN_STATE.search(text)
    state_words = terms_of(state.group(0)) if state else []
    open_work = OPEN_WORK.search(text) or (state if state and TODO_NOUN.search(state.group(0)) else None)
    if open_work:
        # "what is left to do", "which tasks are still open": open todos only, wherever the phrase
        # stands; closed ones are done.
        q.kind_words = list(dict.fromkeys(terms_of(open_work.group(0)) + state_words))
        q.intents.add("todo")
        q.unanswered_only = True
        return q
    for pattern, intent, unanswered, may_filter in INTENT_PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        # A kind of memory named at the query's start ("open questions", "decisions about X") is a
        # filter; one inside a question ("what problems did she face") only boosts. A state before
        # it ("unresolved problems") is part of how the kind is named.
        lead = text[: m.start()].lower().split()
        # A question's frame ("what did we decide", "how did we fix") is not its subject: "decide"
        # would match every line that says "decided". A kind named as a noun ("bugs in the parser")
        # stays a word to match (BEAM confirm recall@10 -0.005 without it).
        q.kind_words = list(dict.fromkeys(terms_of(m.group(0)) + state_words))
        if not may_filter and (rest := [t for t in q.terms if t not in q.kind_words]):
            q.terms = rest
        if not may_filter and not q.subject():
            # "what did we decide?", "what broke last week": nothing but the frame (and a time) is
            # named, so the kind's memories are the answer, as for "decisions".
            q.intents.add(intent)
            break
        if may_filter and all(w in FILTER_LEAD_WORDS or w in state_words for w in lead):
            # "latest decisions", "list all open questions": how the list is asked for, not its subject
            q.kind_words += [w for w in terms_of(" ".join(lead)) if w not in q.kind_words]
            q.intents.add(intent)
            q.unanswered_only = unanswered or (state is not None and intent in ("question", "problem"))
        else:
            q.boost_intents.add(intent)
        break
    return q


FILTER_LEAD_WORDS = frozenset(
    (
        "show list find all any the our my me what are were which give "
        "recent recently latest newest last every"
    ).split()
)
