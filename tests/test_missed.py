"""The missed-run policy as a pure decision (awty/missed.py): what fires at the claim of an
occurrence after downtime, what is recorded as skipped, and which occurrence is next."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from awty.errors import InvalidInput
from awty.missed import (
    COUNT_LIMIT, DEFAULT_WINDOW, CatchUp, Missed, catch_up, check_window, due_slot,
    parse_missed, parse_window,
)
from awty.recurrence import Rule, finest_interval, make_rule, occurrences, parse_cron
from awty.slots import slot_for


def z(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cron(expr, zone="UTC"):
    return Rule(parse_cron(expr), None, None, zone)


HOURLY = cron("0 * * * *")


def test_on_time_nothing_is_missed():
    # claimed in its own slot, or up to one slot (the grace) after it: a slow or late run
    for now in ("2027-05-12T02:00:01Z", "2027-05-12T02:14:59Z", "2027-05-12T02:15:00Z"):
        got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z(now), policy=Missed.SKIP, resolution=15)
        assert got == CatchUp(True, (), 0, None, z("2027-05-12T03:00Z")), now
    got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z("2027-05-12T02:15:01Z"), policy=Missed.SKIP,
                   resolution=15)
    assert got == CatchUp(False, (), 1, "1 occurrence missed 2027-05-12 02:00 (UTC), policy skip",
                          z("2027-05-12T03:00Z"))


@pytest.mark.parametrize("policy, fire_claimed, extra, skipped, reason", [
    (Missed.ONCE, True, [], 3,
     "3 occurrences missed 2027-05-12 03:00–05:00 (UTC), policy once"),
    (Missed.ALL, True, ["2027-05-12T03:00Z", "2027-05-12T04:00Z", "2027-05-12T05:00Z"], 0, None),
    (Missed.SKIP, False, [], 4,
     "4 occurrences missed 2027-05-12 02:00–05:00 (UTC), policy skip"),
])
def test_runners_stopped_three_hours(policy, fire_claimed, extra, skipped, reason):
    """The 02:00 occurrence waited, pending, while nothing ran from 01:50 to 05:20."""
    got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z("2027-05-12T05:20Z"), policy=policy,
                   resolution=15)
    assert got == CatchUp(fire_claimed, tuple(z(e) for e in extra), skipped, reason,
                          z("2027-05-12T06:00Z"))


def test_an_occurrence_within_the_grace_is_not_missed_but_due():
    # 05:00's slot began 10 minutes ago (grace: one 15-minute slot): it is the next, not missed
    got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z("2027-05-12T05:10Z"), policy=Missed.ONCE,
                   resolution=15)
    assert got.next == z("2027-05-12T05:00Z")
    assert got.reason == "2 occurrences missed 2027-05-12 03:00–04:00 (UTC), policy once"
    # its job goes into the next slot, where a run still to come fires it
    assert due_slot(got.next, z("2027-05-12T05:10Z"), 15) == z("2027-05-12T05:15Z")


def test_grace_is_a_parameter():
    got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z("2027-05-12T05:20Z"), policy=Missed.SKIP,
                   resolution=15, grace=4 * 3600)
    assert got == CatchUp(True, (), 0, None, z("2027-05-12T03:00Z"))


def test_all_is_bounded_by_the_missed_window():
    got = catch_up(HOURLY, z("2027-05-12T02:00Z"), z("2027-05-12T05:20Z"), policy=Missed.ALL,
                   resolution=15, window=2 * 3600)
    # the window starts at 03:20: 02:00 and 03:00 are older; 04:00 and 05:00 fire
    assert got == CatchUp(False, (z("2027-05-12T04:00Z"), z("2027-05-12T05:00Z")), 2,
                          "2 occurrences missed 2027-05-12 02:00–03:00 (UTC), policy all: "
                          "older than the missed window (2h)", z("2027-05-12T06:00Z"))


def test_a_week_down_with_all_fires_the_last_day_only():
    every_5 = cron("*/5 * * * *")
    now = z("2027-05-19T02:02Z")
    got = catch_up(every_5, z("2027-05-12T02:00Z"), now, policy=Missed.ALL, resolution=5)
    assert not got.fire_claimed
    # the window is 2027-05-18 02:02 to now; 02:00 today is within the grace: the next
    assert got.extra == tuple(occurrences(every_5, z("2027-05-18T02:02Z"),
                                          until=z("2027-05-19T01:55Z")))
    assert len(got.extra) == 24 * 12 - 1 and got.extra[0] == z("2027-05-18T02:05Z")
    assert got.skipped == 6 * 24 * 12 + 1  # 02:00 on the 12th to 02:00 on the 18th
    assert got.reason == ("1729 occurrences missed 2027-05-12 02:00–2027-05-18 02:00 (UTC), "
                          "policy all: older than the missed window (1d)")
    assert got.next == z("2027-05-19T02:00Z")


def test_a_huge_count_says_more_than():
    every_minute = cron("* * * * *")
    got = catch_up(every_minute, z("2027-01-01T00:00Z"), z("2027-03-01T00:00Z"),
                   policy=Missed.ONCE, resolution=1)
    assert got.skipped == COUNT_LIMIT + 1
    assert got.reason == (f"more than {COUNT_LIMIT:,} occurrences missed since 2027-01-01 00:01 "
                          "(UTC), policy once")
    assert got.next == z("2027-02-28T23:59Z")  # its slot began a minute (the grace) ago


def test_the_reason_speaks_the_schedules_zone_and_counts_one():
    r = cron("30 2 * * *", "Europe/Berlin")
    got = catch_up(r, z("2027-03-27T01:30Z"), z("2027-03-28T09:00Z"), policy=Missed.ONCE,
                   resolution=15)
    # the 28th's 02:30 did not exist: it was 03:30 CEST
    assert got.reason == "1 occurrence missed 2027-03-28 03:30 (Europe/Berlin), policy once"
    assert got.next == z("2027-03-29T00:30Z")


def test_every_rules_catch_up_too():
    r = make_rule(every="2h", start=z("2027-05-12T00:30Z"), tz="UTC", now=z("2027-05-12T00:00Z"))
    got = catch_up(r, z("2027-05-12T00:30Z"), z("2027-05-12T09:00Z"), policy=Missed.ONCE,
                   resolution=30)
    assert got.skipped == 3 and got.next == z("2027-05-12T08:30Z")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["*/5 * * * *", "0 * * * *", "0 9 * * mon-fri", "30 2 * * *",
                        "15,45 */3 * * *"]),
       st.sampled_from(["UTC", "Europe/Berlin", "Australia/Lord_Howe", "Africa/Cairo"]),
       st.sampled_from(list(Missed)), st.integers(0, 4 * 24 * 60), st.sampled_from([5, 15, 60]),
       st.sampled_from([3600.0, DEFAULT_WINDOW, 3 * 86400.0]), st.integers(0, 365))
@pytest.mark.slow
def test_every_missed_occurrence_is_fired_or_counted(expr, zone, policy, late, resolution,
                                                      window, day):
    r = cron(expr, zone)
    assume(finest_interval(r) >= resolution * 60)  # a finer rule is refused at add
    claimed = occurrences(r, datetime(2027, 1, 1, tzinfo=UTC) + timedelta(days=day), limit=1)[0]
    now = slot_for(claimed, resolution) + timedelta(minutes=late, seconds=1)
    got = catch_up(r, claimed, now, policy=policy, resolution=resolution, window=window)
    between = occurrences(r, claimed, until=got.next - timedelta(microseconds=1))
    assert got.next > claimed and got.next not in between
    # the next is not missed: its slot began at most one slot (the grace) ago
    assert slot_for(got.next, resolution) >= now - timedelta(minutes=2 * resolution)
    fired = int(got.fire_claimed) + len(got.extra)
    assert fired + got.skipped == 1 + len(between)  # nothing silent
    assert list(got.extra) == sorted(got.extra) and set(got.extra) <= set(between)
    assert (got.reason is None) == (got.skipped == 0)
    if policy is Missed.SKIP:
        assert fired <= 1 and (fired == 0 or not between)
    if policy is Missed.ONCE:
        assert got.fire_claimed and not got.extra
    late = [o for o in [claimed, *between]  # missed: the slot passed over a slot (grace) ago
            if slot_for(o, resolution) < now - timedelta(minutes=resolution)]
    if policy is Missed.ALL:
        assert all(e >= now - timedelta(seconds=window) for e in got.extra)
        assert got.skipped == sum(1 for o in late if o < now - timedelta(seconds=window))
    else:
        assert got.skipped == len(late) - (1 if late and got.fire_claimed else 0)


# --- reading the options -------------------------------------------------------------------
def test_parse_missed():
    assert parse_missed(None) is Missed.ONCE
    assert parse_missed(" ALL ") is Missed.ALL
    with pytest.raises(InvalidInput, match=r"^missed: 'sometimes' is not one of skip, once, all"):
        parse_missed("sometimes")


def test_parse_window():
    assert parse_window(None) == DEFAULT_WINDOW == 86400
    assert parse_window("6h") == 21600
    with pytest.raises(InvalidInput, match=r"^missed-window: must be more than zero"):
        parse_window("0s")
    with pytest.raises(InvalidInput, match=r"^missed-window: not a duration"):
        parse_window("a while")


def test_a_window_holding_too_many_occurrences_is_refused():
    assert check_window(cron("* * * * *"), 86400) == 86400
    assert check_window(cron("0 * * * *"), 365 * 86400) == 365 * 86400
    with pytest.raises(InvalidInput, match=r"^missed-window: 7d holds up to 10,080 occurrences"):
        check_window(cron("* * * * *"), 7 * 86400)


def test_due_slot():
    assert due_slot(z("2027-05-12T02:05Z"), z("2027-05-12T02:00:30Z"), 15) == z(
        "2027-05-12T02:15Z")
    assert due_slot(z("2027-05-12T02:00Z"), z("2027-05-12T02:30:00Z"), 15) == z(
        "2027-05-12T02:45Z")
    assert due_slot(z("2027-05-12T02:00Z"), z("2027-05-12T02:00Z"), 15) == z("2027-05-12T02:15Z")
