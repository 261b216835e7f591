"""Times people type (issue 15 item 7) and local times across DST (issue 10 item 5).

The library is tested with a zone passed in (``local=ZoneInfo(...)``) against a pinned now;
the DST regression where it was seen, at the real CLI: a subprocess of ``awty`` with ``TZ``
set, ``AWTY_NOW`` as the clock, ``--dry-run --json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from awty.localzone import zone_for
from awty.slots import parse_duration, slot_for
from awty.when import parse_since, parse_when, to_utc
from helpers import db_rows, tree_files

BERLIN = ZoneInfo("Europe/Berlin")
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Africa/Cairo")
runner = CliRunner()


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


# --- DST: a skipped time moves forward by the gap, a repeated one takes its first occurrence
DST = [
    # Berlin springs forward 2026-03-29 02:00 CET -> 03:00 CEST: 02:30 is 03:30 CEST = 01:30Z.
    ("Europe/Berlin", "2026-03-29 02:30", utc(2026, 3, 29, 1, 30)),
    ("Europe/Berlin", "2026-03-29 02:00", utc(2026, 3, 29, 1, 0)),
    ("Europe/Berlin", "2026-03-29 01:59", utc(2026, 3, 29, 0, 59)),
    # ... and falls back 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 twice, the first is CEST.
    ("Europe/Berlin", "2026-10-25 02:30", utc(2026, 10, 25, 0, 30)),
    ("Europe/Berlin", "2026-10-25 03:00", utc(2026, 10, 25, 2, 0)),
    # New York: 2026-03-08 02:30 does not exist (03:30 EDT); 2026-11-01 01:30 is EDT first.
    ("America/New_York", "2026-03-08 02:30", utc(2026, 3, 8, 7, 30)),
    ("America/New_York", "2026-11-01 01:30", utc(2026, 11, 1, 5, 30)),
    # Lord Howe shifts by 30 minutes: 2026-10-04 02:00 -> 02:30, so 02:15 is 02:45 (+11);
    # 2026-04-05 02:00 -> 01:30, so 01:45 happens twice, first at +11.
    ("Australia/Lord_Howe", "2026-10-04 02:15", utc(2026, 10, 3, 15, 45)),
    ("Australia/Lord_Howe", "2026-04-05 01:45", utc(2026, 4, 4, 14, 45)),
    # Cairo springs forward at midnight (2026-04-24 00:00 -> 01:00): 00:30 is 01:30 EEST on
    # the 24th, not 23:30 on the 23rd; the day's midnight is its 01:00.
    ("Africa/Cairo", "2026-04-24 00:30", utc(2026, 4, 23, 22, 30)),
    ("Africa/Cairo", "2026-04-24", utc(2026, 4, 23, 22, 0)),
    # ... and falls back at 2026-10-30 00:00 -> 2026-10-29 23:00: 23:30 is EEST first.
    ("Africa/Cairo", "2026-10-29 23:30", utc(2026, 10, 29, 20, 30)),
]


@pytest.mark.parametrize("zone, local, expected", DST)
def test_local_times_across_dst(zone, local, expected):
    got = parse_when(local, utc(2026, 1, 1), ZoneInfo(zone))
    assert got == expected
    assert slot_for(got, 15) >= got  # slots live in UTC: one instant, one slot
    assert got.astimezone(ZoneInfo(zone)).date().isoformat() == local[:10]  # never the day before


def test_the_system_zone_is_read_through_zoneinfo(monkeypatch):
    """No zone passed: TZ decides, by the zone's rules (libc's mktime made Berlin's 02:30 an
    hour early, 00:30Z, and Cairo's 00:30 the previous day's 23:30)."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert to_utc(datetime(2026, 3, 29, 2, 30)) == utc(2026, 3, 29, 1, 30)
    monkeypatch.setenv("TZ", "Africa/Cairo")
    assert to_utc(datetime(2026, 4, 24, 0, 30)) == utc(2026, 4, 23, 22, 30)


