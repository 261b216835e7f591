"""The one place "now" comes from. Everything else takes ``now`` as an argument or asks a
``Clock``; durations and timeouts use ``time.monotonic()`` instead, never the clock."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # Clock is a structural type for mypy; at run time nothing checks it


class Clock(Protocol):
    def now(self) -> datetime:
        """An aware UTC datetime."""
        ...


def file_time_now() -> float:
    """The real time in epoch seconds, whatever clock awty runs on: what file times (mtime,
    ctime) are compared with, since the file system stamps them in real time."""
    return time.time()


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that moves only when told to: for tests and for replaying a schedule."""

    def __init__(self, at: datetime):
        self._at = _aware(at)

    def now(self) -> datetime:
        return self._at

    def set(self, at: datetime) -> None:
        self._at = _aware(at)

    def advance(self, delta: timedelta | float) -> datetime:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        self._at += delta
        return self._at


def _aware(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def default_clock(env: dict[str, str] | None = None) -> Clock:
    """``AWTY_NOW`` (an ISO-8601 instant) pins the clock for a whole process: the demo and the
    subprocess tests use it to run slots "as cron would" without waiting for them."""
    pinned = (os.environ if env is None else env).get("AWTY_NOW")
    if pinned:
        return FixedClock(datetime.fromisoformat(pinned.replace("Z", "+00:00")))
    return SystemClock()
