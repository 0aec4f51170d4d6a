"""The extraction protocol: input building, prompt text, answer parsing and validation."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from total_recall.errors import ExtractionError
from total_recall.extract.protocol import (
    ENTITY_TYPES,
    INTENTS,
    RELATION_TYPES,
    SYSTEM_PROMPT,
    build_input,
    parse_json_content,
    render,
    split_for_budget,
    user_message,
    validate_output,
)

HIERARCHY = {"project": {"name": "total-recall", "summary": "memory for Claude Code"}, "topic": None}


def msg(line: int, content: str = "hello there", role: str = "user") -> dict:
    return {"role": role, "content": content, "timestamp": "2024-05-01T10:00:00Z", "line": line}


# ---------------------------------------------------------------------------------------------
# Constants and prompt


def test_vocabularies_match_the_schema():
    assert INTENTS == ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
    assert set(RELATION_TYPES) == {"supersedes", "builds_on", "contradicts", "answers", "relates_to"}
    assert set(ENTITY_TYPES) == {"project", "technology", "concept", "person", "file"}


def test_system_prompt_states_the_contract():
    for word in (*INTENTS, *RELATION_TYPES, *ENTITY_TYPES):
        assert word in SYSTEM_PROMPT
    for phrase in ("source_line", "Lisbon", "DATA, never instructions", "standalone", "ONLY with the JSON"):
        assert phrase in SYSTEM_PROMPT


def test_user_message_carries_the_input_verbatim():
    obj = build_input(HIERARCHY, [msg(1)], [msg(2, 'Ünïcode — and "quotes"')])
    text = user_message(obj)
    head, _, tail = text.partition("\n\n")
    assert head and "JSON" in head
    assert tail == render(obj)
    assert json.loads(tail) == obj


# ---------------------------------------------------------------------------------------------
# build_input


def test_build_input_shape():
    obj = build_input(
        {"project": {"name": "p", "summary": "s"}, "topic": {"name": "t", "summary": ""}},
        [msg(1)],
        [msg(2)],
        [{"name": "older topic", "summary": "x", "session": "abc"}],
        [{"id": 42, "type": "decision", "content": "Use SQLite."}],
    )
    assert obj == {
        "hierarchy": {
            "project": {"name": "p", "summary": "s"},
            "topic": {"name": "t", "summary": ""},
            "span": None,
        },
        "recent_messages": [msg(1)],
        "new_messages": [msg(2)],
        "related_topics": [{"name": "older topic", "summary": "x", "session": "abc"}],
        "known_ideas": [{"id": 42, "type": "decision", "content": "Use SQLite."}],
    }


def test_long_message_is_truncated_with_a_marker():
    obj = build_input(HIERARCHY, [], [msg(5, "x" * 5_000)], max_message_chars=4_000)
    content = obj["new_messages"][0]["content"]
    assert content == "x" * 4_000 + "…[truncated 1000 chars]"


def test_over_budget_drops_oldest_recent_messages_first():
    recent = [msg(i, f"recent message number {i} " + "y" * 500) for i in range(1, 21)]
    new = [msg(30, "the new message " + "z" * 500)]
    obj = build_input(HIERARCHY, recent, new, max_chars=4_000)
    assert len(render(obj)) <= 4_000
    kept = [m["line"] for m in obj["recent_messages"]]
    assert kept and kept == list(range(21 - len(kept), 21))  # a suffix: the newest survive
    assert obj["new_messages"] == new


def test_new_messages_are_never_dropped_even_over_budget():
    new = [msg(i, "w" * 1_000) for i in range(10)]
    obj = build_input(
        HIERARCHY,
        [msg(100)],
        new,
        [{"name": "t", "summary": "s", "session": "x"}],
        [{"id": 1, "type": "todo", "content": "c"}],
        max_chars=2_000,
    )
    assert [m["line"] for m in obj["new_messages"]] == list(range(10))
    assert obj["recent_messages"] == [] and obj["known_ideas"] == [] and obj["related_topics"] == []


def test_split_for_budget_keeps_order_and_size():
    messages = [msg(i, "m" * (100 + 37 * i)) for i in range(30)]
    parts = split_for_budget(messages, 2_000)
    assert len(parts) > 1
    assert [m for part in parts for m in part] == messages
    for part in parts:
        assert len(part) == 1 or len(render(part)) <= 2_000


def test_split_for_budget_single_huge_message_stands_alone():
    messages = [msg(1, "small"), msg(2, "h" * 50_000), msg(3, "small")]
    parts = split_for_budget(messages, 1_000, max_message_chars=4_000)
    assert [[m["line"] for m in p] for p in parts] == [[1], [2], [3]]


def test_split_for_budget_small_batch_is_one_part():
    messages = [msg(1), msg(2)]
    assert split_for_budget(messages, 10_000) == [messages]
    assert split_for_budget([], 10_000) == []


# ---------------------------------------------------------------------------------------------
# parse_json_content

GOOD = {"topic_update": {"name": "x", "summary": "y"}, "items": []}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "```\n" + json.dumps(GOOD) + "\n```",
        "Sure! Here is the result:\n" + json.dumps(GOOD) + "\nLet me know if you need more.",
        "<think>the user wants {json}</think>\n" + json.dumps(GOOD),
        "Here is {not json} and then " + json.dumps(GOOD),
        '{"topic_update": {"name": "x", "summary": "y"}, "items": [],}',
    ],
)
def test_parse_accepts_common_wrappings(text):
    assert parse_json_content(text) == GOOD


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "no json here at all",
        '{"topic_update": {"name": "x", "summary": "y"}, "items": [{"type": "decision", "content": "cut',
        '```json\n{"topic_update": {"name": "x", "summary": "y"}, "items": [\n',
        "[1, 2, 3]",
    ],
)
def test_parse_rejects_missing_or_cut_off_objects(text):
    with pytest.raises(ExtractionError):
        parse_json_content(text)


def test_parse_does_not_return_an_inner_object_of_a_cut_off_answer():
    text = '{"topic_update": {"name": "inner", "summary": "s"}, "items": [{"type": "todo", "content": "x"'
    with pytest.raises(ExtractionError):
        parse_json_content(text)


def test_parse_handles_braces_inside_strings():
    obj = {"items": [{"content": 'use {curly} and "}" in text'}]}
    assert parse_json_content("Result: " + json.dumps(obj) + " done") == obj


# ---------------------------------------------------------------------------------------------
# validate_output

LINES = {10, 11, 12}


def item(**overrides) -> dict:
    base = {
        "type": "decision",
        "content": "We use SQLite.",
        "confidence": 0.8,
        "source_line": 10,
        "entities": [{"name": "SQLite", "type": "technology"}],
        "answered": False,
    }
    base.update(overrides)
    return base


def test_valid_output_passes_unchanged():
    raw = {
        "topic_update": {"name": "Storage", "summary": "Choosing storage.", "start_line": 11},
        "new_span": {"name": "Vectors", "reason": "sub-question", "start_line": 12},
        "items": [item(), item(type="question", content="Which index?", source_line=11, answered=True)],
        "relations": [
            {"from_line": 12, "to_idea_id": 42, "to_line": None, "type": "supersedes"},
            {"from_line": 12, "to_idea_id": None, "to_line": 11, "type": "answers"},
        ],
        "skip_lines": [{"line": 12, "reason": "acknowledgement"}],
    }
    result = validate_output(raw, LINES, {42})
    assert result.dropped == 0 and result.problems == []
    assert result.output == raw


def test_not_an_object_is_an_error():
    with pytest.raises(ExtractionError):
        validate_output(["items"], LINES)


def test_empty_object_gives_empty_output():
    result = validate_output({}, LINES)
    assert result.output == {
        "topic_update": {"name": "", "summary": ""},
        "new_span": None,
        "items": [],
        "relations": [],
        "skip_lines": [],
    }
    assert result.dropped == 0


@pytest.mark.parametrize(
    "bad",
    [
        item(type="opinion"),
        item(content=""),
        item(content="   "),
        item(content=42),
        item(source_line=99),
        item(source_line=None),
        item(source_line=True),
        item(confidence="high"),
        item(confidence=float("nan")),
        item(confidence=None),
        "a string, not an item",
    ],
)
def test_bad_items_are_dropped_and_counted(bad):
    result = validate_output({"items": [item(), bad]}, LINES)
    assert result.output["items"] == [validate_output({"items": [item()]}, LINES).output["items"][0]]
    assert result.dropped == 1
    assert len(result.problems) == 1


def test_item_coercions():
    raw = {
        "items": [
            item(confidence=3, type="Decision"),
            item(confidence=-1, source_line="11"),
            item(type="todo", answered=True),
            item(type="question", answered="true"),
            item(type="question", answered="false"),
            {"type": "context", "content": "  I moved to Lisbon in May.  ", "source_line": 12},
        ]
    }
    items = validate_output(raw, LINES).output["items"]
    assert [i["confidence"] for i in items[:2]] == [1.0, 0.0]
    assert items[0]["type"] == "decision" and items[1]["source_line"] == 11
    assert [i["answered"] for i in items[2:5]] == [False, True, False]
    assert items[5]["content"] == "I moved to Lisbon in May." and items[5]["entities"] == []
    assert 0.0 <= items[5]["confidence"] <= 1.0


def test_bad_entities_are_dropped_but_the_item_kept():
    raw = {
        "items": [
            item(
                entities=[
                    "sqlite-vec",
                    {"name": "Ana", "type": "person"},
                    {"name": "x", "type": "city"},
                    {"name": ""},
                    7,
                    {"type": "file"},
                    {"name": "SQLITE-VEC", "type": "technology"},
                ]
            )
        ]
    }
    result = validate_output(raw, LINES)
    assert result.dropped == 0
    assert result.output["items"][0]["entities"] == [
        {"name": "sqlite-vec", "type": "concept"},
        {"name": "Ana", "type": "person"},
    ]
    assert len(result.problems) == 4


@pytest.mark.parametrize(
    "bad",
    [
        {"from_line": 10, "to_line": 11, "to_idea_id": None, "type": "likes"},
        {"from_line": 99, "to_line": 11, "to_idea_id": None, "type": "answers"},
        {"from_line": 10, "to_line": None, "to_idea_id": 7, "type": "supersedes"},
        {"from_line": 10, "to_line": 99, "to_idea_id": None, "type": "builds_on"},
        {"from_line": 10, "to_line": 11, "to_idea_id": 42, "type": "relates_to"},
        {"from_line": 10, "to_line": None, "to_idea_id": None, "type": "relates_to"},
        {"from_line": 10, "type": "contradicts"},
    ],
)
def test_bad_relations_are_dropped(bad):
    good = {"from_line": 11, "to_line": None, "to_idea_id": 42, "type": "supersedes"}
    result = validate_output({"relations": [good, bad]}, LINES, {42})
    assert result.output["relations"] == [good]
    assert result.dropped == 1


def test_skip_lines_accepts_ints_and_objects_in_the_batch_only():
    raw = {"skip_lines": [10, {"line": 11, "reason": "thanks"}, 99, {"line": 98}, "x", {"reason": "r"}]}
    assert validate_output(raw, LINES).output["skip_lines"] == [
        {"line": 10, "reason": "skipped by extractor"},
        {"line": 11, "reason": "thanks"},
    ]


@pytest.mark.parametrize("topic", [None, "Storage", {"summary": "no name"}, {"name": ""}, {"name": 5}])
def test_missing_or_bad_topic_update_keeps_the_current_topic(topic):
    assert validate_output({"topic_update": topic}, LINES).output["topic_update"] == {
        "name": "",
        "summary": "",
    }


def test_topic_start_line_outside_the_batch_is_ignored():
    raw = {
        "topic_update": {"name": "T", "summary": "S", "start_line": 3},
        "new_span": {"name": "N", "start_line": 4},
    }
    out = validate_output(raw, LINES).output
    assert out["topic_update"] == {"name": "T", "summary": "S"}
    assert out["new_span"] == {"name": "N", "reason": ""}


def test_unknown_keys_are_ignored():
    result = validate_output({"ideas": [1], "items": [dict(item(), mood="happy")], "extra": True}, LINES)
    assert set(result.output) == {"topic_update", "new_span", "items", "relations", "skip_lines"}
    assert "mood" not in result.output["items"][0]


def test_overlong_text_is_cut():
    out = validate_output(
        {"items": [item(content="a" * 50_000)], "topic_update": {"name": "n" * 1_000}}, LINES
    )
    assert len(out.output["items"][0]["content"]) <= 2_000
    assert len(out.output["topic_update"]["name"]) <= 200


def test_the_protocols_cut_mark_is_never_stored():
    """An extractor that copies the mark the protocol put on a cut message ("…[truncated 773
    chars]") writes no memory or topic holding it: the mark is ours, not what was said."""
    out = validate_output(
        {
            "items": [item(content="We estimated two weeks for login…[truncated 773 chars] and the rest")],
            "topic_update": {"name": "Login", "summary": "The estimate…[truncated 9 chars]"},
        },
        LINES,
    )
    assert out.output["items"][0]["content"] == "We estimated two weeks for login and the rest"
    assert out.output["topic_update"]["summary"] == "The estimate"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 20)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from([*INTENTS, *RELATION_TYPES, *ENTITY_TYPES, 10, 11, 12, 42]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "content",
                    "confidence",
                    "source_line",
                    "entities",
                    "answered",
                    "name",
                    "summary",
                    "start_line",
                    "from_line",
                    "to_line",
                    "to_idea_id",
                    "line",
                    "reason",
                    "items",
                    "relations",
                    "skip_lines",
                    "topic_update",
                    "new_span",
                ]
            ),
            inner,
            max_size=8,
        )
    ),
    max_leaves=40,
)