def awty_json(home: Path, tz: str, now: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env.update(TZ=tz, AWTY_NOW=now)
    return subprocess.run([sys.executable, "-m", "awty", *args, "--home", str(home)], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("zone, at, now, due", [
    ("Europe/Berlin", "2026-03-29 02:30", "2026-03-28T10:00:00Z", "2026-03-29T01:30:00Z"),
    ("America/New_York", "2026-03-08 02:30", "2026-03-07T10:00:00Z", "2026-03-08T07:30:00Z"),
    ("Australia/Lord_Howe", "2026-10-04 02:15", "2026-10-03T00:00:00Z", "2026-10-03T15:45:00Z"),
    ("Africa/Cairo", "2026-04-24 00:30", "2026-04-23T10:00:00Z", "2026-04-23T22:30:00Z"),
    ("Africa/Cairo", "tomorrow", "2026-04-23T10:00:00Z", "2026-04-23T22:00:00Z"),
    ("Europe/Berlin", "tomorrow 02:30", "2026-03-28T10:00:00Z", "2026-03-29T01:30:00Z"),
])
def test_cli_due_time_in_a_dst_gap(home, zone, at, now, due):
    res = awty_json(home, zone, now, "add", "https://example.com/hook", "--at", at, "--json",
                    "--dry-run")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["first_check_at"] == due


@settings(max_examples=300, deadline=None)
@given(zone=st.sampled_from(ZONES),
       wall=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1)))
@pytest.mark.slow
def test_a_wall_time_is_never_early_and_takes_the_first_repeat(zone, wall):
    z = ZoneInfo(zone)
    got = to_utc(wall, z)
    back = got.astimezone(z).replace(tzinfo=None)
    assert wall <= back <= wall + timedelta(hours=1)  # kept, or moved forward by a gap
    if back == wall:  # a wall time that exists (in a gap, fold=1 reads the later offset)
        assert got <= wall.replace(tzinfo=z, fold=1).astimezone(UTC)  # the first of two
    assert slot_for(got, 15) >= got


# --- the local zone ------------------------------------------------------------------------------
def test_zone_for_tz_values(tmp_path):
    gap = datetime(2026, 3, 29, 2, 30)
    for value in ("Europe/Berlin", ":Europe/Berlin", "/usr/share/zoneinfo/Europe/Berlin",
                  "CET-1CEST,M3.5.0,M10.5.0/3"):  # the last is a POSIX rule: python-dateutil
        assert to_utc(gap, zone_for(value)) == utc(2026, 3, 29, 1, 30), value
    for value in ("", ":", "No/Such_Zone"):  # glibc reads these as UTC
        assert to_utc(gap, zone_for(value)) == utc(2026, 3, 29, 2, 30), value
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Africa/Cairo")
    assert str(zone_for(None, str(link))) == "Africa/Cairo"
    copy = tmp_path / "copied"
    copy.write_bytes(Path("/usr/share/zoneinfo/America/New_York").read_bytes())
    assert to_utc(datetime(2026, 7, 1, 12), zone_for(None, str(copy))) == utc(2026, 7, 1, 16)
    assert zone_for(None, str(tmp_path / "missing")) is UTC


# --- at-style phrases ----------------------------------------------------------------------------
# Now is Sunday 2026-11-22 08:00 in Berlin (07:00Z); every expectation is Berlin wall time.
NOW = utc(2026, 11, 22, 7, 0)


def berlin(text: str, *, past: bool = False) -> str:
    return parse_when(text, NOW, BERLIN, past=past).astimezone(BERLIN).strftime("%a %m-%d %H:%M")


