"""Query analysis in-process: which calendar range a question names (pure functions, a fixed clock)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from total_recall import query

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text, named",
    [
        ("What did Gina find for her store on 1 February, 2023?", day(2023, 2, 1)),
        ("what painting did she show on October 13, 2023", day(2023, 10, 13)),
        ("what did we decide on 2026-03-02 about the cache", day(2026, 3, 2)),
        ("what did we decide on March 3rd", day(2026, 3, 3)),
        ("what broke on the 5th of December", day(2025, 12, 5)),  # no year: the latest past one
        ("what broke on Dec. 2nd", day(2025, 12, 2)),
    ],
)
def test_a_named_day_is_that_day_with_a_day_either_side(text, named):
    assert query.temporal(text, NOW) == (named - timedelta(days=1), named + timedelta(days=2))


@pytest.mark.parametrize(
    "text",
    [
        "fix the February 30th, 2024 rollover",  # names no day
        "the may 2023 release notes",  # a month, not a day, and no "in"
        "we may 5 times retry the upload",  # "may" the verb
        "what did we decide about the cache",
    ],
)
def test_text_that_names_no_day_gives_no_day_range(text):
    assert query.named_day(text.lower(), NOW) is None


def test_explicit_since_and_months_keep_their_meaning():
    assert query.temporal("deploy since 2026-01-01", NOW) == (day(2026, 1, 1), None)
    assert query.temporal("what did we decide in march", NOW) == (day(2026, 3, 1), day(2026, 4, 1))


@pytest.mark.parametrize(
    "text, side",
    [
        ("Have I obtained an API key for this project?", "user"),
        ("What did I ask about the terminal scrolling?", "user"),
        ("My form validation: which library did we settle on?", "user"),
        ("How did you recommend throttling the retries?", "assistant"),
        ("What was your advice on the cache?", "assistant"),
        (
            "What did you tell me about my deploy script?",
            "assistant",
        ),  # "you" asks about the assistant's words
        ("What did Gina find for her clothing store?", None),
        ("redis connection pool decision", None),
    ],
)
def test_a_question_names_the_side_of_the_conversation_by_its_pronouns(text, side):
    assert query.analyze(text, NOW).speaker == side


@pytest.mark.parametrize(
    "text, names_code",
    [
        ("What does `mix deps.audit` compare the dependencies against?", True),
        ("Can mix_audit run without being in the deps?", True),
        ("Which xterm.js release fixed scrolling?", True),
        ("What does the --since flag skip?", True),
        ("Why did preventDefault throw?", True),
        ("Where is src/total_recall/search kept?", True),
        ("How does Melanie prioritize self-care?", False),  # a hyphenated word
        ("Which GitHub marketplace did I use?", False),  # a capitalised name
        ("Any tools, e.g. linters, we dropped?", False),
        ("How many project cards use Bootstrap 5.3.0?", False),
    ],
)
def test_a_question_that_names_code_is_told_apart(text, names_code):
    assert query.analyze(text, NOW).identifier is names_code


@pytest.mark.parametrize(
    "text, overview",
    [
        ("Summarize how the login work went", True),
        ("Can you summarise what we learned about caching?", True),
        ("Give me a recap of the migration", True),
        ("an overview of the deploy work", True),
        ("What's the history of the flaky upload test?", True),
        ("In what order did we run the migrations?", True),
        ("List the order in which I brought up the parser bugs", True),
        ("Where is the monthly summary report written?", False),  # a name, not a request
        ("What does the quality alias run, and in which order?", False),  # not an order of what was said
        ("How did we fix the flaky upload test?", False),
    ],
)
def test_a_question_asking_for_an_overview_over_time_is_told_apart(text, overview):
    assert query.analyze(text, NOW).overview is overview


@pytest.mark.parametrize(
    "text, terms",
    [
        ("Summarize how the login work went", ["login", "work", "went"]),
        ("In what order did we run the migrations?", ["run", "migrations"]),
        ("What's the history of the flaky upload test?", ["flaky", "upload", "test"]),
        ("Summarize the summary page work", ["summary", "page", "work"]),  # only the frame leaves
    ],
)
def test_how_an_overview_is_asked_for_is_not_its_subject(text, terms):
    """ "Summarize" matched every line that says "summarize" and, said by none, made the search
    note that nothing in scope says it; the words that ask for the overview are its frame."""
    assert query.analyze(text, NOW).terms == terms


@pytest.mark.parametrize(
    "text, filters, boosts, terms",
    [
        # a question about what happened: the kind only boosts, its frame is no subject word
        ("what did we decide about tracing in tests?", set(), {"decision"}, ["tracing", "tests"]),
        ("how did we fix the flaky upload test", set(), {"solution"}, ["flaky", "upload", "test"]),
        # a kind of memory named at the start: only that kind
        ("decisions about the deploy", {"decision"}, set(), ["decisions", "deploy"]),
        ("open questions", {"question"}, set(), ["open", "questions"]),
        # a kind named inside a question boosts, and stays a word to match
        ("have I fixed any bugs in the parser", set(), {"problem"}, ["fixed", "bugs", "parser"]),
    ],
)
def test_a_kind_named_first_filters_and_a_question_about_what_happened_only_boosts(
    text, filters, boosts, terms
):
    q = query.analyze(text, NOW)
    assert (q.intents, q.boost_intents, q.terms) == (filters, boosts, terms)


@pytest.mark.parametrize(
    "text, terms",
    [
        ("where did we leave off", []),
        ("Where were we?", []),
        ("what was I working on", []),
        ("what were we in the middle of", []),
        ("pick up where we left off on the OTEL tracing", ["otel", "tracing"]),
        ("what did we do in the previous session about auth", ["auth"]),
        ("summarize the last session", []),
        ("what was the last thing I asked", []),
        ("what did we work on most recently", []),
        ("what did I do recently with the tracing", ["tracing"]),
    ],
)
def test_asking_where_the_last_session_ended_is_not_a_subject(text, terms):
    """Asking "where did we leave off" asks for the previous session (search.search picks it): its
    words are not words to match, what is settled or left open ranks before what was merely said,
    and a subject it names ranks its latest mentions first."""
    q = query.analyze(text, NOW)
    assert q.last_session and q.time_sensitive
    assert q.terms == terms
    assert {"decision", "todo", "problem"} <= q.boost_intents and not q.intents


@pytest.mark.parametrize(
    "text, number, words",
    [
        ("what did we change in PR #42?", 42, ["pr", "42"]),
        ("how does the retry work in pr 7", 7, ["pr", "7"]),
        ("the pull request 1234 review comments", 1234, ["pull", "request", "1234"]),
        ("see https://github.com/acme/shop/pull/42", 42, ["pull", "42"]),
        ("what did we ship in APR 12", None, []),
        ("the PR team wanted 42 slides", None, []),
    ],
)
def test_a_pull_request_is_named_by_its_number(text, number, words):
    """A pull request named by its number (search.search asks the session that opened it, I168); the
    words that named it are kept apart, to leave the query when that session is found."""
    q = query.analyze(text, NOW)
    assert (q.pull_request, q.pull_request_terms) == (number, words)
    assert set(words) <= set(q.terms)


@pytest.mark.parametrize("text", ["what did we decide last time about caching", "the session cookie expiry"])
def test_last_time_or_a_session_word_alone_does_not_ask_for_the_last_session(text):
    assert not query.analyze(text, NOW).last_session


def test_what_is_still_left_to_do_is_open_todos_with_no_subject():
    q = query.analyze("what's still left to do", NOW)
    assert q.intents == {"todo"} and q.unanswered_only and q.subject() == []


@pytest.mark.parametrize(
    "text, kind, open_only, subject",
    [
        ("what todos are still open", "todo", True, []),
        ("which todos are not done yet", "todo", True, []),
        ("which tasks are still open", "todo", True, []),
        ("unresolved problems", "problem", True, []),
        ("pending issues", "problem", True, []),
        ("questions not answered yet", "question", True, []),
        ("outstanding questions about the deploy", "question", True, ["deploy"]),
        ("any bugs still unresolved in the parser", "problem", True, ["parser"]),
    ],
)
def test_the_state_a_kind_is_asked_in_frames_the_question_and_is_not_its_subject(
    text, kind, open_only, subject
):
    """ "What todos are still open" asks for open todos: "still open" is how the kind is named, not a
    subject that no todo mentions (search.search would then drop the filter and show what was said
    about "open"). A state before the kind ("unresolved problems") keeps the kind a filter, and asks
    for the open ones: problems no solution answered."""
    q = query.analyze(text, NOW)
    assert (q.intents, q.unanswered_only, q.subject()) == ({kind}, open_only, subject)


@pytest.mark.parametrize(
    "text, subject",
    [
        ("latest decisions", []),
        ("list all open questions", []),
        ("recent problems with the hooks", ["hooks"]),
        ("decisions about the deploy", ["deploy"]),
    ],
)
def test_how_a_list_is_asked_for_is_not_its_subject(text, subject):
    """ "Latest decisions" lists decisions: "latest" is how the list is asked for, not a word a
    decision must mention (it made the filter give way to lines saying "latest")."""
    q = query.analyze(text, NOW)
    assert q.intents and q.subject() == subject
    assert q.asks_listing() == (not subject)


@pytest.mark.parametrize(
    "text, window, subject",
    [
        ("what did we do in february", True, []),
        ("what happened in september", True, []),
        ("sessions from december", True, []),
        ("february 2026", True, []),
        ("what did we do yesterday", True, []),
        ("what did we work on last week", True, []),
        ("the deploy in february", False, ["deploy"]),
        ("decisions last week", False, []),  # a kind: a list of decisions, within the week
    ],
)
def test_the_words_that_name_a_time_are_not_a_subject(text, window, subject):
    """ "What did we do in February" names a time and nothing else: "february" is not a word a line
    must say (which gave "no line says february" and lines picked by the word), and the question asks
    for what was settled and said then."""
    q = query.analyze(text, NOW)
    assert q.since is not None
    assert q.asks_window() == window
    assert [t for t in q.subject() if t not in query.WINDOW_FRAME] == subject


@pytest.mark.parametrize(
    "text, filters, boosts, subject",
    [
        ("what broke", {"problem"}, set(), []),  # nothing else named: the problems, newest first
        ("what did we decide?", {"decision"}, set(), []),
        ("what broke last week", {"problem"}, set(), []),
        ("what went wrong with the phoenix server", set(), {"problem"}, ["phoenix", "server"]),
        ("what did we decide about tracing", set(), {"decision"}, ["tracing"]),
    ],
)
def test_a_question_about_what_happened_with_nothing_else_named_lists_that_kind(
    text, filters, boosts, subject
):
    q = query.analyze(text, NOW)
    assert (q.intents, q.boost_intents, q.subject()) == (filters, boosts, subject)


def test_a_contraction_leaves_no_half_word_to_match():
    assert query.analyze("why couldn't the server start", NOW).terms == ["server", "start"]


def test_a_month_is_named_by_a_preposition_or_a_year_and_a_bare_may_is_a_verb():
    assert query.temporal("what did we ship in the month of may", NOW) == (day(2026, 5, 1), day(2026, 6, 1))
    assert query.temporal("february 2025 sessions", NOW) == (day(2025, 2, 1), day(2025, 3, 1))
    assert query.temporal("may I ask about the deploy", NOW) == (None, None)
    assert query.temporal("the march of progress", NOW) == (None, None)
    assert query.analyze("what did we do in march", NOW).month_only
    assert not query.analyze("what did we do in march 2025", NOW).month_only


@pytest.mark.parametrize(
    "text, subject",
    [
        ("problems with the open file handle", ["open", "file", "handle"]),  # a state of the subject
        ("why is the websocket still open", ["websocket", "still", "open"]),  # no kind named
    ],
)
def test_a_state_word_that_is_not_about_the_kind_stays_a_subject(text, subject):
    assert query.analyze(text, NOW).subject() == subject


@pytest.mark.parametrize(
    "text, terms",
    [
        ("What kind of art does Caroline make?", ["art", "caroline", "make"]),
        ("what types of tests do we run in CI", ["tests", "run", "ci"]),
        ("In what ways did we speed up the build?", ["speed", "build"]),
        ("Would the cache be likely to go stale?", ["cache", "go", "stale"]),
        ("How many times did the deploy fail?", ["deploy", "fail"]),
        ("the kind words in the changelog", ["kind", "words", "changelog"]),  # not a frame: a subject
        ("what kind of", ["kind"]),  # nothing else to match: the frame word stays
    ],
)
def test_the_words_that_frame_a_question_are_not_its_subject(text, terms):
    """ "What kind of art" asks about art; "kind" matched every line saying "your kind words"."""
    assert query.analyze(text, NOW).terms == terms
