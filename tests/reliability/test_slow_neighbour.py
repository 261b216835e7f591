"""A slow endpoint does not stall its healthy neighbours (issue 10, item 6): the breaker trips on
a failure ratio over a window, per endpoint, so one host's hanging path is deferred while the
host's other paths are all delivered in the same run. Real runner, real receiver, real SQLite."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from helpers import db_rows

from awty.api import Awty
from awty.testing.receiver import Receiver

TIMEOUT = 1.0


@pytest.mark.slow
def test_ten_percent_hanging_do_not_defer_the_other_ninety(home, clock):
    with Receiver() as rx:
        rx.script("/slow", hang=True)
        # 8 connections per host: the hanging requests fill them within the first 80 jobs, the
        # moment a streak breaker used to open the host and defer every /ok job left.
        a = Awty(home, clock=clock, env={}, quick_retries=0, per_host_concurrency=8,
                 timeout=TIMEOUT)
        jobs = [a.add(rx.url("/slow" if i % 10 == 0 else "/ok"), in_="1m").job
                for i in range(300)]
        slot = jobs[0].next_check_at
        clock.set(slot)
        started = time.monotonic()
        s = a.run_slot(slot)
        elapsed = time.monotonic() - started
        ok = [j for j in jobs if j.target.endswith("/ok")]
        slow = [j for j in jobs if j.target.endswith("/slow")]
        assert s.outcomes == {"done": len(ok)}, s
        assert len(rx.requests("/ok")) == len(ok) == 270
        assert Counter(r.job_id for r in rx.requests("/ok")) \
            == {j.id: 1 for j in ok}
        # /slow: the first ones time out (the 5th opens its breaker; those already in flight,
        # or let in by a slot freed before it, finish), the others are deferred to the next
        # slot without an attempt counted.
        assert s.retried + s.deferred == len(slow) and s.retried <= 2 * 8 and s.deferred > 0
        assert elapsed < 3 * TIMEOUT + 2, elapsed
        rows = {r["id"]: r for r in db_rows(home, "future_job")}
        assert set(rows) == {j.id for j in slow}
        a.close()
