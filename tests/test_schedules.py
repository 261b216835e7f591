"""Recurring schedules through the library (Awty.schedule and friends): each occurrence is an
ordinary job delivered to a real receiver on 127.0.0.1, naming its schedule and occurrence;
time moves by the FixedClock. The store's own rules are in
tests/store/test_contract_schedules.py; the CLI and several runners in
tests/reliability/test_schedule_runs.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty.api import Awty
from awty.errors import InvalidInput, ScheduleNotFound
from awty.slots import slot_for

T0 = datetime(2026, 11, 22, 10, 2, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def a(home, clock):
    clock.set(T0)
    with Awty(home, clock=clock, env={}, resolution=1) as x:
        yield x


def at(clock, when: datetime) -> None:
    clock.advance(when - clock.now())


def test_an_occurrence_names_its_schedule_in_body_and_headers(a, clock, rx):
    at(clock, T0)
    s = a.schedule("tick", rx.url("/t"), cron="*/5 * * * *", tz="UTC", payload={"n": 1},
                   headers=["X-Team: ops"])
    assert s.next_at == datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    at(clock, s.next_at)
    summary = a.run_slot(s.next_at)
    assert summary.outcomes == {"done": 1}
    (req,) = rx.requests("/t")
    assert req.headers["x-awty-schedule"] == "tick"
    assert req.headers["x-awty-occurrence"] == "2026-11-22T10:05:00Z"
    assert req.headers["x-team"] == "ops"
    body = req.json()
    assert (body["schedule"], body["occurrence"], body["payload"]) == (
        "tick", "2026-11-22T10:05:00Z", {"n": 1})
    (row,) = a.history()
    assert row.schedule == "tick" and row.outcome == "done"
    assert a.next_occurrences("tick", 3) == [datetime(2026, 11, 22, 10, m, tzinfo=UTC)
                                             for m in (10, 15, 20)]


def test_exec_occurrence_environment(a, clock, tmp_path):
    at(clock, T0)
    out = tmp_path / "env.json"
    cmd = (f"{sys.executable} -c \"import json, os; json.dump({{k: os.environ[k] for k in "
           f"('AWTY_SCHEDULE', 'AWTY_OCCURRENCE')}}, open('{out}', 'w'))\"")
    s = a.schedule("nightly", cmd, kind="exec", every="5m", tz="UTC")
    at(clock, slot_for(s.next_at, 1))
    assert a.run_slot(slot_for(s.next_at, 1)).outcomes == {"done": 1}
    assert json.loads(out.read_text()) == {"AWTY_SCHEDULE": "nightly",
                                           "AWTY_OCCURRENCE": s.next_at.strftime(
                                               "%Y-%m-%dT%H:%M:%SZ")}


def test_a_retried_occurrence_does_not_hold_up_the_next(a, clock, rx):
    at(clock, T0)
    rx.script("/t", status=503)
    s = a.schedule("tick", rx.url("/t"), cron="*/5 * * * *", tz="UTC", max_attempts=9,
                   timeout="2s")
    first = s.next_at
    at(clock, first)
    a.run_slot(first)
    jobs = {j.occurrence: j for j in a.store.schedule_jobs("tick")}
    # the failing first occurrence waits for a later attempt; the next one is pending in its
    # own slot, made at the first one's claim
    assert jobs[first].attempt >= 1 and jobs[first].next_check_at > first
    assert (jobs[first + 5 * MIN].attempt, jobs[first + 5 * MIN].next_check_at) == (
        0, first + 5 * MIN)
    assert set(jobs) == {first, first + 5 * MIN}


def test_a_manual_run_never_collides_with_an_occurrence(home, clock, rx, backend):
    """`schedule run` at the very second of a rule occurrence (pending in its slot), twice:
    each run is a job of the schedule but none of its occurrences, so the (schedule,
    occurrence) key never refuses it (on main: "a job with one of these ids already
    exists"), a receiver deduplicating on the occurrence keeps both, and the schedule moves
    on only from its own occurrence. Both stores."""
    clock.set(T0)
    with Awty(home, clock=clock, env={}, resolution=1, **backend.kw) as a:
        _manual_runs(a, clock, rx)


def _manual_runs(a, clock, rx):
    s = a.schedule("tick", rx.url("/t"), cron="*/5 * * * *", tz="UTC")
    at(clock, s.next_at)  # 10:05:00, the rule's occurrence is pending in this slot
    assert a.run_schedule("tick").outcomes == {"done": 1}
    assert a.run_schedule("tick").outcomes == {"done": 1}
    (pending,) = a.store.schedule_jobs("tick")
    assert pending.occurrence == s.next_at and a.get_schedule("tick").next_at == s.next_at
    assert a.run_slot(s.next_at).outcomes == {"done": 1}
    manual1, manual2, rule = rx.requests("/t")
    for req in (manual1, manual2):
        assert req.json()["schedule"] == "tick" and req.json()["occurrence"] is None
        assert req.headers["x-awty-schedule"] == "tick"
        assert "x-awty-occurrence" not in req.headers
    assert rule.json()["occurrence"] == "2026-11-22T10:05:00Z"
    assert [j.occurrence for j in a.store.schedule_jobs("tick")] == [s.next_at + 5 * MIN]
    assert [r.schedule for r in a.history()] == ["tick"] * 3


@pytest.mark.parametrize("kwargs, field", [
    ({"cron": "61 * * * *"}, "cron:"),
    ({"cron": "* * * * *"}, "finer than"),  # 1-minute rule at 15-minute slots
    ({"every": "0"}, "every:"),
    ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz:"),
    ({"cron": "0 9 * * *", "missed": "sometimes"}, "missed:"),
    ({"cron": "0 0 1 1 *", "tz": "UTC"}, "max_delay"),
    ({}, "either --cron or --every"),
])
def test_bad_schedules_store_nothing(home, clock, kwargs, field):
    with Awty(home, clock=clock, env={}, resolution=15, max_delay="30d") as x:
        with pytest.raises(InvalidInput, match=field):
            x.schedule("tick", "https://example.com/", **kwargs)
        assert x.store.schedules() == [] and x.count() == 0


def test_duplicate_name_pause_resume_remove(a, clock):
    at(clock, T0)
    a.schedule("tick", "https://example.com/", cron="*/5 * * * *", tz="UTC")
    with pytest.raises(InvalidInput, match="name: a schedule named 'tick' already exists"):
        a.schedule("tick", "https://example.com/other", every="10m")
    assert a.pause("tick").paused_at is not None
    (info,) = a.schedules()
    assert info.schedule.paused_at and info.pending == 0 and info.last_outcome == "cancelled"
    assert info.rule == "Every 5 minutes"
    a.resume("tick")
    assert a.schedules()[0].pending == 1
    a.remove_schedule("tick")
    with pytest.raises(ScheduleNotFound):
        a.get_schedule("tick")


# -- the commands -------------------------------------------------------------------------------
def cli(home, *args, input=None):
    from freezegun import freeze_time
    from typer.testing import CliRunner

    from awty.cli import app

    with freeze_time(T0):
        return CliRunner().invoke(app, [*args, "--home", str(home)], input=input)


@pytest.mark.slow
def test_cli_schedule_add_list_next_pause(home):
    res = cli(home, "schedule", "add", "report", "https://example.com/r", "--cron",
              "0 9 * * mon-fri", "--tz", "Europe/Berlin", "--header", "X-Team: ops")
    assert res.exit_code == 0, res.output
    assert "0 9 * * mon-fri" in res.stdout  # the words are `show`'s and `list`'s
    assert "At 09:00, Monday through Friday" in cli(home, "schedule", "show", "report").stdout
    listed = json.loads(cli(home, "schedule", "list", "--json").stdout)
    assert [(d["name"], d["rule"], d["zone"], d["next"], d["paused"]) for d in listed] == [
        ("report", "At 09:00, Monday through Friday", "Europe/Berlin", "2026-11-23T08:00:00Z",
         False)]
    nxt = json.loads(cli(home, "schedule", "next", "report", "-n", "2", "--json").stdout)
    assert nxt == [{"occurrence": "2026-11-23T08:00:00Z", "slot": "202611230800"},
                   {"occurrence": "2026-11-24T08:00:00Z", "slot": "202611240800"}]
    assert cli(home, "schedule", "pause", "report").exit_code == 0
    assert json.loads(cli(home, "schedule", "list", "--json").stdout)[0]["paused"] is True
    assert cli(home, "schedule", "remove", "report").exit_code == 0
    assert json.loads(cli(home, "schedule", "list", "--json").stdout) == []


@pytest.mark.parametrize("args, line", [
    (["--cron", "0 25 * * *"], "awty: cron: hour field '25' in '0 25 * * *': 25 is out of "
                               "range (0-23)"),
    (["--every", "0"], "awty: every: '0' is no interval: give one of at least a minute"),
    (["--cron", "0 9 * * *", "--tz", "Nowhere/Land"], "awty: tz: unknown time zone"),
    (["--every", "1m"], "awty: every: --every 1m fires 1m apart, finer than this home's "
                        "15-minute slots (resolution 15)"),
])
def test_cli_bad_schedule_is_one_line_exit_2_nothing_stored(home, args, line):
    res = cli(home, "schedule", "add", "tick", "https://example.com/", *args)
    assert res.exit_code == 2
    assert res.stderr.startswith(line) and res.stderr.count("\n") == 1, res.stderr
    assert json.loads(cli(home, "schedule", "list", "--json").stdout) == []


@pytest.mark.slow
def test_cli_import_crontab(home, tmp_path):
    sample = Path(__file__).parent / "data" / "crontab.sample"
    shown = cli(home, "schedule", "import-crontab", str(sample))
    assert shown.exit_code == 1  # the sample holds lines that cannot be carried over
    made = [ln for ln in shown.stdout.splitlines() if ln.startswith("awty schedule add ")]
    assert made and all("--exec --cron" in ln for ln in made)
    assert "not carried over" in shown.stderr
    assert json.loads(cli(home, "schedule", "list", "--json").stdout) == []
    applied = cli(home, "schedule", "import-crontab", str(sample), "--apply")
    names = [d["name"] for d in json.loads(cli(home, "schedule", "list", "--json").stdout)]
    assert len(names) == len(made) and applied.exit_code == 1


def test_schedule_help_has_examples_and_add_imports_nothing_new(home):
    out = subprocess.run([sys.executable, "-m", "awty", "schedule", "--help"],
                         capture_output=True, text=True, env={**os.environ, "AWTY_HOME": str(home)})
    assert out.returncode == 0 and "Examples:" in out.stdout
    probe = ("import sys, awty.cli.quickadd, awty.cli.addjob; "
             "print(sorted(m for m in sys.modules if m.split('.')[-1] in "
             "('schedules', 'schedule', 'recurrence', 'missed', 'schedrules', 'cronsim', "
             "'cron_descriptor')))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True,
                          text=True).stdout.strip() == "[]"


@pytest.mark.parametrize("policy, line", [
    ("once", "1 would fire, 34 missed occurrence(s) would be skipped"),
    ("skip", "1 would end skipped (missed policy), 35 missed occurrence(s) would be skipped"),
    ("all", "1 would fire, 34 missed occurrence(s) would fire in the next slot"),
])
def test_catchup_dry_run_shows_what_the_missed_policy_would_do(home, policy, line):
    """Runners stopped 3 hours: `catchup --dry-run` says what the claim of the pending
    occurrence would fire and skip, and changes nothing."""
    from typer.testing import CliRunner

    from awty.cli import app

    def run(*args, now):
        res = CliRunner().invoke(app, [*args, "--home", str(home)],
                                 env={"AWTY_NOW": now, "AWTY_RESOLUTION": "1"})
        assert res.exit_code == 0, res.stderr
        return res.stdout

    run("schedule", "add", "tick", "https://example.com/", "--cron", "*/5 * * * *", "--tz",
        "UTC", "--missed", policy, now="2026-11-22T10:02:00Z")
    out = run("catchup", "--dry-run", now="2026-11-22T13:00:30Z")
    assert f"slot 202611221005: {line}" in out, out
    with Awty(home, env={}) as a:
        assert [j.occurrence for j in a.store.schedule_jobs("tick")] == [
            datetime(2026, 11, 22, 10, 5, tzinfo=UTC)]
        assert a.history() == []
