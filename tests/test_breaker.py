"""The breaker rule, as a table (awty/executors/breaker.py): at least ``threshold`` failures
among the last 20 outcomes, and at least half of them; a host's breaker needs failures on two
endpoints or more, or one that concerns the whole host."""

from __future__ import annotations

import pytest

from awty.executors.breaker import HOST_WIDE, WINDOW, Breaker


def play(outcomes: str, threshold: int = 3, spread: bool = False) -> list[bool]:
    """``outcomes``: ``.`` a success, a letter a failure at that endpoint, ``*`` host-wide.
    Returns whether the breaker is open after each."""
    b = Breaker()
    out = []
    for o in outcomes:
        if o == ".":
            b.success()
        else:
            b.failure(threshold, HOST_WIDE if o == "*" else "/" + o, spread=spread)
        out.append(b.open)
    return out


@pytest.mark.parametrize("outcomes, opens_at", [
    ("aaa", 2),                      # threshold reached, all failures
    ("aa.a", 3),                     # 3 of 4: a ratio, not a streak
    ("a.a.a", 4),                    # 3 of 5, over half
    ("a..a..a..a..", None),          # 4 of 12: a third, never
    (".........." + "aaa", None),    # 3 of 13: threshold but under half
    ("." * 30 + "a" * 10, 39),       # the old successes leave the window: 10 of 20 at the 40th
    ("aa", None),                    # under the threshold
])
def test_endpoint_breaker(outcomes, opens_at):
    got = play(outcomes)
    first = got.index(True) if True in got else None
    assert first == opens_at
    if first is not None:
        assert all(got[first:])  # once open, open for the rest of the run


@pytest.mark.parametrize("outcomes, opens", [
    ("aaaa", False),    # one endpoint failing: its own breaker's business
    ("aab", True),      # two endpoints
    ("aa*", True),      # a connection that cannot be made: the whole host
    ("***", True),
    ("a..b..a..b..", False),  # a third: under half
])
def test_host_breaker(outcomes, opens):
    assert play(outcomes, spread=True)[-1] is opens


def test_window_counts_stay_right():
    b = Breaker()
    for i in range(200):
        if i % 7 == 0:
            b.failure(1000, "/x")
        else:
            b.success()
        assert b.failures == sum(w is not None for w in b.window)
        assert len(b.window) <= WINDOW
