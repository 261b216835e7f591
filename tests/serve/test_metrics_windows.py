"""``awty_pending_jobs`` by window: the slots of the next 24 hours read from the slot index's
range and the later jobs as the total less those (``metrics.store_families``) give what
bucketing every slot with work gives, at each window's edges, on both stores."""

from __future__ import annotations

from datetime import timedelta

from awty.api import Awty
from awty.clock import FixedClock
from awty.serve.metrics import WINDOWS, store_families
from helpers import T0, URL


def by_slot(a: Awty) -> dict[str, float]:
    """Every slot with work, each in the first window its distance from now fits."""
    now, counts = a.clock.now(), dict.fromkeys((w for w, _ in WINDOWS), 0.0)
    for slot, n in a.slots():
        ahead = (slot - now).total_seconds()
        counts[next(w for w, top in WINDOWS if top is None or ahead <= top)] += n
    return counts


def windows(a: Awty) -> dict[str, float]:
    (family,) = [f for f in store_families(a) if f.name == "awty_pending_jobs"]
    return {s.labels["window"]: s.value for s in family.samples}


def test_pending_by_window(tmp_path, backend):
    clock = FixedClock(T0)
    with Awty(tmp_path / "home", clock=clock, env={}, **backend.kw) as a:
        assert windows(a) == dict.fromkeys((w for w, _ in WINDOWS), 0.0)
        for when in ("5m", "40m", "1h", "5h", "1d", "2d", "30d", "30d", "300d"):
            a.add(URL, in_=when)
        a.add_many([{"target": URL, "in": f"{h}h"} for h in range(1, 60)])
        for step in (0, 30 * 60, 7 * 60 + 48, 12, 23 * 3600, 3600):  # the edges: 10:15 is 0
            clock.advance(timedelta(seconds=step))  # ahead of 10:07:12+7:48; 1 s past it…
            got = windows(a)
            assert got == by_slot(a), (clock.now(), got)
            assert sum(got.values()) == 68
        assert got["past"] > 0 and got["later"] > 0 and got["24h"] > 0
