"""Embedding backends: the packaged MiniLM model offline, and OpenAI-compatible endpoints over HTTP."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
from structlog.testing import capture_logs

from fake_openai import FakeOpenAI, fake_embedding
from total_recall import config
from total_recall.embed import (
    LocalEmbedder,
    OpenAIEmbedder,
    cosine_sim,
    from_blob,
    get_embedder,
    to_blob,
)
from total_recall.errors import ConfigError, EmbeddingError, TransientError

LISBON = "I moved to Lisbon in May"
PORTUGAL = "When did I relocate to Portugal?"
SEMICOLON = "The build failed because of a missing semicolon"


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


# --- local model ---------------------------------------------------------------------------


def test_local_embedder_loads_and_embeds_without_any_network(monkeypatch, local):
    def refuse(*args, **kwargs):
        raise AssertionError("the local embedder tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = LocalEmbedder()
    vecs = fresh.embed([LISBON, PORTUGAL])
    assert fresh.dim == 384 and fresh.model_id == "all-MiniLM-L6-v2-onnx-int8"
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vecs, local.embed([LISBON, PORTUGAL]), atol=1e-6)  # deterministic


IDLE_CPU = """
import time
from total_recall.embed import LocalEmbedder
model = LocalEmbedder()
model.embed(["I moved to Lisbon in May"])
model.embed(["When did I relocate to Portugal?"])
started = time.process_time()
time.sleep(0.2)
print(time.process_time() - started)
"""


def test_the_model_leaves_the_cores_alone_between_calls():
    # onnxruntime's worker threads spin-wait after each run by default (~35 ms of a core per
    # call); in the daemon that took the second core from the search's second thread. A fresh
    # process, so that no other test's thread is counted.
    done = subprocess.run([sys.executable, "-c", IDLE_CPU], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip().splitlines()[-1]) < 0.01  # seconds of CPU while it waited


def test_paraphrase_is_closer_than_unrelated_text(local):
    lisbon, portugal, semicolon = local.embed([LISBON, PORTUGAL, SEMICOLON])
    assert cosine_sim(lisbon, portugal) > cosine_sim(lisbon, semicolon) + 0.2
    assert cosine_sim(lisbon, portugal) > cosine_sim(portugal, semicolon) + 0.2


def test_batch_equals_one_by_one_in_input_order(local):
    # Lengths deliberately out of order and more than one sub-batch, so sorting must be undone.
    texts = [
        f"{'word ' * ((i * 7) % 23)}item {i} about {topic}"
        for i, topic in enumerate(["lisbon", "sqlite", "cooking", "music"] * 9)
    ]
    texts += ["", "   ", "token " * 400]  # blank texts and one past the 256-token limit
    batch = local.embed(texts)
    single = np.vstack([local.embed([t]) for t in texts])
    assert batch.shape == (len(texts), 384)
    np.testing.assert_allclose(batch, single, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_sub_batches_hold_texts_of_similar_length_and_every_text_once():
    from total_recall.embed import GROUP_SLACK, GROUP_STRETCH, length_groups

    lengths = [200, 12, 14, 180, 13, 40, 11, 15, 16, 12, 14, 13, 200, 38, 9, 256] + [20] * 40
    groups = length_groups(lengths, 16)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        assert 1 <= len(group) <= 16
        shortest, longest = min(lengths[i] for i in group), max(lengths[i] for i in group)
        assert longest <= GROUP_STRETCH * shortest + GROUP_SLACK
    # A short item never shares a sub-batch with a long window (it would be padded to its length).
    assert not any({1, 0} <= set(g) for g in groups)


def test_concurrent_first_calls_load_the_model_once_per_process():
    # Three threads is a setting no other test uses, so the process has not loaded this model yet.
    shared = LocalEmbedder(threads=3)
    embedders = [shared, shared, LocalEmbedder(threads=3), LocalEmbedder(threads=3)]
    results: list = [None] * 4
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        barrier.wait()
        results[i] = embedders[i].embed([LISBON, f"thread {i}"])

    with capture_logs() as logs:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [e["event"] for e in logs].count("embedder_loaded") == 1
    assert all(r is not None and r.shape == (2, 384) for r in results)
    np.testing.assert_allclose(results[0][0], results[3][0], atol=1e-5)


def test_empty_input_gives_an_empty_matrix(local):
    out = local.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_tampered_model_file_is_refused(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(EmbeddingError, match="cannot load embedding model"):
        LocalEmbedder(model_path=bad).embed(["x"])


# --- OpenAI-compatible endpoint ------------------------------------------------------------


def make(srv: FakeOpenAI, sleeps: list | None = None, **kwargs) -> OpenAIEmbedder:
    sleeps = [] if sleeps is None else sleeps
    kwargs.setdefault("model", "fake-embed")
    return OpenAIEmbedder(
        base_url=srv.base_url, api_key="sk-test", timeout=5.0, sleep=sleeps.append, **kwargs
    )


def test_openai_batches_at_most_100_texts_per_call_and_keeps_order():
    texts = [f"note number {i} about topic {i % 7}" for i in range(250)]
    with FakeOpenAI(dim=8) as srv:
        emb = make(srv)
        out = emb.embed(texts)
    sizes = [len(r["json"]["input"]) for r in srv.requests_to("/embeddings")]
    assert sizes == [100, 100, 50]
    assert out.shape == (250, 8) and out.dtype == np.float32
    np.testing.assert_allclose(out[137], fake_embedding(texts[137], 8), atol=1e-6)
    assert srv.requests[0]["headers"]["authorization"] == "Bearer sk-test"
    assert emb.dim == 8 and len(srv.requests) == 3  # learned from the response, no probe


def test_openai_retries_500_and_429_honouring_retry_after():
    sleeps: list[float] = []
    with FakeOpenAI() as srv:
        srv.queue_embeddings({"status": 500}, {"status": 429, "retry_after": 7})
        out = make(srv, sleeps).embed([LISBON])
    assert len(srv.requests) == 3
    assert sleeps == [1.0, 7.0]  # exponential start, then the server's Retry-After
    np.testing.assert_allclose(out[0], fake_embedding(LISBON), atol=1e-6)


def test_openai_retries_timeouts_and_dropped_connections():
    sleeps: list[float] = []
    with FakeOpenAI() as srv:
        srv.queue_embeddings({"hang": 30}, {"close": True})
        out = OpenAIEmbedder(base_url=srv.base_url, model="m", timeout=0.3, sleep=sleeps.append).embed(["a"])
    assert len(srv.requests) == 3 and sleeps == [1.0, 2.0]
    assert out.shape == (1, 8)


def test_openai_cuts_an_answer_trickled_past_the_timeout_and_retries():
    import time

    sleeps: list[float] = []
    with FakeOpenAI() as srv:
        srv.queue_embeddings({"trickle": 0.2})
        started = time.monotonic()
        out = OpenAIEmbedder(base_url=srv.base_url, model="m", timeout=1, sleep=sleeps.append).embed(["a"])
        elapsed = time.monotonic() - started
    assert len(srv.requests) == 2 and sleeps == [1.0]
    assert elapsed < 1 + 0.2 + 3  # the whole trickled body would take minutes
    np.testing.assert_allclose(out[0], fake_embedding("a"), atol=1e-6)


def test_openai_gives_up_after_bounded_attempts_with_a_transient_error():
    sleeps: list[float] = []
    with FakeOpenAI() as srv:
        srv.set_embeddings({"status": 503})
        with pytest.raises(TransientError, match="after 4 attempts"):
            make(srv, sleeps, max_attempts=4).embed(["a"])
    assert len(srv.requests) == 4
    assert sleeps == [1.0, 2.0, 4.0]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_openai_non_transient_errors_raise_at_once(status):
    sleeps: list[float] = []
    with FakeOpenAI() as srv:
        srv.set_embeddings({"status": status, "error": "nope"})
        with pytest.raises(EmbeddingError, match="refused"):
            make(srv, sleeps).embed(["a"])
    assert len(srv.requests) == 1 and sleeps == []


@pytest.mark.parametrize("action", [{"truncate": True}, {"body": "<html>proxy error</html>"}])
def test_openai_unreadable_body_is_an_embedding_error(action):
    with FakeOpenAI() as srv:
        srv.set_embeddings(action)
        with pytest.raises(EmbeddingError):
            make(srv).embed(["a"])


def test_openai_rows_are_renormalised():
    with FakeOpenAI() as srv:
        srv.queue_embeddings({"embeddings": [[3.0, 4.0], [0.0, 2.0]]})
        out = make(srv).embed(["a", "b"])
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 1.0]], atol=1e-6)


def test_openai_known_model_dim_needs_no_request_and_mismatch_is_refused():
    with FakeOpenAI(dim=8) as srv:
        emb = make(srv, model="text-embedding-3-small")
        assert emb.dim == 1536 and emb.model_id == "openai:text-embedding-3-small"
        assert emb.embed([]).shape == (0, 1536)
        assert srv.requests == []
        with pytest.raises(EmbeddingError, match="expected 1536"):
            emb.embed(["a"])


def test_openai_unknown_model_dim_is_probed_once():
    with FakeOpenAI(dim=8) as srv:
        emb = make(srv)
        assert emb.dim == 8
        assert emb.dim == 8
    assert len(srv.requests) == 1


def test_openai_blank_texts_are_sent_as_a_space():
    with FakeOpenAI() as srv:
        out = make(srv).embed(["", "real text"])
    assert srv.requests[0]["json"]["input"] == [" ", "real text"]
    assert out.shape == (2, 8)


# --- choice by settings, blobs, cosine -----------------------------------------------------------


def test_get_embedder_defaults_to_local():
    emb = get_embedder(config.load(environ={}))
    assert isinstance(emb, LocalEmbedder) and emb.dim == 384


def test_get_embedder_openai_from_environment_talks_to_the_endpoint():
    with FakeOpenAI(dim=8) as srv:
        settings = config.load(
            environ={
                "TOTAL_RECALL_EMBED_PROVIDER": "openai",
                "TOTAL_RECALL_EMBED_BASE_URL": srv.base_url,
                "TOTAL_RECALL_EMBED_MODEL": "nomic-embed",
                "TOTAL_RECALL_EMBED_API_KEY": "sk-from-env",
                "TOTAL_RECALL_EMBED_BATCH_SIZE": "2",
            }
        )
        emb = get_embedder(settings)
        emb.embed(["a", "b", "c"])
    assert isinstance(emb, OpenAIEmbedder) and emb.model_id == "openai:nomic-embed"
    assert [len(r["json"]["input"]) for r in srv.requests] == [2, 1]
    assert srv.requests[0]["json"]["model"] == "nomic-embed"
    assert srv.requests[0]["headers"]["authorization"] == "Bearer sk-from-env"


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"TOTAL_RECALL_EMBED_PROVIDER": "cohere"}, "must be one of"),
        ({"TOTAL_RECALL_EMBED_PROVIDER": "openai"}, "needs an API key"),
        ({"TOTAL_RECALL_EMBED_MODEL": "bge-small"}, "local provider only has"),
    ],
)
def test_get_embedder_refuses_bad_settings(environ, message):
    with pytest.raises(ConfigError, match=message):
        get_embedder(config.load(environ=environ))


def test_blob_is_little_endian_float32_and_round_trips():
    assert to_blob([1.0, -2.5]) == struct.pack("<2f", 1.0, -2.5)
    vec = np.array([0.25, -1.0, 3.5], dtype=np.float32)
    np.testing.assert_array_equal(from_blob(to_blob(vec)), vec)
    with pytest.raises(ValueError):
        to_blob(np.zeros((2, 2)))


def test_cosine_sim():
    assert cosine_sim([1, 0], [0, 3]) == pytest.approx(0.0)
    assert cosine_sim([1, 1], [2, 2]) == pytest.approx(1.0)
    assert cosine_sim([1, 0], [-1, 0]) == pytest.approx(-1.0)
    assert cosine_sim([0, 0], [1, 0]) == 0.0
