"""Schedules' time rules (awty/recurrence.py): reading them, their occurrences through DST, the
refusals. Tables for the cases people hit, hypothesis properties against a brute-force reading
of the rule (every matching wall time, made an instant by when.to_utc)."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awty.errors import InvalidInput
from awty.recurrence import (
    Rule, check_rule, describe, finest_interval, make_rule, next_occurrence, occurrences,
    parse_cron, parse_name, parse_zone,
)
from awty.when import to_utc

NOW = datetime(2027, 5, 12, 8, 7, tzinfo=UTC)
YEAR = 365 * 86400.0


def z(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cron(expr, zone="Europe/Berlin"):
    return Rule(parse_cron(expr), None, None, zone)


def stamps(ats):
    return [a.strftime("%Y-%m-%dT%H:%MZ") for a in ats]


# --- reading a rule ------------------------------------------------------------------------
@pytest.mark.parametrize("text, stored", [
    ("0 9 * * mon-fri", "0 9 * * mon-fri"),
    ("  0   9 * *   MON-FRI ", "0 9 * * mon-fri"),
    ("*/15 9-17 * * 1-5", "*/15 9-17 * * 1-5"),
    ("0 0,12 1 */2 *", "0 0,12 1 */2 *"),
    ("5 4 * * sun", "5 4 * * sun"),
    ("0 0 * * 7", "0 0 * * 7"),  # Sunday, as 0
    ("0 0 1 jan,jul *", "0 0 1 jan,jul *"),
    ("23 0-20/2 * * *", "23 0-20/2 * * *"),
    ("0 0 29 2 *", "0 0 29 2 *"),
    ("@hourly", "0 * * * *"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"),
    ("@yearly", "0 0 1 1 *"),
    ("@ANNUALLY", "0 0 1 1 *"),
])
def test_cron_expressions_read(text, stored):
    assert parse_cron(text) == stored


@pytest.mark.parametrize("text, says", [
    ("", "is not a cron expression"),
    ("0 9 * *", "is not a cron expression"),
    ("0 0 9 * * mon", "six fields: awty's rules have no seconds field"),
    ("60 * * * *", "minute field '60' in '60 * * * *': 60 is out of range (0-59)"),
    ("0 24 * * *", "hour field '24'"),
    ("0 0 0 * *", "day of month field '0'"),
    ("0 0 * 13 *", "month field '13'"),
    ("0 0 * * 8", "day of week field '8'"),
    ("0 9 * * mond", "'mond' is not a day of week (sun, mon, tue, wed, thu, fri, sat or 0-7)"),
    ("0 9 * janu *", "'janu' is not a month"),
    ("0 9 * * fri-mon", "the range fri-mon runs backwards"),
    ("*/0 * * * *", "a step of 0"),
    ("0 0 L * *", "day of month field 'l'"),  # Quartz's extensions are not standard cron
    ("0 0 * * 5#2", "day of week field '5#2'"),
    ("0 0 * * 5l", "'5l' is not a day of week"),
    ("0 0 ? * *", "day of month field '?'"),
    ("1,,2 * * * *", "minute field '1,,2'"),
    ("0 0 30 2 *", "never fires: none of its months has that day"),
    ("@reboot", "@reboot runs at boot, not on a schedule"),
    ("@fortnightly", "unknown shorthand '@fortnightly'"),
])
def test_bad_cron_expressions_name_the_field(text, says):
    with pytest.raises(InvalidInput) as e:
        parse_cron(text)
    message = str(e.value)
    assert message.startswith("cron: ") and says in message, message
    assert "\n" not in message


@pytest.mark.parametrize("name, stored", [
    ("Europe/Berlin", "Europe/Berlin"), ("  America/New_York ", "America/New_York"),
    ("UTC", "UTC"), ("utc", "UTC"), ("Z", "UTC"), ("Australia/Lord_Howe", "Australia/Lord_Howe"),
])
def test_zones_read(name, stored):
    assert parse_zone(name) == stored


@pytest.mark.parametrize("name", ["Europe/Berlinn", "Mars/Olympus", "../../etc/passwd",
                                  "/usr/share/zoneinfo/UTC", "", "CEST"])
def test_unknown_zones_are_refused(name):
    with pytest.raises(InvalidInput, match=r"^tz: unknown time zone"):
        parse_zone(name)


def test_the_local_zone_is_named_or_refused(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    assert parse_zone(None) == "America/New_York"
    monkeypatch.setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3")  # a POSIX rule: no name to keep
    with pytest.raises(InvalidInput, match=r"^tz: the local time zone has no IANA name.*--tz"):
        parse_zone(None)


@pytest.mark.parametrize("name", ["nightly-backup", "db.vacuum", "a", "Report_2", "x" * 64])
def test_schedule_names(name):
    assert parse_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", "has space", "a/b", "x" * 65, "nächtlich", ".hidden"])
def test_bad_schedule_names(name):
    with pytest.raises(InvalidInput, match=r"^name: "):
        parse_name(name)


@pytest.mark.parametrize("kwargs, says", [
    ({}, "give either --cron or --every"),
    ({"cron": "@daily", "every": "1h"}, "give --cron or --every, not both"),
    ({"every": "0"}, "every: '0' is no interval"),
    ({"every": "0s"}, "every: '0s' is no interval"),
    ({"every": "soon"}, "every: not a duration"),
    ({"every": "1 month"}, "every: not a duration: '1 month' (months and years"),
    ({"cron": "@daily", "start": NOW}, "start: goes with --every"),
    ({"cron": "@daily", "tz": "Nowhere/Land"}, "tz: unknown time zone 'Nowhere/Land'"),
])
def test_bad_rules(kwargs, says):
    with pytest.raises(InvalidInput) as e:
        make_rule(now=NOW, **{"tz": "UTC", **kwargs})
    assert says in str(e.value)


def test_an_every_rule_starts_one_interval_from_now_or_at_its_start():
    r = make_rule(every="2h", tz="Europe/Berlin", now=NOW)
    assert r == Rule(None, 7200, NOW.replace(microsecond=0) + timedelta(hours=2), "Europe/Berlin")
    assert check_rule(r, now=NOW, resolution=15, max_delay=YEAR) == NOW + timedelta(hours=2)
    start = z("2027-05-12T11:30:00+02:00")
    r = make_rule(every="1d", start=start, tz="UTC", now=NOW)
    assert check_rule(r, now=NOW, resolution=15, max_delay=YEAR) == start
    # a start in the past sets the phase: the first occurrence is the next on its grid
    r = make_rule(every="1h", start=z("2027-05-01T00:20Z"), tz="UTC", now=NOW)
    assert check_rule(r, now=NOW, resolution=15, max_delay=YEAR) == z("2027-05-12T08:20Z")


# --- fitting the home ----------------------------------------------------------------------
@pytest.mark.parametrize("expr, seconds", [
    ("*/5 * * * *", 300), ("0,59 * * * *", 60), ("0,30 9 * * *", 1800), ("0 * * * *", 3600),
    ("0 9 * * *", 3600), ("*/20 9-17 * * *", 1200), ("50 9,10 * * *", 3600),
    ("10,50 9,11 * * *", 2400), ("55 23 * * *", 3600), ("0,55 0,23 * * *", 300),
    ("* * * * *", 60),
])
def test_the_finest_interval_of_a_cron_rule(expr, seconds):
    assert finest_interval(cron(expr)) == seconds


@pytest.mark.parametrize("rule, resolution", [
    ({"every": "1m"}, 15), ({"every": "14m59s"}, 15), ({"cron": "*/5 * * * *"}, 15),
    ({"cron": "0,10 9 * * *"}, 15), ({"cron": "*/30 * * * *"}, 60), ({"cron": "* * * * *"}, 2),
])
def test_a_rule_finer_than_the_slots_is_refused_naming_the_resolution(rule, resolution):
    r = make_rule(now=NOW, tz="UTC", **rule)
    with pytest.raises(InvalidInput) as e:
        check_rule(r, now=NOW, resolution=resolution, max_delay=YEAR)
    message = str(e.value)
    assert f"this home's {resolution}-minute slots (resolution {resolution})" in message
    assert message.startswith("cron: --cron '" if "cron" in rule else "every: --every ")


@pytest.mark.parametrize("rule, resolution", [
    ({"every": "15m"}, 15), ({"cron": "*/15 * * * *"}, 15), ({"cron": "* * * * *"}, 1),
    ({"cron": "0 9 * * mon-fri"}, 60), ({"every": "1h"}, 60),
])
def test_a_rule_as_fine_as_the_slots_is_taken(rule, resolution):
    r = make_rule(now=NOW, tz="UTC", **rule)
    assert check_rule(r, now=NOW, resolution=resolution, max_delay=YEAR) > NOW - timedelta(1)


def test_a_first_occurrence_beyond_max_delay_is_refused():
    now = z("2028-03-01T00:00Z")
    r = make_rule(cron="0 0 29 2 *", tz="Europe/Berlin", now=now)  # next 29 February: 2032
    with pytest.raises(InvalidInput, match=r"^cron: the first occurrence, 2032-02-29 00:00 CET, "
                                           r"is beyond max_delay \(365d from now\)"):
        check_rule(r, now=now, resolution=15, max_delay=YEAR)
    assert check_rule(r, now=now, resolution=15, max_delay=5 * YEAR) == z("2032-02-28T23:00Z")
    r = make_rule(every="1w", start=NOW + timedelta(days=400), tz="UTC", now=NOW)
    with pytest.raises(InvalidInput, match=r"^start: the first occurrence"):
        check_rule(r, now=NOW, resolution=15, max_delay=YEAR)


def test_an_occurrence_exactly_now_is_the_first():
    r = cron("7 8 * * *", "UTC")
    assert check_rule(r, now=NOW, resolution=1, max_delay=YEAR) == NOW


# --- DST days: the rule of --at ------------------------------------------------------------
DST = [  # zone, rule, after (UTC), the occurrences after it (UTC)
    # Berlin springs forward 2027-03-28 02:00 CET -> 03:00 CEST: 02:30 moves to 03:30
    ("Europe/Berlin", "30 2 * * *", "2027-03-27T12:00Z",
     ["2027-03-28T01:30Z", "2027-03-29T00:30Z"]),
    # ... and falls back 2027-10-31 03:00 CEST -> 02:00 CET: 02:30 fires once, the first one
    ("Europe/Berlin", "30 2 * * *", "2027-10-30T12:00Z",
     ["2027-10-31T00:30Z", "2027-11-01T01:30Z"]),
    # hourly: 02:00 moved is 03:00, one occurrence; the repeated 02:00 fires once
    ("Europe/Berlin", "0 * * * *", "2027-03-27T23:30Z",
     ["2027-03-28T00:00Z", "2027-03-28T01:00Z", "2027-03-28T02:00Z"]),
    ("Europe/Berlin", "0 * * * *", "2027-10-30T23:30Z",
     ["2027-10-31T00:00Z", "2027-10-31T02:00Z", "2027-10-31T03:00Z"]),
    ("Europe/Berlin", "*/30 * * * *", "2027-03-28T00:15Z",
     ["2027-03-28T00:30Z", "2027-03-28T01:00Z", "2027-03-28T01:30Z", "2027-03-28T02:00Z"]),
    ("America/New_York", "30 2 * * *", "2027-03-13T12:00Z",
     ["2027-03-14T07:30Z", "2027-03-15T06:30Z"]),
    ("America/New_York", "30 1 * * *", "2027-11-06T12:00Z",
     ["2027-11-07T05:30Z", "2027-11-08T06:30Z"]),
    ("America/New_York", "0 * * * *", "2027-03-14T06:30Z",
     ["2027-03-14T07:00Z", "2027-03-14T08:00Z"]),
    ("America/New_York", "0 * * * *", "2027-11-07T04:30Z",
     ["2027-11-07T05:00Z", "2027-11-07T07:00Z"]),
    # Lord Howe: a 30-minute gap (02:00 -> 02:30) and a 30-minute repeat (02:00 -> 01:30)
    ("Australia/Lord_Howe", "15 2 * * *", "2027-10-02T00:00Z",
     ["2027-10-02T15:45Z", "2027-10-03T15:15Z"]),
    ("Australia/Lord_Howe", "45 1 * * *", "2027-04-03T00:00Z",
     ["2027-04-03T14:45Z", "2027-04-04T15:15Z"]),
    # hourly there: 02:00 moves to 02:30 (15:30Z), half an hour before 03:00 (16:00Z)
    ("Australia/Lord_Howe", "0 * * * *", "2027-10-02T14:00Z",
     ["2027-10-02T14:30Z", "2027-10-02T15:30Z", "2027-10-02T16:00Z", "2027-10-02T17:00Z"]),
    # 01:30 +11 (14:30Z) fires, its repeat at +10:30 (15:00Z) does not; 02:00 exists once
    ("Australia/Lord_Howe", "0,30 * * * *", "2027-04-03T14:10Z",
     ["2027-04-03T14:30Z", "2027-04-03T15:30Z", "2027-04-03T16:00Z", "2027-04-03T16:30Z"]),
    # Cairo: midnight is the gap (2027-04-30 00:00 -> 01:00); 23:00-24:00 repeats on 10-28
    ("Africa/Cairo", "0 0 * * *", "2027-04-29T12:00Z", ["2027-04-29T22:00Z", "2027-04-30T21:00Z"]),
    ("Africa/Cairo", "30 0 * * *", "2027-04-29T12:00Z", ["2027-04-29T22:30Z", "2027-04-30T21:30Z"]),
    ("Africa/Cairo", "30 23 * * *", "2027-10-28T12:00Z",
     ["2027-10-28T20:30Z", "2027-10-29T21:30Z"]),
    ("Africa/Cairo", "0 * * * *", "2027-04-29T20:30Z",
     ["2027-04-29T21:00Z", "2027-04-29T22:00Z", "2027-04-29T23:00Z"]),
    ("Africa/Cairo", "0 * * * *", "2027-10-28T19:30Z",
     ["2027-10-28T20:00Z", "2027-10-28T22:00Z"]),
    # Samoa skipped 2011-12-30 whole (-10 -> +14): that day's 09:00 moves to the next day's,
    # which is one occurrence
    ("Pacific/Apia", "0 9 * * *", "2011-12-29T12:00Z",
     ["2011-12-29T19:00Z", "2011-12-30T19:00Z", "2011-12-31T19:00Z"]),
]


@pytest.mark.parametrize("zone, expr, after, want", DST)
def test_dst_days(zone, expr, after, want):
    r = cron(expr, zone)
    assert stamps(occurrences(r, z(after), limit=len(want))) == want
    assert stamps([next_occurrence(r, z(after))]) == want[:1]


@pytest.mark.parametrize("zone, expr, after, want", DST)
def test_dst_days_from_inside_the_change(zone, expr, after, want):
    """Asked from any minute up to the last occurrence, the answer is the next one in the
    table: never one before the time asked (the second pass of a repeated hour reads wall times
    that are already past), and none skipped (a moved time comes after later wall times)."""
    r, ats = cron(expr, zone), [z(w) for w in want]
    t = z(after)
    while t < ats[-1]:
        assert next_occurrence(r, t) == next(a for a in ats if a > t), t
        t += timedelta(minutes=7)


def test_berlin_30_2_on_the_spring_day_is_0330_cest():
    r = cron("30 2 * * *", "Europe/Berlin")
    at = next_occurrence(r, z("2027-03-27T12:00Z"))
    assert at == z("2027-03-28T01:30Z")
    assert at.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M %Z") == "03:30 CEST"


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                                  "Africa/Cairo"])
@pytest.mark.parametrize("every", [900, 3600, 5400, 86400])
def test_every_is_elapsed_time_through_dst(zone, every):
    r = make_rule(every=every, start=z("2027-01-01T00:10Z"), tz=zone, now=NOW)
    got = occurrences(r, z("2027-03-01T00:00Z"), until=z("2027-11-30T00:00Z"))
    assert all(b - a == timedelta(seconds=every) for a, b in zip(got, got[1:], strict=False))
    assert len(got) == (z("2027-11-30T00:00Z") - got[0]) // timedelta(seconds=every) + 1


def test_occurrences_bounds():
    r = cron("0 9 * * mon-fri", "Europe/Berlin")
    week = occurrences(r, z("2027-05-09T00:00Z"), until=z("2027-05-16T00:00Z"))
    assert stamps(week) == [f"2027-05-{d}T07:00Z" for d in (10, 11, 12, 13, 14)]
    assert occurrences(r, z("2027-05-09T00:00Z"), limit=2) == week[:2]
    assert occurrences(r, z("2027-05-09T00:00Z"), until=week[2], limit=10) == week[:3]
    assert occurrences(r, z("2027-05-09T00:00Z"), limit=0) == []
    with pytest.raises(ValueError):
        occurrences(r, z("2027-05-09T00:00Z"))


def test_utc_rules_use_no_zone_rules():
    r = cron("30 2 * * *", "UTC")
    assert stamps(occurrences(r, z("2027-03-27T12:00Z"), limit=2)) == [
        "2027-03-28T02:30Z", "2027-03-29T02:30Z"]


# --- properties ----------------------------------------------------------------------------
CHANGES = [  # (zone, a day of a DST change, or of none)
    ("Europe/Berlin", date(2027, 3, 28)), ("Europe/Berlin", date(2027, 10, 31)),
    ("America/New_York", date(2027, 3, 14)), ("America/New_York", date(2027, 11, 7)),
    ("Australia/Lord_Howe", date(2027, 4, 4)), ("Australia/Lord_Howe", date(2027, 10, 3)),
    ("Africa/Cairo", date(2027, 4, 30)), ("Africa/Cairo", date(2027, 10, 28)),
    ("Pacific/Apia", date(2011, 12, 30)), ("Antarctica/Troll", date(2027, 3, 28)),
    ("Europe/Berlin", date(2027, 6, 15)), ("UTC", date(2027, 3, 28)),
]


@st.composite
def cron_rules(draw):
    minutes = sorted(draw(st.sets(st.integers(0, 59), min_size=1, max_size=4)))
    hours = draw(st.one_of(st.none(), st.sets(st.integers(0, 23), min_size=1, max_size=6)))
    days = draw(st.one_of(st.none(), st.sets(st.integers(0, 6), min_size=1, max_size=6)))
    expr = " ".join([",".join(map(str, minutes)),
                     "*" if hours is None else ",".join(map(str, sorted(hours))), "*", "*",
                     "*" if days is None else ",".join(map(str, sorted(days)))])
    return expr, set(minutes), set(range(24)) if hours is None else hours, days


def reference(expr_sets, zone, after, until):
    """Every wall time the fields match, made an instant by ``when.to_utc``; those in
    (after, until], in order, each once. Brute force: no cronsim, no heap."""
    _, minutes, hours, days = expr_sets
    tz = ZoneInfo(zone) if zone != "UTC" else UTC
    out = set()
    day = (after - timedelta(days=2)).date()
    while day <= (until + timedelta(days=2)).date():
        if days is None or (day.weekday() + 1) % 7 in days:
            for h in hours:
                for m in minutes:
                    at = to_utc(datetime(day.year, day.month, day.day, h, m), tz)
                    if after < at <= until:
                        out.add(at)
        day += timedelta(days=1)
    return sorted(out)


@settings(max_examples=300, deadline=None)
@given(cron_rules(), st.sampled_from(CHANGES), st.integers(-36 * 60, 36 * 60),
       st.integers(1, 3 * 24 * 60))
@pytest.mark.slow
def test_occurrences_are_the_rule_read_as_at_reads_a_time(rule, change, start, span):
    zone, day = change
    after = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) + timedelta(minutes=start)
    until = after + timedelta(minutes=span)
    r = cron(rule[0], zone)
    got = occurrences(r, after, until=until)
    assert got == reference(rule, zone, after, until)
    # never before the time asked, in order, each once
    assert all(a > after for a in got)
    assert all(a < b for a, b in zip(got, got[1:], strict=False))
    if got:
        assert next_occurrence(r, after) == got[0]
        assert all(next_occurrence(r, a) == b for a, b in zip(got, got[1:], strict=False))
        assert next_occurrence(r, got[0], inclusive=True) == got[0]


@settings(max_examples=200, deadline=None)
@given(cron_rules(), st.sampled_from(CHANGES), st.integers(-36 * 60, 36 * 60))
@pytest.mark.slow
def test_an_occurrence_is_never_before_its_wall_time(rule, change, start):
    """A moved time moves forward, to a wall time at or after the one the rule names."""
    zone, day = change
    after = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) + timedelta(minutes=start)
    r = cron(rule[0], zone)
    tz = ZoneInfo(zone) if zone != "UTC" else UTC
    _, minutes, hours, days = rule
    for at in occurrences(r, after, limit=30):
        wall = at.astimezone(tz).replace(tzinfo=None)
        if wall.minute in minutes and wall.hour in hours and (
                days is None or (wall.weekday() + 1) % 7 in days):
            continue
        # not a matching wall time: it stands for one that did not exist, before it that day
        back = [wall - timedelta(minutes=k) for k in range(1, 24 * 60 + 1)]
        assert any(w.minute in minutes and w.hour in hours and to_utc(w, tz) == at
                   for w in back), (at, wall)


@settings(max_examples=200, deadline=None)
@given(st.integers(60, 3 * 86400), st.sampled_from(CHANGES),
       st.integers(-400 * 86400, 400 * 86400), st.integers(0, 2 * 86400))
def test_every_rules_keep_their_grid(every, change, phase, offset):
    zone, day = change
    start = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(seconds=phase)
    r = make_rule(every=every, start=start, tz=zone, now=NOW)
    after = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(seconds=offset)
    got = occurrences(r, after, limit=5)
    assert got[0] > after
    assert got[0] == start if after < start else got[0] - after <= timedelta(seconds=every)
    assert all((a - start) % timedelta(seconds=every) == timedelta(0) for a in got)
    assert all(b - a == timedelta(seconds=every) for a, b in zip(got, got[1:], strict=False))


# --- in words ------------------------------------------------------------------------------
@pytest.mark.parametrize("rule, words", [
    (cron("0 9 * * mon-fri"), "At 09:00, Monday through Friday"),
    (cron("@daily"), "At 00:00"),
    (cron("*/15 * * * *"), "Every 15 minutes"),
    (cron("30 14 1 * *"), "At 14:30, on day 1 of the month"),
    (cron("0 0 1,15 * 3"), "At 00:00, on day 1 and 15 of the month, or on Wednesday"),
    (Rule(None, 5400, NOW, "UTC"), "Every 1h30m"),
])
def test_rules_in_words(rule, words, monkeypatch):
    monkeypatch.setenv("LANG", "de_DE.UTF-8")  # awty speaks English whatever the locale
    assert describe(rule) == words


@pytest.mark.parametrize("expr, days", [
    # both day fields restricted: either matches (crontab(5))
    ("0 0 1,15 * wed", [1, 3, 10, 15, 17, 24, 31]),
    # one starts with *: both must match (Debian's reading, which cronsim >= 2.2 follows)
    ("0 0 */2 * wed", [3, 17, 31]),
    ("0 0 1-7 * *", [1, 2, 3, 4, 5, 6, 7]),
    ("0 0 * * wed", [3, 10, 17, 24, 31]),
])
def test_day_of_month_with_day_of_week(expr, days):
    got = occurrences(cron(expr, "UTC"), z("2027-03-01T00:00Z") - timedelta(minutes=1),
                      until=z("2027-03-31T23:59Z"))
    assert [a.day for a in got] == days
