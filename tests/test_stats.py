"""awty stats / prune: a few jobs ended through the store's own finish() with known events,
then exact numbers from compute(), the CLI's --json, and prune's cut-off."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from helpers import EXECUTIONS, T0, db_rows
from typer.testing import CliRunner

from awty import stats
from awty.cli import app
from awty.errors import InvalidInput
from awty.model import Answer, End, Execution, Outcome, Reslot, Result
from awty.slots import iso, slot_id

URL = "https://example.com/hook"


def event(job, at, attempt, answer, lateness_ms, status=200, error=None):
    return Execution(job.id, at, slot_id(job.next_check_at), 1, attempt, Answer(answer),
                     status, 12.5, lateness_ms, error)


@pytest.fixture
def busy(awty, clock):
    """Two days ago: one job cancelled (outside a 1-day window) and one old execution.
    Now: a slot whose jobs ended done, failed, gone, and one retried into a later slot."""
    clock.set(T0 - timedelta(days=2))
    old = awty.add(URL, in_="1h").job
    awty.cancel([old.id])
    clock.set(T0)
    jobs = [awty.add(URL, in_="1m").job for _ in range(4)]
    awty.add("echo hi", in_="3h", kind="exec")
    awty.add(URL, in_="5h")
    slot = jobs[0].next_check_at  # 10:15
    now = slot + timedelta(seconds=5)
    clock.set(now)
    claimed = {j.id: j for j in awty.store.claim(slot, now=now, owner="t",
                                                  lease_until=now + timedelta(minutes=10),
                                                  limit=10)}
    a, b, c, d = (claimed[j.id] for j in jobs)
    ok = Result(Answer.DONE, status=200, duration=0.0125)
    decisions = [
        End(a, Outcome.DONE, "http 200", ok, 1.0),
        End(b, Outcome.FAILED, "http 500", Result(Answer.RETRY, status=500), 7.0),
        End(c, Outcome.GONE, "http 410", Result(Answer.GONE, status=410), 2.0),
        Reslot(d, slot + timedelta(minutes=30), 0, 1, Result(Answer.RETRY, status=503)),
    ]
    events = [
        event(a, now, 1, "done", 1000.0),
        event(b, now, 1, "retry", 5000.0, 500, "boom"),
        event(b, now, 2, "retry", 7000.0, 500, "boom"),
        event(c, now, 1, "gone", 2000.0, 410),
        event(d, now, 1, "retry", 3000.0, 503),
        event(d, T0 - timedelta(days=2), 1, "done", 99999.0),  # outside the window
    ]
    awty.store.finish(decisions, owner="t", now=now, executions=events)
    # one more job claimed and still running
    e = awty.add(URL, in_="1m").job
    clock.set(e.next_check_at + timedelta(seconds=1))
    awty.store.claim(e.next_check_at, now=clock.now(), owner="u",
                     lease_until=clock.now() + timedelta(minutes=10), limit=10)
    return awty


def test_compute(busy):
    doc = stats.compute(busy)
    p = doc["pending"]
    assert p["total"] == 4  # the retried one, exec, +5h, and the running one
    assert p["by_kind"] == {"exec": 1, "http": 3}
    assert p["in_flight"] == 1 and p["stale_leases"] == 0
    assert p["past_slots"] == {"slots": 0, "jobs": 0}
    assert [s["jobs"] for s in p["next_slots"]] == [1, 1, 1, 1]
    assert p["next_slots"][0]["slot"] == "202611221030"
    assert doc["outcomes"] == {"done": 1, "failed": 1, "gone": 1}  # the cancel is 2 days old
    ex = doc["executions"]
    assert ex["total"] == 5 and ex["retries"] == 1 and ex["failures"] == 3
    assert ex["by_answer"] == {"done": 1, "gone": 1, "retry": 3}
    # lateness 1000 2000 3000 5000 7000: median 3000, p99 the largest
    assert doc["lateness_ms"] == {"count": 5, "median": 3000.0, "p99": 7000.0, "max": 7000.0}


def test_window_widens_and_even_median(busy):
    doc = stats.compute(busy, window=timedelta(days=3))
    assert doc["outcomes"]["cancelled"] == 1
    late = doc["lateness_ms"]
    assert late["count"] == 6 and late["median"] == (3000.0 + 5000.0) / 2
    assert late["p99"] == 99999.0


def test_stale_lease_and_missed_slots_are_counted(busy, clock):
    clock.set(T0 + timedelta(hours=4))
    p = stats.compute(busy)["pending"]
    assert p["stale_leases"] == 1
    assert p["past_slots"] == {"slots": 3, "jobs": 3}
    assert p["next_slots"][0]["slot"] == "202611221515"


def test_empty_home(awty):
    doc = stats.compute(awty)
    assert doc["pending"]["total"] == 0 and doc["outcomes"] == {}
    assert doc["lateness_ms"] == {"count": 0, "median": None, "p99": None, "max": None}
    assert doc["executions"]["total"] == 0


def test_prune(busy):
    assert stats.prune(busy, timedelta(days=1), dry_run=True) == 1
    assert len(db_rows(busy.home, "job_history")) == 4
    assert stats.prune(busy, timedelta(days=1)) == 1
    rows = db_rows(busy.home, "job_history")
    assert sorted(r["outcome"] for r in rows) == ["done", "failed", "gone"]
    assert all(e["at"] >= iso(T0 - timedelta(days=1)) for e in db_rows(busy.home, EXECUTIONS))
    assert stats.prune(busy, timedelta(days=1)) == 0
    assert len(db_rows(busy.home, "future_job")) == 4  # pending work is never pruned
    with pytest.raises(InvalidInput):
        stats.prune(busy, timedelta(0))


# --- command line --------------------------------------------------------------------------
runner = CliRunner()


def cli(home, *args, now):
    return runner.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": iso(now)})


@pytest.mark.slow
def test_cli_stats_json_and_text(busy, clock):
    res = cli(busy.home, "stats", "--json", now=clock.now())
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["lateness_ms"]["median"] == 3000.0 and doc["executions"]["retries"] == 1
    res = cli(busy.home, "stats", "--utc", now=clock.now())
    assert res.exit_code == 0, res.stderr
    assert "1 done, 1 failed, 1 gone" in res.stdout
    assert "median 3.00s, p99 7.00s" in res.stdout
    assert "next slots" in res.stdout and "202611221030" in res.stdout
    res = cli(busy.home, "stats", "--window", "3d", "--json", now=clock.now())
    assert json.loads(res.stdout)["outcomes"]["cancelled"] == 1


def test_cli_stats_bad_window_exit_2(busy, clock):
    for w in ("soon", "0s"):
        res = cli(busy.home, "stats", "--window", w, now=clock.now())
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
        assert "--window" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_cli_prune(busy, clock):
    res = cli(busy.home, "prune", "--older-than", "1d", "--dry-run", "--json", now=clock.now())
    assert json.loads(res.stdout) == {"pruned": 1, "dry_run": True,
                                      "before": iso(clock.now() - timedelta(days=1))}
    res = cli(busy.home, "prune", "--older-than", "1d", now=clock.now())
    assert res.exit_code == 0 and res.stdout.startswith("pruned 1 history row(s)")
    res = cli(busy.home, "prune", now=clock.now())
    assert res.exit_code == 2 and "--older-than" in res.stderr
    res = cli(busy.home, "prune", "--older-than", "forever", now=clock.now())
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


def test_schedules_counted_with_their_skipped_rows(home, clock, backend):
    """Both stores: how many schedules, how many paused, and the skipped rows of the window."""
    from awty.api import Awty

    clock.set(T0)
    with Awty(home, clock=clock, env={}, resolution=1, **backend.kw) as a:
        a.schedule("tick", URL, cron="*/5 * * * *", tz="UTC", missed="skip")
        a.schedule("nightly", URL, cron="0 3 * * *", tz="UTC")
        a.pause("nightly")
        clock.set(T0 + timedelta(hours=1))  # runners stopped an hour: tick's occurrences missed
        a.catchup()
        doc = stats.compute(a)
    assert doc["schedules"] == {"total": 2, "paused": 1, "skipped": 1}
    res = cli(home, "stats", *backend.args, now=clock.now())
    assert res.exit_code == 0, res.stderr
    assert "2 (1 paused); 1 skipped row(s) in the window" in res.stdout


def test_an_answer_this_version_does_not_know_is_counted(busy):
    # by_answer is counted per known answer in one pass; a row with another (a newer version's)
    # must still be told, not dropped from by_answer while counted in the total
    import sqlite3

    conn = sqlite3.connect(busy.home / "awty.db")
    with conn:
        conn.execute("INSERT INTO job_event (job_id, at, slot, check_no, attempt, answer) "
                     "SELECT job_id, at, slot, check_no, attempt, 'later' FROM job_event "
                     "ORDER BY at DESC LIMIT 1")
    conn.close()
    ex = stats.compute(busy)["executions"]
    assert ex["total"] == 6
    assert ex["by_answer"] == {"done": 1, "gone": 1, "later": 1, "retry": 3}


@pytest.mark.parametrize("extra", [0, 1, 95, 96, 195, 196])
def test_lateness_ranks_over_many(busy, extra):
    # the ranks are picked in SQL (the 99th percentile counted from the top): the median's one or
    # two middle values and math.ceil(0.99 * n) - 1, checked against the sorted values
    import math
    import sqlite3

    conn = sqlite3.connect(busy.home / "awty.db")
    with conn:
        conn.executemany("INSERT INTO job_event (job_id, at, slot, check_no, attempt, answer, "
                         "lateness_ms) SELECT job_id, at, slot, check_no, attempt, answer, ? "
                         "FROM job_event ORDER BY at DESC LIMIT 1",
                         [(float((i * 37) % 101),) for i in range(extra)])
    conn.close()
    values = sorted([1000.0, 2000.0, 3000.0, 5000.0, 7000.0]
                    + [float((i * 37) % 101) for i in range(extra)])
    n = len(values)
    late = stats.compute(busy)["lateness_ms"]
    assert late["count"] == n
    assert late["median"] == (values[(n - 1) // 2] + values[n // 2]) / 2
    assert late["p99"] == values[math.ceil(0.99 * n) - 1]
