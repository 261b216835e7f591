"""Per-token rate limits (``awty token new NAME --rate 100/s``): a token bucket per token in
each serve process, holding up to the rate's count and refilled evenly over its period. The
limit is per process: behind N serve processes a token gets up to N times its rate. Sharing it
would put a store write on every request, the path whose throughput is a target."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..model import ApiToken
from ..tokens import parse_rate


class _Bucket:
    __slots__ = ("rate", "size", "per_second", "level", "at")

    def __init__(self, rate: str, now: float) -> None:
        count, period = parse_rate(rate)
        self.rate, self.size, self.per_second = rate, float(count), count / period
        self.level, self.at = self.size, now


class Limiter:
    """``wait(token)``: None when the request may go ahead (and is counted), else the seconds
    until the token has room again (a whole number, for ``Retry-After``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.buckets: dict[str, _Bucket] = {}

    def wait(self, token: ApiToken) -> int | None:
        if token.rate is None:
            return None
        now = self.clock()
        b = self.buckets.get(token.name)
        if b is None or b.rate != token.rate:  # a token made anew under its name: its rate
            b = self.buckets[token.name] = _Bucket(token.rate, now)
        b.level = min(b.size, b.level + (now - b.at) * b.per_second)
        b.at = now
        if b.level >= 1:
            b.level -= 1
            return None
        return max(1, math.ceil((1 - b.level) / b.per_second))
