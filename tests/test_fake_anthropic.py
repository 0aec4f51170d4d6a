"""The fake Anthropic server speaks the Messages API the way the e2e tests rely on (no npm needed)."""

from __future__ import annotations

import json
import urllib.request

from fake_anthropic import FakeAnthropic, tool_results

TOOLS = [{"name": "Bash", "input_schema": {}}, {"name": "mcp__plugin_x_y__search", "input_schema": {}}]


def post(srv: FakeAnthropic, body: dict, path: str = "/v1/messages?beta=true") -> tuple[str, bytes]:
    request = urllib.request.Request(
        srv.base_url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["content-type"], response.read()


def events(raw: bytes) -> list[tuple[str, dict]]:
    out = []
    for chunk in raw.decode().strip().split("\n\n"):
        name, data = chunk.split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_a_scripted_turn_answers_the_prompt_then_its_tool_result():
    with FakeAnthropic() as srv:
        call = {"tool_use": {"name_matching": r"__search$", "input": {"query": "q"}}}
        srv.script("find the decision", [call, "Found it."])
        prompt = {"role": "user", "content": [{"type": "text", "text": "please find the decision"}]}
        _, raw = post(srv, {"model": "m", "tools": TOOLS, "messages": [prompt]})
        call = json.loads(raw)
        assert call["stop_reason"] == "tool_use"
        [block] = call["content"]
        assert (block["name"], block["input"]) == ("mcp__plugin_x_y__search", {"query": "q"})
        answer = {"type": "tool_result", "tool_use_id": block["id"], "content": "r"}
        result = {"role": "user", "content": [answer]}
        _, raw = post(
            srv,
            {
                "model": "m",
                "tools": TOOLS,
                "messages": [prompt, {"role": "assistant", "content": call["content"]}, result],
            },
        )
        assert json.loads(raw)["content"] == [{"type": "text", "text": "Found it."}]
        assert tool_results(srv.requests[-1]["json"]) == [answer]
        assert len(srv.conversation_requests("find the decision")) == 2


def test_streaming_sends_the_message_api_events_and_requests_without_tools_get_the_default():
    with FakeAnthropic() as srv:
        srv.script("title", ["scripted"])
        title = {"role": "user", "content": "a title"}
        kind, raw = post(srv, {"model": "m", "stream": True, "messages": [title]})
    assert kind == "text/event-stream"
    names = [name for name, _ in events(raw)]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    delta = events(raw)[2][1]["delta"]
    assert delta == {"type": "text_delta", "text": "OK"}  # no tools offered: not the scripted turn
    assert events(raw)[4][1]["delta"]["stop_reason"] == "end_turn"


def test_a_side_rule_answers_a_request_without_tools_whose_body_holds_its_match():
    with FakeAnthropic() as srv:
        srv.answer_side("evaluating a stop-condition hook", '{"ok": true}')
        srv.script("evaluating", ["the conversation's rule"])
        check = {
            "system": "You are evaluating a stop-condition hook.",
            "messages": [{"role": "user", "content": "x"}],
        }
        _, raw = post(srv, {"model": "m", **check})
        assert json.loads(raw)["content"] == [{"type": "text", "text": '{"ok": true}'}]
        _, raw = post(srv, {"model": "m", "messages": [{"role": "user", "content": "a title"}]})
        assert json.loads(raw)["content"] == [{"type": "text", "text": "OK"}]  # no match: the default
        prompt = {"role": "user", "content": "evaluating a stop-condition hook"}
        _, raw = post(srv, {"model": "m", "tools": TOOLS, "messages": [prompt]})
        assert json.loads(raw)["content"] == [{"type": "text", "text": "the conversation's rule"}]


def test_a_streamed_tool_call_arrives_as_input_json():
    with FakeAnthropic() as srv:
        srv.script("plan", [{"text": "Planning.", "tool_use": {"name": "TodoWrite", "input": {"todos": []}}}])
        _, raw = post(
            srv,
            {
                "model": "m",
                "stream": True,
                "tools": TOOLS,
                "messages": [{"role": "user", "content": "plan it"}],
            },
        )
    sent = events(raw)
    starts = [data["content_block"] for name, data in sent if name == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"] and starts[1]["name"] == "TodoWrite"
    deltas = [data["delta"] for name, data in sent if name == "content_block_delta"]
    assert json.loads(deltas[1]["partial_json"]) == {"todos": []}
    assert sent[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_deferred_tool_is_loaded_with_tool_search_before_the_scripted_call():
    """Claude Code 2.1.2xx on names some tools (its task tools, MCP tools) in a reminder instead of
    offering them; the model loads one with ToolSearch, and the turn's script goes on after it."""
    listed = (
        "<system-reminder>\nThe following deferred tools are now available via ToolSearch. Use ToolSearch "
        'with query "select:<name>" to load tool schemas before calling them:\nCronCreate\nmcp__x__search\n'
        "</system-reminder>"
    )
    tools = [{"name": "Bash", "input_schema": {}}, {"name": "ToolSearch", "input_schema": {}}]
    with FakeAnthropic() as srv:
        srv.script(
            "find the decision", [{"tool_use": {"name_matching": r"__search$", "input": {"q": 1}}}, "Done."]
        )
        prompt = {
            "role": "user",
            "content": [{"type": "text", "text": listed}, {"type": "text", "text": "find the decision"}],
        }
        messages = [prompt]
        _, raw = post(srv, {"model": "m", "tools": tools, "messages": messages})
        [load] = json.loads(raw)["content"]
        assert (load["name"], load["input"]["query"]) == ("ToolSearch", "select:mcp__x__search")
        loaded = {
            "type": "tool_result",
            "tool_use_id": load["id"],
            "content": [{"type": "tool_reference", "tool_name": "mcp__x__search"}],
        }
        messages += [{"role": "assistant", "content": [load]}, {"role": "user", "content": [loaded]}]
        _, raw = post(
            srv,
            {
                "model": "m",
                "tools": [*tools, {"name": "mcp__x__search", "input_schema": {}}],
                "messages": messages,
            },
        )
        [call] = json.loads(raw)["content"]
        assert (call["type"], call["name"], call["input"]) == ("tool_use", "mcp__x__search", {"q": 1})
        answer = {"type": "tool_result", "tool_use_id": call["id"], "content": "r"}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [answer]}]
        _, raw = post(srv, {"model": "m", "tools": tools, "messages": messages})
        assert json.loads(raw)["content"] == [{"type": "text", "text": "Done."}]


def test_a_filled_input_field_takes_the_newest_match_in_the_requests_messages():
    with FakeAnthropic() as srv:
        send = {"tool_use": {"name": "Bash", "input": {"command": "x"}, "fill": {"to": r"agentId: (\w+)"}}}
        srv.script("audit", [{"tool_use": {"name": "Bash", "input": {}}}, send, "Done."])
        prompt = {"role": "user", "content": [{"type": "text", "text": "audit it"}]}
        first = json.loads(post(srv, {"model": "m", "tools": TOOLS, "messages": [prompt]})[1])["content"][0]
        launched = [
            {"type": "tool_result", "tool_use_id": first["id"], "content": "agentId: a0 (old)\nagentId: b7"}
        ]
        turn = [prompt, {"role": "assistant", "content": [first]}, {"role": "user", "content": launched}]
        [block] = json.loads(post(srv, {"model": "m", "tools": TOOLS, "messages": turn})[1])["content"]
        assert block["input"] == {"command": "x", "to": "b7"}
