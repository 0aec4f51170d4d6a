"""The LLM extractor and HyDE over real HTTP against the local fake OpenAI server."""

from __future__ import annotations

import json

import pytest

from fake_openai import FakeOpenAI
from total_recall import config
from total_recall.errors import ExtractionError
from total_recall.extract import llm
from total_recall.extract.llm import LLMExtractor, hyde
from total_recall.extract.protocol import SYSTEM_PROMPT, build_input, render, validate_output

SECRET = "sk-proj-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0"

ANSWER = {
    "topic_update": {"name": "Storage", "summary": "Choosing where vectors live."},
    "new_span": None,
    "items": [
        {
            "type": "decision",
            "content": "Vectors are stored with sqlite-vec.",
            "confidence": 0.9,
            "source_line": 2,
            "entities": [{"name": "sqlite-vec", "type": "technology"}],
            "answered": False,
        }
    ],
    "relations": [],
    "skip_lines": [{"line": 3, "reason": "acknowledgement"}],
}


def settings_for(srv: FakeOpenAI, tmp_path, **overrides: str) -> config.Settings:
    environ = {
        "TOTAL_RECALL_LLM_BASE_URL": srv.base_url,
        "TOTAL_RECALL_LLM_MODEL": "fake-model",
        "TOTAL_RECALL_LLM_TIMEOUT": "5",
    }
    environ.update({f"TOTAL_RECALL_LLM_{k.upper()}": v for k, v in overrides.items()})
    return config.load(environ=environ, config_path=tmp_path / "absent.toml")


def input_obj(content: str = "Let's store vectors with sqlite-vec.") -> dict:
    hierarchy = {"project": {"name": "total-recall", "summary": ""}, "topic": None}
    new = [
        {"role": "user", "content": content, "timestamp": "2024-05-01T10:00:00Z", "line": 2},
        {"role": "assistant", "content": "Sounds good.", "timestamp": "2024-05-01T10:00:05Z", "line": 3},
    ]
    return build_input(hierarchy, [], new, (), [{"id": 9, "type": "todo", "content": "Pick a vector store."}])


