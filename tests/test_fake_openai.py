"""The fake OpenAI server behaves like an OpenAI-compatible endpoint to the real `openai` client."""

from __future__ import annotations

import json
import math
import socket
import urllib.request

import openai
import pytest

from fake_openai import FakeOpenAI, FakeOpenAIProcess, fake_embedding


def client(base_url: str, timeout: float = 10.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="test-key", max_retries=0, timeout=timeout)


def chat(c: openai.OpenAI, **kwargs):
    return c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], **kwargs)


def test_chat_returns_queued_content_then_default_and_records_request():
    with FakeOpenAI(chat="default reply") as srv:
        srv.queue_chat(
            {
                "content": '{"ideas": []}',
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
            }
        )
        c = client(srv.base_url)
        first = chat(c)
        second = chat(c)
    assert first.choices[0].message.content == '{"ideas": []}'
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.total_tokens) == (7, 3, 10)
    assert second.choices[0].message.content == "default reply"
    assert second.usage.total_tokens > 0
    assert [r["path"] for r in srv.requests] == ["/v1/chat/completions"] * 2
    assert srv.requests[0]["json"]["messages"][0]["content"] == "hi"
    assert srv.requests[0]["headers"]["authorization"] == "Bearer test-key"


def test_chat_default_may_be_a_callable_of_the_request():
    with FakeOpenAI(chat=lambda req: req["messages"][-1]["content"].upper()) as srv:
        reply = chat(client(srv.base_url))
    assert reply.choices[0].message.content == "HI"


def test_embeddings_are_deterministic_unit_vectors_in_float_and_base64():
    with FakeOpenAI(dim=8) as srv:
        c = client(srv.base_url)
        texts = ["Moved to Lisbon", "moved to lisbon", "The build failed"]
        b64 = c.embeddings.create(model="e", input=texts)  # the client asks for base64 by default
        flt = c.embeddings.create(model="e", input=texts, encoding_format="float")
    for resp in (b64, flt):
        vecs = [d.embedding for d in resp.data]
        assert all(len(v) == 8 and math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5) for v in vecs)
        assert vecs[0] == pytest.approx(vecs[1])  # same word set
        assert vecs[0] == pytest.approx(fake_embedding("Moved to Lisbon", 8), abs=1e-6)
        assert vecs[0] != pytest.approx(vecs[2])
    assert srv.requests_to("/embeddings")[0]["json"]["input"] == texts


def test_http_500_and_429_with_retry_after_reach_the_client():
    with FakeOpenAI() as srv:
        srv.queue_chat({"status": 500}, {"status": 429, "retry_after": 3})
        c = client(srv.base_url)
        with pytest.raises(openai.InternalServerError):
            chat(c)
        with pytest.raises(openai.RateLimitError) as info:
            chat(c)
        assert chat(c).choices[0].message.content == "OK"
    assert info.value.response.headers["retry-after"] == "3"
    assert len(srv.requests) == 3


def test_hang_makes_the_client_time_out_and_the_request_is_recorded_first():
    with FakeOpenAI() as srv:
        srv.queue_chat({"hang": 30})
        with pytest.raises(openai.APITimeoutError):
            chat(client(srv.base_url, timeout=0.5))
        assert len(srv.requests) == 1


def test_trickle_sends_the_answer_a_byte_at_a_time():
    import time

    with FakeOpenAI() as srv:
        srv.queue_chat({"trickle": 0.001})
        started = time.monotonic()
        assert chat(client(srv.base_url, timeout=5)).choices[0].message.content == "OK"
        assert time.monotonic() - started > 0.1  # a few hundred bytes, a millisecond apart


def test_closed_connection_truncated_and_non_json_bodies_fail_in_the_client():
    with FakeOpenAI() as srv:
        srv.queue_chat({"close": True}, {"truncate": True}, {"body": "<html>bad gateway</html>"})
        c = client(srv.base_url)
        with pytest.raises(openai.APIConnectionError):
            chat(c)
        with pytest.raises(Exception) as truncated:
            chat(c)
        assert not isinstance(truncated.value, openai.APIConnectionError)
        # A text/plain 200 is returned to the caller as a string, never as a parsed completion.
        assert not hasattr(chat(c), "choices")
        assert len(srv.requests) == 3


def test_response_format_rejection_only_hits_json_mode_requests():
    with FakeOpenAI(chat='{"ok": true}') as srv:
        srv.reject_response_format = True
        c = client(srv.base_url)
        with pytest.raises(openai.BadRequestError) as info:
            chat(c, response_format={"type": "json_object"})
        plain = chat(c)
        srv.set_reject_style("vllm")
        with pytest.raises(openai.BadRequestError) as vllm:
            chat(c, response_format={"type": "json_object"})
    # LM Studio's body is {"error": "<text>"}: the client keeps it only in .body/.response.
    assert "response_format" in info.value.body
    assert "response_format" in vllm.value.response.json()["message"]
    assert plain.choices[0].message.content == '{"ok": true}'


def test_models_endpoint_lists_a_model():
    with FakeOpenAI() as srv:
        models = client(srv.base_url).models.list()
    assert [m.id for m in models.data] == ["fake-model"]


def test_subprocess_mode_follows_the_script_file_and_logs_requests(tmp_path):
    script = {
        "chat": {"queue": [{"status": 500}], "default": {"content": "from script"}},
        "embeddings": {"dim": 4},
    }
    with FakeOpenAIProcess(tmp_path, script) as srv:
        c = client(srv.base_url)
        with pytest.raises(openai.InternalServerError):
            chat(c)
        assert chat(c).choices[0].message.content == "from script"
        vec = c.embeddings.create(model="e", input=["a b"]).data[0].embedding
        srv.write_script({"chat": {"default": {"content": "changed"}}})
        assert chat(c).choices[0].message.content == "changed"
        log = srv.requests()
    assert len(vec) == 4 and vec == pytest.approx(fake_embedding("a b", 4), abs=1e-6)
    chat_path, embed_path = "/v1/chat/completions", "/v1/embeddings"
    assert [r["path"] for r in log] == [chat_path, chat_path, embed_path, chat_path]
    assert log[0]["json"]["model"] == "m"


def test_subprocess_port_file_is_usable_with_plain_http(tmp_path):
    with FakeOpenAIProcess(tmp_path) as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as resp:
            body = json.loads(resp.read())
        port = int(srv.port_file.read_text())
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    assert body["data"][0]["id"] == "fake-model"
