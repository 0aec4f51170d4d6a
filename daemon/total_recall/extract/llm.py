"""The LLM extractor (one chat call per batch to any OpenAI-compatible endpoint), HyDE, and the
optional re-ranking of a search's first results.

Retries have one owner, tenacity, and only for failures worth repeating: connection errors and
timeouts, HTTP 408/409/429 (Retry-After honoured) and 5xx, and answers that are not a complete
JSON object (cut off, prose only, an HTML error page). The OpenAI client itself never retries
(``max_retries=0``). Every attempt is reported to ``record_call`` so the daemon can account for
tokens and failures in ``llm_calls``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from total_recall import retry
from total_recall.errors import ExtractionError
from total_recall.extract.protocol import SYSTEM_PROMPT, parse_json_content, user_message
from total_recall.redact import redact

log = structlog.get_logger(__name__)

HYDE_ATTEMPTS = 2  # HyDE runs while a user waits for search results
HYDE_MAX_TOKENS = 300

HYDE_PROMPT = (
    "You help search a memory of past conversations between a developer and an AI coding "
    "assistant. Given a question, write a short passage (2-4 sentences) that would answer it as "
    "if quoted from those conversations: concrete decisions, problems, fixes, names, files and "
    "dates. Plausible guesses are fine; they are only used to find similar text. Answer with the "
    "passage only."
)

RERANK_ATTEMPTS = 2  # re-ranking runs while a user waits for search results
RERANK_MAX_TOKENS = 200
RERANK_PASSAGE_CHARS = 600  # of each result shown to the model

RERANK_PROMPT = (
    "You rank search results from a memory of past conversations between a developer and an AI "
    "coding assistant. Given a question and numbered passages (each a line or a memory of those "
    "conversations), list the numbers of the passages that help answer the question, the most "
    "helpful first; leave out the ones that do not help. Answer with JSON only: "
    '{"order": [3, 1, 7]}'
)

# Endpoints (base URL + model) that rejected response_format in this process: later calls skip it.
_NO_JSON_MODE: set[str] = set()
_NO_JSON_MODE_LOCK = threading.Lock()

RecordCall = Callable[[dict], None]


class _BadContent(Exception):
    """The endpoint answered, but not with a complete JSON object (retryable)."""


# ---------------------------------------------------------------------------------------------
# Retry policy


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, _BadContent) or retry.is_transient_api_error(exc)


def _log_retry(state: Any) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning(
        "llm_retry",
        attempt=state.attempt_number,
        error=f"{type(exc).__name__}: {exc}"[:300],
        wait=round(state.upcoming_sleep, 2),
    )


def _retrying(sleep: Callable[[float], None], attempts: int) -> Any:
    import tenacity

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(_is_transient),
        wait=retry.wait_seconds,
        stop=tenacity.stop_after_attempt(max(1, attempts)),
        sleep=sleep,
        before_sleep=_log_retry,
        reraise=True,
    )


def _error_text(exc: BaseException) -> str:
    """Everything the server said about a failed request, for matching and for llm_calls."""
    parts = [str(exc), str(getattr(exc, "message", "") or "")]
    body = getattr(exc, "body", None)
    if body is not None:
        parts.append(body if isinstance(body, str) else json.dumps(body, default=str))
    response = getattr(exc, "response", None)
    try:
        parts.append(response.text if response is not None else "")
    except Exception:  # noqa: BLE001 - a streamed or closed body has no text; the rest suffices
        pass
    return " ".join(p for p in parts if p)[:1000]


def _rejects_json_mode(exc: BaseException) -> bool:
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    text = _error_text(exc).lower()
    hints = ("response_format", "json_object", "json mode", "unsupported", "not supported")
    return any(hint in text for hint in hints)


# ---------------------------------------------------------------------------------------------
# Client


class _Endpoint:
    """One OpenAI-compatible chat endpoint: a lazily built client and the JSON-mode decision."""

    def __init__(self, settings: Any, timeout: float | None = None) -> None:
        self.base_url = settings.llm.base_url
        self.model = settings.llm.model
        self.timeout = settings.llm.timeout if timeout is None else timeout
        self.json_mode = settings.llm.json_mode.strip().lower()
        self._api_key = settings.llm_api_key() or "not-needed"  # local servers need no key
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        return f"{self.base_url}|{self.model}"

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key,
                    timeout=self.timeout,
                    max_retries=0,
                    http_client=retry.bounded_http_client(self.timeout),
                )
            return self._client

    def wants_json_mode(self) -> bool:
        if self.json_mode == "on":
            return True
        if self.json_mode == "off":
            return False
        with _NO_JSON_MODE_LOCK:
            return self.key not in _NO_JSON_MODE

    def chat(
        self, messages: list[dict], *, json_object: bool, on_rejected: Callable[[str], None], **extra: Any
    ) -> Any:
        """One chat completion; in json_mode "auto" a rejected response_format is dropped once."""
        use_json = json_object and self.wants_json_mode()
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0, **extra}
        if use_json:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            return self.client().chat.completions.create(**kwargs)
        except Exception as exc:
            if not (use_json and self.json_mode == "auto" and _rejects_json_mode(exc)):
                raise
            # Trigger: the server refused response_format (LM Studio, older vLLM, llama.cpp).
            # Why: JSON mode is a nicety; the prompt already demands JSON and the parser copes
            # with fences and prose. Outcome: this and every later call in this process go
            # without it.
            with _NO_JSON_MODE_LOCK:
                _NO_JSON_MODE.add(self.key)
            log.info("llm_json_mode_unsupported", endpoint=self.base_url, model=self.model)
            on_rejected(_error_text(exc))
            del kwargs["response_format"]
            return self.client().chat.completions.create(**kwargs)


_ENDPOINTS: dict[tuple, _Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def _shared_endpoint(settings: Any) -> _Endpoint:
    """The endpoint of these settings for a call a user waits on (HyDE, re-ranking), one per
    process: a new OpenAI client costs ~50 ms (its TLS context) before the first byte is sent. Its
    calls end within `search.llm_timeout` (at most llm.timeout, which bounds a batch's extraction):
    two attempts of a hung endpoint end before the CLI stops waiting for the daemon (client.py,
    60 s) and searches again in-process, which would wait for it again."""
    timeout = min(settings.search.llm_timeout, settings.llm.timeout)
    key = (settings.llm.base_url, settings.llm.model, timeout, settings.llm.json_mode, settings.llm_api_key())
    with _ENDPOINTS_LOCK:
        if key not in _ENDPOINTS:
            if len(_ENDPOINTS) >= 8:  # settings changed many times over (tests): start afresh
                _ENDPOINTS.clear()
            _ENDPOINTS[key] = _Endpoint(settings, timeout)
        return _ENDPOINTS[key]


def _content(response: Any) -> str | None:
    """The first choice's text; None when the body was not a chat completion at all."""
    choices = getattr(response, "choices", None)
    if not choices:
        return None
    message = getattr(choices[0], "message", None)
    return getattr(message, "content", None)


TOKEN_COUNT_CAP = 10**9  # far above any real call, far below SQLite's largest integer


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    return _tokens(getattr(usage, "prompt_tokens", None)), _tokens(getattr(usage, "completion_tokens", None))


def _tokens(value: Any) -> int:
    """A reported token count as a count.

    Trigger: the server's usage holds a non-number, a negative, NaN or a count beyond SQLite's
    integers. Why: a lying count must neither throw away a good answer, fail the batch when the
    call is recorded, nor refill the daily budget. Outcome: 0 for what is no count (as a missing
    usage), at most TOKEN_COUNT_CAP (a huge count still spends the budget).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return 0
    return int(min(value, TOKEN_COUNT_CAP))


def redact_input(obj: Any) -> Any:
    """A copy of ``obj`` with every string value redacted (keys and numbers untouched)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {key: redact_input(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_input(value) for value in obj]
    return obj


# ---------------------------------------------------------------------------------------------
# Extraction


class LLMExtractor:
    """Extraction through an OpenAI-compatible chat endpoint (settings section [llm])."""

    def __init__(
        self,
        settings: Any,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = 4,
        record_call: RecordCall | None = None,
    ) -> None:
        self.endpoint = _Endpoint(settings)
        self.max_attempts = max(1, max_attempts)
        self._sleep = sleep
        self._record_call = record_call

    def extract(self, input_obj: dict) -> dict:
        """The parsed (not yet validated) protocol output for one input object.

        Raises ExtractionError when every attempt failed or the endpoint refused the request.
        """
        import openai

        obj = redact_input(input_obj)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_message(obj)},
        ]
        count = len(obj.get("new_messages") or [])
        try:
            return _retrying(self._sleep, self.max_attempts)(self._attempt, messages, count)
        except _BadContent as exc:
            raise ExtractionError(
                f"{self.endpoint.model} at {self.endpoint.base_url} gave no usable JSON in "
                f"{self.max_attempts} attempt(s): {exc}"
            ) from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise ExtractionError(
                f"LLM endpoint {self.endpoint.base_url} failed: {_error_text(exc)[:300]}"
            ) from exc

    def _attempt(self, messages: list[dict], count: int) -> dict:
        def rejected(error: str) -> None:
            self._record(count, ok=False, error=f"response_format rejected: {error}"[:500])

        try:
            response = self.endpoint.chat(messages, json_object=True, on_rejected=rejected)
        except ValueError as exc:
            # Trigger: the HTTP body was not JSON (cut off in transit). Why: a transport fault,
            # not a refusal. Outcome: counted as unusable content, hence retried.
            self._record(count, ok=False, error=f"unreadable response body: {exc}"[:500])
            raise _BadContent(f"unreadable response body: {exc}") from exc
        except Exception as exc:
            self._record(count, ok=False, error=_failure(exc))
            raise
        prompt_tokens, completion_tokens = _usage(response)
        try:
            parsed = parse_json_content(_content(response))
        except ExtractionError as exc:
            self._record(count, prompt_tokens, completion_tokens, ok=False, error=f"unusable content: {exc}")
            raise _BadContent(str(exc)) from exc
        self._record(count, prompt_tokens, completion_tokens, ok=True)
        return parsed

    def _record(
        self,
        count: int,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        *,
        ok: bool,
        error: str | None = None,
    ) -> None:
        if self._record_call is None:
            return
        self._record_call(
            {
                "extractor": "llm",
                "model": self.endpoint.model,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "ok": ok,
                "error": error,
                "messages": count,
            }
        )


