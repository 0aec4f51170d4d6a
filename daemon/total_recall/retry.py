"""The retry policy shared by the LLM and embedding clients (tenacity is its only owner)."""

from __future__ import annotations

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