@pytest.mark.parametrize("text, expected", [
    ("now", "Sun 11-22 08:00"),
    ("9", "Sun 11-22 09:00"),              # a bare hour: the next 09:00, today
    ("7", "Mon 11-23 07:00"),              # ... gone today: tomorrow
    ("0", "Mon 11-23 00:00"),
    ("23", "Sun 11-22 23:00"),
    ("07:00", "Mon 11-23 07:00"),          # a past clock time is tomorrow's, as at(1) does
    ("08:00", "Sun 11-22 08:00"),          # exactly now is now
    ("09:30", "Sun 11-22 09:30"),
    ("9:30:15", "Sun 11-22 09:30"),
    ("9am", "Sun 11-22 09:00"),
    ("9 am", "Sun 11-22 09:00"),
    ("9 A.M.", "Sun 11-22 09:00"),
    ("7pm", "Sun 11-22 19:00"),
    ("12am", "Mon 11-23 00:00"),
    ("12pm", "Sun 11-22 12:00"),
    ("noon", "Sun 11-22 12:00"),
    ("midnight", "Mon 11-23 00:00"),
    ("teatime", "Sun 11-22 16:00"),
    ("today", "Sun 11-22 00:00"),
    ("tomorrow", "Mon 11-23 00:00"),
    ("tomorrow 06:00", "Mon 11-23 06:00"),
    ("06:00 tomorrow", "Mon 11-23 06:00"),
    ("tomorrow at noon", "Mon 11-23 12:00"),
    ("Tomorrow 9AM", "Mon 11-23 09:00"),
    ("teatime tomorrow", "Mon 11-23 16:00"),
    ("monday", "Mon 11-23 00:00"),
    ("mon 9am", "Mon 11-23 09:00"),
    ("sunday 9am", "Sun 11-22 09:00"),     # today, still ahead
    ("sunday 7am", "Sun 11-29 07:00"),     # today's is gone: next week's
    ("next monday 9am", "Mon 11-23 09:00"),
    ("9am next monday", "Mon 11-23 09:00"),
    ("next sunday", "Sun 11-29 00:00"),    # after today
    ("now + 2 hours", "Sun 11-22 10:00"),
    ("now+2h", "Sun 11-22 10:00"),
    ("+ 90 minutes", "Sun 11-22 09:30"),
    ("in 1 hour 30 minutes", "Sun 11-22 09:30"),
    ("now + PT2H", "Sun 11-22 10:00"),
    ("next hour", "Sun 11-22 09:00"),
    ("next week", "Sun 11-29 08:00"),
    ("2026-12-01", "Tue 12-01 00:00"),
    ("2026-12-01 09:00", "Tue 12-01 09:00"),
    ("2026-12-01T09:00:00Z", "Tue 12-01 10:00"),
    ("2026/12/01 9am", "Tue 12-01 09:00"),
    ("13/12/2026", "Sun 12-13 00:00"),     # only one reading: 13 December
    ("12/13/2026 9am", "Sun 12-13 09:00"),
    ("05.05.2027", "Wed 05-05 00:00"),     # both readings agree
    ("9am utc", "Sun 11-22 10:00"),
    ("Nov 23 2026 9am", "Mon 11-23 09:00"),
    ("Dec 1 9am", "Tue 12-01 09:00"),
    ("Jan 5", "Tue 01-05 00:00"),          # no year: the next 5 January (2027)
    ("1 Dec 2026 17:00 +01:00", "Tue 12-01 17:00"),
    ("1795000000", "Wed 11-18 12:06"),       # epoch seconds
])
def test_phrases(text, expected):
    assert berlin(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("yesterday", "Sat 11-21 00:00"),
    ("today", "Sun 11-22 00:00"),
    ("9", "Sat 11-21 09:00"),              # the last 09:00
    ("07:00", "Sun 11-22 07:00"),
    ("monday", "Mon 11-16 00:00"),         # the last Monday
    ("sunday", "Sun 11-22 00:00"),
    ("last sunday", "Sun 11-15 00:00"),
    ("2 hours ago", "Sun 11-22 06:00"),
    ("now - 1d", "Sat 11-21 08:00"),
    ("Dec 24", "Wed 12-24 00:00"),         # no year: the last 24 December (2025)
])
def test_phrases_read_backwards(text, expected):
    assert berlin(text, past=True) == expected


