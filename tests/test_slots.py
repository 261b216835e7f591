from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from awty.slots import (
    RESOLUTIONS, backoff_delay, check_resolution, current_slot, format_duration, from_iso, iso,
    parse_duration, parse_slot_id, slot_for, slot_id,
)
from awty.when import parse_when


def utc(*a):
    return datetime(*a, tzinfo=UTC)


@pytest.mark.parametrize("due, r, slot", [
    (utc(2026, 11, 22, 10, 5), 15, utc(2026, 11, 22, 10, 15)),
    (utc(2026, 11, 22, 10, 15), 15, utc(2026, 11, 22, 10, 15)),  # on the boundary: itself
    (utc(2026, 11, 22, 10, 15, 0, 1), 15, utc(2026, 11, 22, 10, 30)),
    (utc(2026, 11, 22, 23, 59, 1), 15, utc(2026, 11, 23, 0, 0)),
    (utc(2026, 11, 22, 10, 5, 30), 1, utc(2026, 11, 22, 10, 6)),
    (utc(2026, 11, 22, 10, 5), 60, utc(2026, 11, 22, 11, 0)),
    (utc(2026, 11, 22, 10, 5), 10, utc(2026, 11, 22, 10, 10)),
    (utc(2026, 12, 31, 23, 50), 20, utc(2027, 1, 1, 0, 0)),
])
def test_slot_for_table(due, r, slot):
    assert slot_for(due, r) == slot


def test_current_slot_is_the_boundary_just_passed():
    assert current_slot(utc(2026, 11, 22, 10, 14, 59), 15) == utc(2026, 11, 22, 10, 0)
    assert current_slot(utc(2026, 11, 22, 10, 15), 15) == utc(2026, 11, 22, 10, 15)


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1),
                    timezones=st.just(UTC)), st.sampled_from(RESOLUTIONS))
def test_rounding_invariants(due, r):
    slot = slot_for(due, r)
    assert slot >= due  # never before the due time
    assert slot - due < timedelta(minutes=r)  # at most one resolution after it
    assert slot_for(slot, r) == slot  # idempotent on boundaries
    assert current_slot(slot, r) == slot
    assert current_slot(due, r) <= due
    assert slot.second == 0 and slot.microsecond == 0
    assert (slot.hour * 60 + slot.minute) % r == 0
    assert parse_slot_id(slot_id(slot)) == slot


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31),
                    timezones=st.just(UTC)))
def test_iso_round_trip_is_ordered(at):
    # years before 1000 too: glibc's %Y does not pad them ('272-05-04…', which
    # fromisoformat refuses: a schedule started in year 272 broke every read of the schedules)
    at = at.replace(microsecond=0)
    assert from_iso(iso(at)) == at
    later = at + timedelta(seconds=1) if at.year < 9999 else at
    assert iso(at) <= iso(later) and len(iso(at)) == 20


def test_bad_resolution():
    with pytest.raises(ValueError, match="divide the hour"):
        check_resolution(7)


@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("1w", 604800),
    ("45", 45), (30, 30), ("1.5h", 5400),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "h", "2x", "1h 3", "-5m", "1h-2m", "abc", True, -1])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration():
    assert format_duration(5400) == "1h30m"
    assert format_duration(0) == "0s"


def test_parse_slot_id_rejects():
    for bad in ["2026112210", "20261322101500", "202613221015", "abc"]:
        with pytest.raises(ValueError):
            parse_slot_id(bad)


def test_parse_when_forms():
    now = utc(2026, 11, 22, 10, 0)
    assert parse_when("now", now) == now
    assert parse_when("2026-11-22T12:00:00Z", now) == utc(2026, 11, 22, 12)
    assert parse_when("2026-11-22T12:00:00+02:00", now) == utc(2026, 11, 22, 10)
    assert parse_when("1795000000", now) == datetime.fromtimestamp(1795000000, UTC)
    berlin = ZoneInfo("Europe/Berlin")
    assert parse_when("2026-11-22 12:00", now, berlin) == utc(2026, 11, 22, 11)
    assert parse_when("Nov 23 2026 9am", now, berlin) == utc(2026, 11, 23, 8)


# DST cases of parse_when (Berlin, New York, Lord Howe, Cairo) are in test_times.py.


def test_slots_across_dst_are_evenly_spaced_in_utc():
    # Across Berlin's fall-back night, 15-minute slots keep marching in UTC: none repeats,
    # none is skipped, although local wall time repeats an hour.
    start = utc(2026, 10, 24, 23, 0)
    slots = [slot_for(start + timedelta(minutes=7 * i), 15) for i in range(60)]
    distinct = sorted(set(slots))
    assert all(b - a == timedelta(minutes=15) for a, b in zip(distinct, distinct[1:]))
    local = [s.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") for s in distinct]
    assert len(local) != len(set(local))  # wall clock repeated, slots did not


def test_backoff_delay():
    steps = (10.0, 30.0, 120.0)
    assert [backoff_delay(i, steps) for i in (1, 2, 3, 4, 9)] == [10, 30, 120, 120, 120]
