"""Circuit breakers for the http executor: a host or an endpoint that keeps failing stops being
tried for the rest of the run, and its remaining jobs are deferred to the next slot (no attempt
counted) instead of each waiting out its own timeout.

The rule (docs/reliability.md): a breaker looks at the last ``WINDOW`` outcomes and opens when
at least ``threshold`` of them are failures *and* failures are at least half of them. A failure
is a connection that cannot be made (refused, unreachable, DNS, the proxy), a timeout, or a
connection dropped before an answer; any HTTP answer, whatever its status, is a success.

- Each endpoint (scheme, host, port and path, without the query) has its own breaker: the
  timeouts of ``/slow`` defer ``/slow``'s jobs only.
- The host's breaker sees every outcome of the host, but opens on timeouts and dropped
  connections only when they come from two endpoints or more (one failing path is its own
  breaker's business). A connection that cannot be made is the host's failure wherever it goes.
Once open, a breaker stays open until the run ends (the executor closes, or a catch-up goes on
to its next slot on the same executor: ``HttpExecutor.new_run``)."""

from __future__ import annotations

from collections import deque

WINDOW = 20
HOST_WIDE = ""  # the "path" of a failure that concerns the whole host (no connection)


class Breaker:
    __slots__ = ("window", "failures", "open")

    def __init__(self) -> None:
        self.window: deque[str | None] = deque(maxlen=WINDOW)  # None: a success
        self.failures = 0
        self.open = False

    def reset(self) -> None:
        self.window.clear()
        self.failures = 0
        self.open = False

    def success(self) -> None:  # once per callback delivered: kept lean
        w = self.window
        if self.failures and len(w) == WINDOW and w[0] is not None:
            self.failures -= 1
        w.append(None)

    def failure(self, threshold: int, where: str = HOST_WIDE, *,
                spread: bool = False) -> None:
        """Count a failure at ``where`` (an endpoint's path, or HOST_WIDE). With ``spread``
        (a host's breaker), failures all on one endpoint do not open it."""
        self._push(where)
        if self.open or self.failures < threshold or 2 * self.failures < len(self.window):
            return
        if spread:
            places = {w for w in self.window if w is not None}
            if len(places) < 2 and HOST_WIDE not in places:
                return
        self.open = True

    def _push(self, item: str | None) -> None:
        w = self.window
        if len(w) == WINDOW and w[0] is not None:
            self.failures -= 1
        w.append(item)
        if item is not None:
            self.failures += 1
