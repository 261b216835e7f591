"""What an ``http`` callback's answer means (SPEC 4): the status, ``Retry-After`` and a JSON
body's ``recheck_at``/``recheck_in`` read into a Result. 2xx -> DONE, or RECHECK when the body
asks for it or the status is 202 with ``Retry-After``; 410 -> GONE; 408/425/429/5xx -> RETRY
(honouring ``Retry-After``); 3xx and other 4xx -> FAIL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..clock import Clock
from ..model import Answer, Result
from ..storable import text_of
from .base import recheck_from_text, truncate

OUTPUT_CHARS = 500  # Result.output keeps this much of the response body
RETRYABLE_STATUS = frozenset({408, 425, 429})


def _parse_retry_after(raw: bytes | None, now: datetime) -> float | None:
    """Retry-After as delta-seconds or an HTTP-date; None when absent or unreadable."""
    if raw is None:
        return None
    s = raw.decode("latin-1").strip()
    if s.isascii() and s.isdigit():  # not int(): "²" is a digit, 5000 digits are too many
        return float(s)  # absurdly large -> inf: beyond any horizon
    from email.utils import parsedate_to_datetime  # an HTTP-date is rare: not at start-up

    try:
        at = parsedate_to_datetime(s)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return max(0.0, (at - now).total_seconds())


def result_of(status: int, body: bytes, retry_after_raw: bytes | None, truncated: bool,
              duration: float, clock: Clock, cap: int) -> Result:
    """The Result of one answered attempt; ``body`` is at most ``cap`` bytes (``truncated``
    when the receiver sent more)."""
    output = truncate(text_of(body), OUTPUT_CHARS) if body else None
    if 200 <= status < 300:
        if b"recheck_" in body:
            now = clock.now()
            try:
                at = recheck_from_text(body, now)
            except (ValueError, TypeError, OverflowError, OSError) as e:
                return Result(Answer.FAIL, status=status, output=output, duration=duration,
                              error=f"http {status} with a malformed recheck value ({e})")
            if at is not None:
                return Result(Answer.RECHECK, recheck_at=at, status=status, output=output,
                              duration=duration)
        if status == 202 and retry_after_raw is not None:
            now = clock.now()
            secs = _parse_retry_after(retry_after_raw, now)
            try:
                if secs is None:
                    raise ValueError
                at = now + timedelta(seconds=secs)
            except (ValueError, OverflowError):
                shown = retry_after_raw[:60].decode("latin-1")
                return Result(Answer.FAIL, status=status, output=output, duration=duration,
                              error=f"http 202 with a malformed Retry-After {shown!r}")
            return Result(Answer.RECHECK, recheck_at=at, retry_after=secs, status=status,
                          output=output, duration=duration)
        return Result(Answer.DONE, status=status, output=output, duration=duration)
    if status == 410:
        return Result(Answer.GONE, status=status, output=output, duration=duration)
    if status in RETRYABLE_STATUS or 500 <= status < 600:
        secs = None
        if retry_after_raw is not None:
            secs = _parse_retry_after(retry_after_raw, clock.now())
        error = f"http {status}"
        if truncated:
            error += f" (response over {cap} bytes, cut)"
        return Result(Answer.RETRY, retry_after=secs, status=status, output=output,
                      duration=duration, error=error)
    if 300 <= status < 400:
        error = f"http {status} (redirects are not followed)"
    else:
        error = f"http {status}"
    return Result(Answer.FAIL, status=status, output=output, duration=duration, error=error)
