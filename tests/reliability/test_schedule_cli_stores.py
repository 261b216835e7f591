"""Issue 32, as real ``awty`` processes on each store (``backend``), the clock pinned per
process (``AWTY_NOW``):

- ``schedule import-crontab FILE --apply`` makes the schedules its dry run prints, each as
  the crontab said (rule, zone, command, the environment lines before it), and refuses a
  second ``--apply`` naming a schedule, making nothing more;
- a daily Berlin rule across the spring-forward day (2027-03-28): ``30 2 * * *`` has no 02:30
  that day, fires at 03:30 CEST (01:30 UTC) once, nothing at the hour it would have been,
  and returns to 02:30 CEST (00:30 UTC) the day after; a real receiver on 127.0.0.1 gets
  each occurrence once, named in its header.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.testing.receiver import Receiver
from relkit import cli_env, run_cli

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

SAMPLE = Path(__file__).parent.parent / "data" / "crontab.sample"


def _env(home, backend, now, **settings):
    return {**cli_env(home, now, **settings), **backend.env}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_import_crontab_apply_makes_what_it_prints(home, backend):
    now = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    env = _env(home, backend, now)
    shown = run_cli(["schedule", "import-crontab", str(SAMPLE)], env)
    assert shown.returncode == 1, shown.stderr  # the sample holds lines it cannot carry over
    assert "not carried over" in shown.stderr
    made = [ln for ln in shown.stdout.splitlines() if ln.startswith("awty schedule add ")]
    assert made and all("--exec --cron" in ln for ln in made)
    listed = run_cli(["schedule", "list", "--json"], env)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []  # a dry run

    applied = run_cli(["schedule", "import-crontab", str(SAMPLE), "--apply"], env)
    assert applied.returncode == 1, applied.stderr
    listed = run_cli(["schedule", "list", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    names = [d["name"] for d in json.loads(listed.stdout)]
    assert len(names) == len(made) == len(set(names))
    with Awty(home, clock=FixedClock(now), env={}, **backend.kw) as a:
        got = {s.cron: s for s in a.store.schedules()}
        # CRON_TZ applies to the lines after it
        assert (got["30 2 * * *"].zone, got["0 12 * * *"].zone) == ("Europe/Berlin", "UTC")
        backup = got["30 2 * * *"]
        assert backup.template.target == ("exec /bin/bash -c '/usr/local/bin/backup-db.sh "
                                          "--full > /var/log/backup.log 2>&1'")  # SHELL
        assert backup.template.env is not None
        assert backup.template.env.get("MAILTO") == "ops@example.com"
        assert backup.template.env.get("PATH") == "/usr/local/bin:/usr/bin:/bin"
        assert "0 0 * * *" in got  # @daily
        assert "0 9-17/2 * * mon-fri" in got  # a range with a step, day names
        # each schedule has its one pending occurrence, in this store
        for s in got.values():
            assert [j.occurrence for j in a.store.schedule_jobs(s.name)] == [s.next_at]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_daily_berlin_rule_across_spring_forward(home, backend):
    day0 = datetime(2027, 3, 27, 0, 0, tzinfo=UTC)

    def at(now):
        return _env(home, backend, now, resolution=15, timeout=5)

    def run_slot(boundary):
        res = run_cli(["run-slot"], at(boundary + timedelta(seconds=1)))
        assert res.returncode == 0, res.stderr

    with Receiver() as rx:
        added = run_cli(["schedule", "add", "nightly", rx.url("/d"), "--cron", "30 2 * * *",
                         "--tz", "Europe/Berlin"], at(day0))
        assert added.returncode == 0, added.stderr
        nxt = run_cli(["schedule", "next", "nightly", "-n", "3", "--json"], at(day0))
        assert [d["occurrence"] for d in json.loads(nxt.stdout)] == [
            "2027-03-27T01:30:00Z",  # 02:30 CET
            "2027-03-28T01:30:00Z",  # no 02:30 that day: 03:30 CEST, the gap forward
            "2027-03-29T00:30:00Z"]  # 02:30 CEST
        for boundary in (datetime(2027, 3, 27, 1, 30, tzinfo=UTC),
                         datetime(2027, 3, 28, 0, 30, tzinfo=UTC),  # 02:30 CET: nothing
                         datetime(2027, 3, 28, 1, 30, tzinfo=UTC),
                         datetime(2027, 3, 28, 1, 45, tzinfo=UTC)):  # nothing twice
            run_slot(boundary)
        got = Counter(r.headers.get("x-awty-occurrence") for r in rx.requests("/d"))
    assert got == Counter({"2027-03-27T01:30:00Z": 1, "2027-03-28T01:30:00Z": 1})
    with Awty(home, clock=FixedClock(day0 + timedelta(days=2)), env={}, **backend.kw) as a:
        (pending,) = a.store.schedule_jobs("nightly")
        assert pending.occurrence == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)
        assert a.store.get_schedule("nightly").next_at == pending.occurrence