# ---------------------------------------------------------------------------------------------
# HyDE


def hyde(
    settings: Any,
    query: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
    record_call: RecordCall | None = None,
) -> str:
    """A hypothetical answer to ``query``, to be embedded and searched alongside the query.

    Raises ExtractionError when the endpoint fails or answers with nothing.
    """
    import openai

    endpoint = _shared_endpoint(settings)
    messages = [{"role": "system", "content": HYDE_PROMPT}, {"role": "user", "content": redact(query)}]

    def attempt() -> str:
        try:
            response = endpoint.chat(
                messages, json_object=False, on_rejected=lambda _: None, max_tokens=HYDE_MAX_TOKENS
            )
            text = (_content(response) or "").strip()
        except Exception as exc:
            _record_search_call(record_call, "hyde", endpoint, 0, 0, _failure(exc))
            raise
        error = None if text else "empty answer"
        _record_search_call(record_call, "hyde", endpoint, *_usage(response), error)
        if not text:
            raise _BadContent("empty answer")
        return text

    try:
        return _retrying(sleep, HYDE_ATTEMPTS)(attempt)
    except (_BadContent, openai.OpenAIError, ValueError) as exc:
        raise ExtractionError(f"HyDE via {endpoint.base_url} failed: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Re-ranking


def rerank(
    settings: Any,
    query: str,
    passages: list[str],
    *,
    sleep: Callable[[float], None] = time.sleep,
    record_call: RecordCall | None = None,
) -> list[int]:
    """The indexes of ``passages`` the model judged to help answer ``query``, the most helpful
    first (each at most once; the ones it left out are not listed); [] when it judged none to.

    Raises ExtractionError when the endpoint fails, or answers with no order at all or with an
    order of no passage number it was given (prose, numbers out of range): the caller keeps its own.
    """
    import openai

    endpoint = _shared_endpoint(settings)
    numbered = "\n\n".join(
        f"[{n}] {redact(' '.join(text.split()))[:RERANK_PASSAGE_CHARS]}" for n, text in enumerate(passages, 1)
    )
    messages = [
        {"role": "system", "content": RERANK_PROMPT},
        {"role": "user", "content": f"Question: {redact(query)}\n\nPassages:\n\n{numbered}"},
    ]

    def attempt() -> list[int]:
        try:
            response = endpoint.chat(
                messages, json_object=True, on_rejected=lambda _: None, max_tokens=RERANK_MAX_TOKENS
            )
        except Exception as exc:
            _record_search_call(record_call, "rerank", endpoint, 0, 0, _failure(exc))
            raise
        _record_search_call(record_call, "rerank", endpoint, *_usage(response), None)
        try:
            parsed = parse_json_content(_content(response))
        except ExtractionError as exc:
            raise _BadContent(str(exc)) from exc
        listed = parsed.get("order")
        order = _passage_order(listed, len(passages))
        if not order and listed != []:
            raise _BadContent(f"no passage number in {json.dumps(parsed)[:200]}")
        return order

    try:
        return _retrying(sleep, RERANK_ATTEMPTS)(attempt)
    except (_BadContent, openai.OpenAIError, ValueError) as exc:
        raise ExtractionError(f"re-ranking via {endpoint.base_url} failed: {exc}") from exc


def _passage_order(listed: Any, count: int) -> list[int]:
    """Passage numbers 1..count as 0-based indexes, in the order given, each once; anything else
    (a number out of range, a string that is no number, a repeat) is left out."""
    if not isinstance(listed, list):
        return []
    out: list[int] = []
    for item in listed:
        if isinstance(item, bool):
            continue
        try:
            number = int(item) if isinstance(item, (int, str)) else None
        except ValueError:
            number = None
        if number is not None and 1 <= number <= count and number - 1 not in out:
            out.append(number - 1)
    return out


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_error_text(exc)}"[:500]


def _record_search_call(
    record_call: RecordCall | None,
    kind: str,
    endpoint: _Endpoint,
    prompt_tokens: int,
    completion_tokens: int,
    error: str | None,
) -> None:
    """One call a search made ("hyde" or "rerank", state.SEARCH_CALLS), for llm_calls: what it
    spent counts against the daily token budget as extraction's does."""
    if record_call is not None:
        record_call(
            {
                "extractor": kind,
                "model": endpoint.model,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "ok": error is None,
                "error": error,
                "messages": 0,
            }
        )