class Recorder:
    """Collects sleeps and record_call dicts so tests never wait and can inspect accounting."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.calls: list[dict] = []

    def extractor(self, settings, **kwargs) -> LLMExtractor:
        return LLMExtractor(settings, sleep=self.sleeps.append, record_call=self.calls.append, **kwargs)


@pytest.fixture(autouse=True)
def fresh_json_mode_memory():
    """The JSON-mode fallback is remembered per process; an ephemeral port may be reused."""
    llm._NO_JSON_MODE.clear()
    yield
    llm._NO_JSON_MODE.clear()


@pytest.fixture
def srv():
    with FakeOpenAI(chat=json.dumps(ANSWER)) as server:
        yield server


def chats(srv: FakeOpenAI) -> list[dict]:
    return [r["json"] for r in srv.requests_to("/chat/completions")]


def test_one_chat_call_with_the_input_verbatim(srv, tmp_path):
    rec = Recorder()
    obj = input_obj()
    out = rec.extractor(settings_for(srv, tmp_path)).extract(obj)
    assert out == ANSWER
    assert validate_output(out, {2, 3}, {9}).dropped == 0
    [request] = chats(srv)
    assert request["model"] == "fake-model"
    assert request["temperature"] == 0
    assert request["response_format"] == {"type": "json_object"}
    system, user = request["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert render(obj) in user["content"]
    assert json.loads(user["content"].split("\n\n", 1)[1]) == obj
    assert rec.sleeps == []


def test_server_error_then_success(srv, tmp_path):
    srv.queue_chat({"status": 500})
    rec = Recorder()
    assert rec.extractor(settings_for(srv, tmp_path)).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 2
    assert rec.sleeps == [1.0]
    assert [c["ok"] for c in rec.calls] == [False, True]
    assert "500" in rec.calls[0]["error"]


def test_rate_limit_honours_retry_after(srv, tmp_path):
    srv.queue_chat({"status": 429, "retry_after": 7})
    rec = Recorder()
    assert rec.extractor(settings_for(srv, tmp_path)).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 2
    assert rec.sleeps == [7.0]


def test_backoff_grows_and_is_capped(srv, tmp_path):
    srv.queue_chat(*[{"status": 503}] * 5)
    rec = Recorder()
    assert rec.extractor(settings_for(srv, tmp_path), max_attempts=6).extract(input_obj()) == ANSWER
    assert rec.sleeps == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_non_json_answer_then_valid(srv, tmp_path):
    srv.queue_chat({"content": "I'm sorry, here are the memories: decision about storage."})
    rec = Recorder()
    assert rec.extractor(settings_for(srv, tmp_path)).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 2
    assert [c["ok"] for c in rec.calls] == [False, True]
    assert "unusable content" in rec.calls[0]["error"]


def test_fenced_answer_with_prose_is_accepted(srv, tmp_path):
    srv.queue_chat({"content": "Here you go:\n```json\n" + json.dumps(ANSWER, indent=2) + "\n```\nDone."})
    assert Recorder().extractor(settings_for(srv, tmp_path)).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 1


def test_cut_off_answers_until_attempts_run_out(srv, tmp_path):
    cut = json.dumps(ANSWER)[:80]
    srv.set_chat({"content": cut, "finish_reason": "length"})
    rec = Recorder()
    with pytest.raises(ExtractionError, match="no usable JSON in 3 attempt"):
        rec.extractor(settings_for(srv, tmp_path), max_attempts=3).extract(input_obj())
    assert len(chats(srv)) == 3
    assert [c["ok"] for c in rec.calls] == [False, False, False]
    assert rec.sleeps == [1.0, 2.0]


def test_truncated_twice_then_error_at_the_default_limit(srv, tmp_path):
    cut = json.dumps(ANSWER)[:60]
    srv.queue_chat({"content": cut}, {"content": cut})
    rec = Recorder()
    extractor = rec.extractor(settings_for(srv, tmp_path), max_attempts=2)
    with pytest.raises(ExtractionError):
        extractor.extract(input_obj())
    assert len(chats(srv)) == 2
    assert extractor.extract(input_obj()) == ANSWER  # the queue is used up: the default answers


def test_hang_past_the_timeout_is_retried(srv, tmp_path):
    srv.queue_chat({"hang": 3})
    rec = Recorder()
    out = rec.extractor(settings_for(srv, tmp_path, timeout="0.3")).extract(input_obj())
    assert out == ANSWER
    assert len(chats(srv)) == 2
    assert "Timeout" in rec.calls[0]["error"]


def test_an_answer_trickled_past_the_timeout_is_cut_and_retried(srv, tmp_path):
    # Every byte comes within the read timeout, so only a deadline on the whole call ends it: the
    # whole body at this pace would take minutes.
    import time

    srv.queue_chat({"trickle": 0.2})
    rec = Recorder()
    started = time.monotonic()
    out = rec.extractor(settings_for(srv, tmp_path, timeout="1")).extract(input_obj())
    assert out == ANSWER
    assert len(chats(srv)) == 2 and "Timeout" in rec.calls[0]["error"]
    assert time.monotonic() - started < 1 + 0.2 + 5  # the cut call, its backoff, the answer


@pytest.mark.parametrize(
    "action", [{"close": True}, {"truncate": True}, {"body": "<html>Bad gateway</html>"}]
)
def test_transport_faults_are_retried(srv, tmp_path, action):
    srv.queue_chat(action)
    rec = Recorder()
    assert rec.extractor(settings_for(srv, tmp_path)).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_refusals_are_not_retried(srv, tmp_path, status):
    srv.queue_chat({"status": status, "error": "nope"})
    rec = Recorder()
    with pytest.raises(ExtractionError, match="nope"):
        rec.extractor(settings_for(srv, tmp_path)).extract(input_obj())
    assert len(chats(srv)) == 1
    assert rec.sleeps == []


@pytest.mark.parametrize("style", ["lmstudio", "vllm"])
def test_json_mode_auto_falls_back_and_remembers(srv, tmp_path, style):
    srv.reject_response_format = True
    srv.set_reject_style(style)
    rec = Recorder()
    settings = settings_for(srv, tmp_path)
    assert rec.extractor(settings).extract(input_obj()) == ANSWER
    first, second = chats(srv)
    assert first["response_format"] == {"type": "json_object"}
    assert "response_format" not in second
    assert rec.sleeps == []
    # A new extractor in the same process goes straight to plain mode.
    assert rec.extractor(settings).extract(input_obj()) == ANSWER
    assert len(chats(srv)) == 3 and "response_format" not in chats(srv)[2]


def test_json_mode_off_never_sends_response_format(srv, tmp_path):
    Recorder().extractor(settings_for(srv, tmp_path, json_mode="off")).extract(input_obj())
    assert "response_format" not in chats(srv)[0]


def test_json_mode_on_does_not_fall_back(srv, tmp_path):
    srv.reject_response_format = True
    with pytest.raises(ExtractionError):
        Recorder().extractor(settings_for(srv, tmp_path, json_mode="on")).extract(input_obj())
    assert len(chats(srv)) == 1


def test_planted_secret_never_reaches_the_server(srv, tmp_path):
    obj = input_obj(f"my key is {SECRET} and DB_PASSWORD=hunter2x please remember the deploy steps")
    obj["known_ideas"].append({"id": 10, "type": "context", "content": f"token {SECRET}"})
    Recorder().extractor(settings_for(srv, tmp_path)).extract(obj)
    body = srv.requests[0]["body"]
    assert SECRET not in body and "hunter2x" not in body
    assert "[REDACTED:openai_key]" in body and "[REDACTED:password]" in body
    assert SECRET in obj["new_messages"][0]["content"]  # the caller's object is left alone


def test_record_call_receives_token_usage(srv, tmp_path):
    srv.queue_chat(
        {
            "content": json.dumps(ANSWER),
            "usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290},
        }
    )
    rec = Recorder()
    rec.extractor(settings_for(srv, tmp_path)).extract(input_obj())
    assert rec.calls == [
        {
            "extractor": "llm",
            "model": "fake-model",
            "prompt_tokens": 1234,
            "completion_tokens": 56,
            "ok": True,
            "error": None,
            "messages": 2,
        }
    ]


def test_api_key_from_settings_is_sent(srv, tmp_path):
    Recorder().extractor(settings_for(srv, tmp_path, api_key="key-123")).extract(input_obj())
    assert srv.requests[0]["headers"]["authorization"] == "Bearer key-123"


# ---------------------------------------------------------------------------------------------
# HyDE


def test_hyde_returns_the_passage(srv, tmp_path):
    srv.set_chat("  We chose sqlite-vec for vectors because it ships as one extension.  ")
    calls: list[dict] = []
    text = hyde(
        settings_for(srv, tmp_path),
        f"which vector store did we pick? key {SECRET}",
        sleep=lambda s: None,
        record_call=calls.append,
    )
    assert text == "We chose sqlite-vec for vectors because it ships as one extension."
    [request] = chats(srv)
    assert "response_format" not in request
    assert "which vector store did we pick?" in request["messages"][1]["content"]
    assert SECRET not in srv.requests[0]["body"]
    assert calls[0]["extractor"] == "hyde" and calls[0]["ok"] is True


def test_hyde_retries_once_then_fails_cleanly(srv, tmp_path):
    srv.set_chat({"status": 502})
    sleeps: list[float] = []
    with pytest.raises(ExtractionError):
        hyde(settings_for(srv, tmp_path), "anything", sleep=sleeps.append)
    assert len(chats(srv)) == 2
    assert sleeps == [1.0]
