"""Issue 32: schedules fired through DST days, on each store (``backend``): an hourly and a daily
rule in Berlin, New York, Lord Howe (a 30-minute shift) and Cairo (its gap at midnight), across
the spring and autumn changes. A runner runs every slot holding work (15-minute slots) as its
time comes (the FixedClock); a real receiver on 127.0.0.1 counts the deliveries.

What is expected is written from the rule's definition, not from the cron code: each wall time
the rule names becomes an instant by the rule of ``--at`` (``when.to_utc``: a time in a gap
moves forward by the gap, a repeated time is its first occurrence), one occurrence per instant.
Each fires exactly once, in the slot that ends at or after it ("not before, within R")."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import iso, slot_for
from awty.when import to_utc

RESOLUTION = 15
SEC = timedelta(seconds=1)
# (zone, a UTC instant about 12 h before a change, occurrences of the hourly rule in the 24 h
# after it: the repeated hour fires once (23); Lord Howe's spring hour is 30 minutes (25))
CHANGES = [
    ("Europe/Berlin", "2027-03-27T13:00Z", 24),  # 02:00 -> 03:00
    ("Europe/Berlin", "2027-10-30T13:00Z", 23),  # 03:00 -> 02:00
    ("America/New_York", "2027-03-13T19:00Z", 24),  # 02:00 -> 03:00
    ("America/New_York", "2027-11-06T18:00Z", 23),  # 02:00 -> 01:00
    ("Australia/Lord_Howe", "2027-10-02T03:00Z", 25),  # 02:00 -> 02:30
    ("Australia/Lord_Howe", "2027-04-03T03:00Z", 23),  # 02:00 -> 01:30
    ("Africa/Cairo", "2027-04-29T10:00Z", 24),  # 00:00 -> 01:00
    ("Africa/Cairo", "2027-10-28T09:00Z", 23),  # 24:00 -> 23:00
]
RULES = {  # schedule name: (cron, the wall times it names on a day)
    "hourly": ("30 * * * *", [(h, 30) for h in range(24)]),
    "daily": ("30 2 * * *", [(2, 30)]),
    "midnight": ("0 0 * * *", [(0, 0)]),
}


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def expected(zone: str, walls: list[tuple[int, int]], start: datetime,
             end: datetime) -> list[datetime]:
    tz = ZoneInfo(zone)
    first = start.astimezone(tz).date() - timedelta(days=1)
    out = set()
    for d in range(4):
        day = first + timedelta(days=d)
        for h, m in walls:
            at = to_utc(datetime(day.year, day.month, day.day, h, m), tz)
            if start < at <= end:
                out.add(at)
    return sorted(out)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("zone, around, hourly", CHANGES)
def test_dst_days_fire_each_occurrence_once(home, backend, rx, zone, around, hourly):
    start = z(around) - timedelta(minutes=7)  # added between boundaries
    end = start + timedelta(hours=24)
    clock = FixedClock(start)
    with Awty(home, clock=clock, env={}, resolution=RESOLUTION, **backend.kw) as a:
        for name, (cron, _) in RULES.items():
            a.schedule(name, rx.url(f"/{name}"), cron=cron, tz=zone)
        while True:
            due = [slot for slot, _ in a.slots() if slot <= end]
            if not due:
                break
            clock.set(min(due) + SEC)
            a.run_slot(min(due))
        for name, (_, walls) in RULES.items():
            want = expected(zone, walls, start, end)
            got = rx.requests(f"/{name}")
            assert Counter(r.headers["x-awty-occurrence"] for r in got) == Counter(
                map(iso, want)), name
            for r in got:  # in its own slot: not before, within the resolution
                at = z(r.headers["x-awty-occurrence"])
                assert r.json()["slot"] == slot_for(at, RESOLUTION).strftime("%Y%m%d%H%M"), r
        assert a.history(outcome="skipped") == []
    assert len(rx.requests("/hourly")) == hourly