@pytest.mark.parametrize("text, expected", [
    ("1d", "Sat 11-21 08:00"), ("2 hours", "Sun 11-22 06:00"), ("PT2H", "Sun 11-22 06:00"),
    ("90m", "Sun 11-22 06:30"), ("yesterday", "Sat 11-21 00:00"), ("9", "Sat 11-21 09:00"),
    ("10am", "Sat 11-21 10:00"), ("2026-11-01", "Sun 11-01 00:00"),
])
def test_since(text, expected):
    got = parse_since(text, NOW, BERLIN)
    assert got.astimezone(BERLIN).strftime("%a %m-%d %H:%M") == expected


@pytest.mark.parametrize("text, says", [
    ("25", "a bare number is an hour (0-23)"),
    ("24", "a bare number is an hour (0-23)"),
    ("930", "a bare number is an hour (0-23)"),
    ("2026", "write a date as YYYY-MM-DD"),
    ("01/12/2026", "ambiguous (1 December 2026 or 12 January 2026?): write dates as YYYY-MM-DD, "
                   "e.g. 2026-12-01"),
    ("01/12/2026 9am", "ambiguous"),
    ("Dec 01/12/2026", "ambiguous"),       # the dateutil path checks digit dates too
    ("12/25", "write dates as YYYY-MM-DD (with a 4-digit year)"),
    ("01/12/26", "write dates as YYYY-MM-DD"),
    ("13/13/2026", "is not a date"),
    ("31/02/2026", "is not a date"),
    ("25:00", "not a clock time"),
    ("tomorrow 24:00", "not a clock time"),
    ("13pm", "1-12 with am/pm"),
    ("tomorrow monday", "two days"),
    ("9am 10am", "two clock times"),
    ("next", "goes with a weekday"),
    ("9am EST", "a zone name awty cannot place"),
    ("next month", "not a time"),
    ("whenever", "not a time"),
    ("now + 1 month", "months and years have no fixed length"),
    ("", "empty time"),
])
def test_refused_with_a_way_to_write_it(text, says):
    with pytest.raises(ValueError) as e:
        parse_when(text, NOW, BERLIN)
    assert says in str(e.value)


# --- durations -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("15m", 900), ("1h30m", 5400), ("1w", 604800), ("45", 45),
    ("2 hours", 7200), ("1 hour 30 minutes", 5400), ("1 hour and 30 minutes", 5400),
    ("1h, 30m", 5400), ("2 hrs", 7200), ("3 days", 259200), ("1 week", 604800),
    ("10 secs", 10), ("5 min", 300), ("PT2H", 7200), ("P1DT2H", 93600), ("pt90m", 5400),
    ("P1W", 604800), ("PT1.5H", 5400), ("PT0,5S", 0.5), ("P2D", 172800),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text, says", [
    ("P1M", "months and years"), ("P1Y2D", "months and years"), ("2 months", "months and years"),
    ("1 year", "months and years"), ("P", "not a duration"), ("PT", "not a duration"),
    ("P1DT", "not a duration"), ("2 parsecs", "not a duration"), ("h2", "not a duration"),
    ("-2h", "not a duration"),
])
def test_durations_refused(text, says):
    with pytest.raises(ValueError) as e:
        parse_duration(text)
    assert says in str(e.value)


# --- at the command line and in the API ----------------------------------------------------------
def cli(home, now: str, *args: str, tz: str = "Europe/Berlin"):
    return runner.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": now, "TZ": tz})