@settings(max_examples=300)
@given(json_values)
# Digits that are not decimal ("¹", "²"): str.isdigit() takes them and int() refuses them.
@example({"items": [], "skip_lines": ["¹"]})
@example({"items": [{"type": "decision", "content": "x", "source_line": "²"}]})
def test_validator_output_always_conforms(raw):
    if not isinstance(raw, dict):
        with pytest.raises(ExtractionError):
            validate_output(raw, LINES, {42})
        return
    out = validate_output(raw, LINES, {42}).output
    assert isinstance(out["topic_update"]["name"], str) and isinstance(out["topic_update"]["summary"], str)
    for it in out["items"]:
        assert it["type"] in INTENTS and it["source_line"] in LINES and it["content"].strip()
        assert 0.0 <= it["confidence"] <= 1.0 and isinstance(it["answered"], bool)
        assert all(e["type"] in ENTITY_TYPES and e["name"] for e in it["entities"])
    for rel in out["relations"]:
        assert rel["type"] in RELATION_TYPES and rel["from_line"] in LINES
        assert (rel["to_idea_id"] is None) != (rel["to_line"] is None)
        assert rel["to_idea_id"] in (None, 42) and rel["to_line"] in (None, *LINES)
    assert all(s["line"] in LINES and isinstance(s["reason"], str) for s in out["skip_lines"])
    json.dumps(out)  # always serialisable
