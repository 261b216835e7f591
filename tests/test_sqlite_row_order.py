"""A batch's rows go into future_job in the order runs take them, (next_check_at, id), whatever
order they were given in: a slot's rows then sit together in the table and a run's claims and
deletes dirty a few pages, not one per job. What the caller gets back keeps its own order."""

from __future__ import annotations

import random
from datetime import timedelta

from awty.api import Awty

URL = "https://example.com/hook"


def test_a_batch_is_stored_in_run_order_and_answered_in_the_order_given(home, clock):
    base = clock.now() + timedelta(hours=1)
    specs = [{"target": URL, "at": (base + timedelta(minutes=15 * (i % 3))).isoformat(),
              "payload": {"n": i}} for i in range(300)]
    specs += [{"target": URL, "at": base.isoformat(), "payload": {"n": "keyed"},
               "idempotency_key": "k"}] * 2
    random.Random(7).shuffle(specs)
    with Awty(home, clock=clock, env={}) as a:
        results = a.add_many(specs)
        assert [r.job.payload for r in results] == [s["payload"] for s in specs]
        assert sum(r.created for r in results) == 301
        stored = [r[0] for r in a.store.conn.execute("SELECT id FROM future_job ORDER BY rowid")]
        in_run_order = [j.id for j in a.list()]
        assert len(stored) == 301
        assert stored == in_run_order
        # given in that order, the rows would not have been: the test can tell
        given = list(dict.fromkeys(r.job.id for r in results))
        assert given != in_run_order