@pytest.mark.parametrize("at, due", [
    ("9", "2026-11-22T08:00:00Z"),         # 09:00 Berlin, today
    ("07:00", "2026-11-23T06:00:00Z"),     # at 08:00, 07:00 is tomorrow's (was refused)
    ("tomorrow 06:00", "2026-11-23T05:00:00Z"),
    ("next monday 9am", "2026-11-23T08:00:00Z"),
    ("noon", "2026-11-22T11:00:00Z"),
    ("13/12/2026", "2026-12-12T23:00:00Z"),
])
def test_cli_at(home, at, due):
    res = cli(home, "2026-11-22T07:00:00Z", "add", "https://example.com/hook", "--at", at,
              "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["first_check_at"] == due
    assert [r["first_check_at"] for r in db_rows(home, "future_job")] == [due]


@pytest.mark.parametrize("within, due", [
    ("2 hours", "2026-11-22T09:00:00Z"), ("1 hour 30 minutes", "2026-11-22T08:30:00Z"),
    ("PT2H", "2026-11-22T09:00:00Z"), ("P1DT2H", "2026-11-23T09:00:00Z"),
])
def test_cli_in(home, within, due):
    res = cli(home, "2026-11-22T07:00:00Z", "add", "https://example.com/hook", "--in", within,
              "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["first_check_at"] == due


@pytest.mark.parametrize("args, says", [
    (["--at", "25"], "at: '25' is not a clear time: a bare number is an hour (0-23)"),
    (["--at", "01/12/2026"], "write dates as YYYY-MM-DD, e.g. 2026-12-01"),
    (["--at", "yesterday"], "is in the past"),
    (["--in", "1 month"], "months and years have no fixed length"),
    (["--in", "P1M"], "months and years have no fixed length"),
])
def test_cli_refuses_with_exit_2_and_stores_nothing(home, args, says):
    res = cli(home, "2026-11-22T07:00:00Z", "add", "https://example.com/hook", *args)
    assert res.exit_code == 2, res.stdout
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


def test_cli_reschedule_reads_the_same_phrases(home):
    job = json.loads(cli(home, "2026-11-22T07:00:00Z", "add", "https://example.com/hook",
                         "--in", "1h", "--json").stdout)["id"]
    res = cli(home, "2026-11-22T07:00:00Z", "reschedule", job, "--at", "7")
    assert res.exit_code == 0, res.stderr
    assert [r["next_check_at"] for r in db_rows(home, "future_job")] == ["2026-11-23T06:00:00Z"]


@pytest.mark.slow
def test_cli_history_since_yesterday(home):
    ended = {}
    for now in ("2026-11-20T12:00:00Z", "2026-11-21T09:00:00Z", "2026-11-22T06:30:00Z"):
        job = json.loads(cli(home, now, "add", "https://example.com/hook", "--in", "1h",
                             "--json").stdout)["id"]
        assert cli(home, now, "cancel", job).exit_code == 0
        ended[now] = job

    def since(text: str) -> set[str]:
        res = cli(home, "2026-11-22T07:00:00Z", "history", "--since", text, "--json")
        assert res.exit_code == 0, res.stderr
        return {row["id"] for row in json.loads(res.stdout)}

    # Berlin: yesterday began 2026-11-20T23:00Z; 9 is the last 09:00 (2026-11-21T08:00Z).
    assert since("yesterday") == {ended["2026-11-21T09:00:00Z"], ended["2026-11-22T06:30:00Z"]}
    assert since("9") == since("yesterday")
    assert since("today") == {ended["2026-11-22T06:30:00Z"]}
    assert since("2 hours") == {ended["2026-11-22T06:30:00Z"]}
    assert since("PT24H") == since("yesterday")
    assert len(since("friday")) == 3
    res = cli(home, "2026-11-22T07:00:00Z", "history", "--since", "01/02/2026")
    assert res.exit_code == 2 and "YYYY-MM-DD" in res.stderr


def test_api_takes_a_zone_and_phrases(home):
    clock = FixedClock(utc(2026, 4, 23, 10))
    with Awty(home, clock=clock, env={}, tz=ZoneInfo("Africa/Cairo")) as a:
        job = a.add("https://example.com/hook", at="tomorrow").job
        assert job.first_check_at == utc(2026, 4, 23, 22)  # 01:00 on the 24th, Cairo time
        assert a.add("https://example.com/hook", in_="PT2H").job.first_check_at == \
            utc(2026, 4, 23, 12)
