"""The retry policy shared by the LLM and embedding clients (tenacity is its only owner)."""

from __future__ import annotations

import sys
import time
from typing import Any

RETRY_AFTER_CAP = 60.0  # seconds; a longer wait is better left to the queue's own backoff
MAX_BACKOFF = 10.0


def is_transient_api_error(exc: BaseException) -> bool:
    """Connection errors, timeouts, 408/409/429 and 5xx heal by themselves; other errors do not."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_CAP) if value is not None else None
    except ValueError:
        return None  # an HTTP-date Retry-After: fall back to exponential backoff


def wait_seconds(state: Any) -> float:
    """tenacity `wait`: what Retry-After asks, else 1 s, 2 s, 4 s ... capped at MAX_BACKOFF.

    Trigger: a transient failure. Why: endpoints recover and rate limits reset. Outcome: the
    next attempt after that pause.
    """
    exc = state.outcome.exception() if state.outcome else None
    hinted = retry_after(exc)
    return hinted if hinted is not None else min(MAX_BACKOFF, 2.0 ** (state.attempt_number - 1))


# --- a whole request within its timeout ------------------------------------------------------------

_DEADLINE = "total_recall_deadline"  # the request extension holding its monotonic deadline
_STREAMS: dict[str, Any] = {}  # the bounded stream class per HTTP library (httpx, or openai's httpx2)


def bounded_http_client(seconds: float) -> Any:
    """The HTTP client for an OpenAI client whose requests end within `seconds`, answer included.

    Trigger: every LLM and embeddings call. Why: the client's timeout bounds each read, so a server
    that sends a byte now and then (a proxy keeping a slow answer alive, a broken one) held a call,
    and the daemon's batch, for as long as it liked. Outcome: once `seconds` have passed since the
    request went out, the next read of its answer raises the library's ReadTimeout, which the
    OpenAI client reports as APITimeoutError and tenacity retries like any timeout; a call so cut
    ends within `seconds` plus one read's wait.
    """
    import openai

    def start(request: Any) -> None:
        request.extensions = {**request.extensions, _DEADLINE: time.monotonic() + seconds}

    def bound(response: Any) -> None:
        deadline = response.request.extensions.get(_DEADLINE)
        if deadline is not None:
            response.stream = _bounded_stream(response)(response.stream, deadline, seconds, response.request)

    return openai.DefaultHttpxClient(event_hooks={"request": [start], "response": [bound]})


def _bounded_stream(response: Any) -> Any:
    """A byte-stream class of the response's HTTP library that stops at a deadline."""
    library = sys.modules[type(response).__module__.partition(".")[0]]
    if library.__name__ not in _STREAMS:

        class Bounded(library.SyncByteStream):
            def __init__(self, inner: Any, deadline: float, seconds: float, request: Any) -> None:
                self.inner, self.deadline, self.seconds, self.request = inner, deadline, seconds, request

            def __iter__(self) -> Any:
                for chunk in self.inner:
                    if time.monotonic() > self.deadline:
                        raise library.ReadTimeout(
                            f"no complete answer within {self.seconds:g} s", request=self.request
                        )
                    yield chunk

            def close(self) -> None:
                self.inner.close()

        _STREAMS[library.__name__] = Bounded
    return _STREAMS[library.__name__]
