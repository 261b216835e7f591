"""`awty run ID…`: named jobs fired now, through the command line, at a real receiver; a real
`awty run-slot` process holding a job shows that a job being delivered is never sent twice."""

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from helpers import EXECUTIONS, db_rows, job_rows, tree_files
from freezegun import freeze_time
from standardwebhooks.webhooks import Webhook
from typer.testing import CliRunner

from awty.cli import app
from awty.testing.receiver import Reply

runner = CliRunner()
NOW = "2026-11-22T10:07:12Z"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def run(home, *args, env=None):
    with freeze_time(NOW):
        return runner.invoke(app, [*args, "--home", str(home)],
                             env={"AWTY_QUICK_RETRIES": "0", **(env or {})})


def add(home, url, *args):
    res = run(home, "add", url, "--json", *args)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def hist(home):
    return {h["id"]: h for h in db_rows(home, "job_history")}


def test_fires_now_signed_lower_case_and_prefix_ids(home, rx):
    rx.script("/a", status=204)
    a = add(home, rx.url("/a"), "--in", "2h", "--payload", '{"order": 42}')
    b = add(home, rx.url("/a"), "--in", "3h")
    assert len(tree_files(home)) == 2
    res = run(home, "run", a["id"].lower(), b["id"][:12], env={"AWTY_SIGNING_SECRET": SECRET})
    assert res.exit_code == 0, res.stderr
    assert f"{a['id']} done (204)" in res.stdout and f"{b['id']} done (204)" in res.stdout
    reqs = rx.requests("/a")
    # The two are sent concurrently: either may arrive first.
    assert len(reqs) == 2
    assert {r.json()["id"]: r.json()["payload"] for r in reqs}[a["id"]] == {"order": 42}
    with freeze_time(NOW):
        for r in reqs:
            Webhook(SECRET).verify(r.body, r.headers)
    # Ended as a slot run ends jobs: history, executions, no row, no envelope, no slot dir.
    assert db_rows(home, "future_job") == [] and tree_files(home) == []
    assert not any((home / "slots").iterdir())
    assert {h["outcome"] for h in hist(home).values()} == {"done"}
    # Each execution is recorded under the job's own slot, as the body's "slot" says.
    assert sorted(e["slot"] for e in db_rows(home, EXECUTIONS)) == [a["slot"], b["slot"]]
    assert reqs[0].json()["slot"] in (a["slot"], b["slot"])


def test_recheck_is_reslotted_and_json(home, rx):
    rx.script("/r", json={"recheck_in": "1h"})
    job = add(home, rx.url("/r"), "--in", "5h")
    res = run(home, "run", job["id"], "--json")
    assert res.exit_code == 0, res.stderr
    d = json.loads(res.stdout)
    assert (d["ran"], d["rechecked"], d["outcomes"]) == (1, 1, {})
    [j] = d["jobs"]
    assert (j["id"], j["outcome"], j["status"]) == (job["id"], "rechecked", 200)
    assert j["next_check_at"] == "2026-11-22T11:15:00Z"  # now + 1h, in its slot
    [row] = job_rows(home)
    assert (row["status"], row["check_count"], row["lease_owner"]) == ("pending", 1, None)
    assert tree_files(home) == [f"202611221115/{job['id']}.json"]  # moved, old one gone
    assert len(rx.requests("/r")) == 1


def test_reslotted_into_its_own_slot_keeps_its_envelope(home, rx):
    rx.script("/r", json={"recheck_in": "10m"})
    job = add(home, rx.url("/r"), "--in", "13m")  # due 10:20, re-checked for 10:17: slot 10:30
    assert job["slot"] == "202611221030"
    assert run(home, "run", job["id"]).exit_code == 0
    assert tree_files(home) == [f"202611221030/{job['id']}.json"]
    assert db_rows(home, "future_job")[0]["check_count"] == 1


def test_a_failed_job_exits_1(home, rx):
    rx.script("/gone", status=404)
    job = add(home, rx.url("/gone"), "--in", "1d")
    res = run(home, "run", job["id"])
    assert res.exit_code == 1
    assert f"{job['id']} failed (404): http 404" in res.stdout
    assert hist(home)[job["id"]]["outcome"] == "failed"


@pytest.mark.slow
def test_errors_change_nothing(home, rx):
    ok = add(home, rx.url("/ok"), "--in", "2h")
    ended = add(home, rx.url("/ok"), "--in", "2h")
    assert run(home, "cancel", ended["id"]).exit_code == 0
    before = db_rows(home, "future_job"), tree_files(home)

    res = run(home, "run", ok["id"], "01ZZZZZZZZ")
    assert res.exit_code == 1 and "no such job: 01ZZZZZZZZ" in res.stderr
    res = run(home, "run", ok["id"], ended["id"])
    assert res.exit_code == 1 and "has ended" in res.stderr
    other = add(home, rx.url("/ok"), "--in", "2h")  # same instant: same time prefix
    res = run(home, "run", ok["id"][:8])
    assert res.exit_code == 2 and "ambiguous" in res.stderr and other["id"] in res.stderr
    res = run(home, "run", ok["id"][:4])
    assert res.exit_code == 2 and "too short" in res.stderr

    assert rx.total == 0
    rows = [r for r in db_rows(home, "future_job") if r["id"] != other["id"]]
    assert (rows, [f for f in tree_files(home) if other["id"] not in f]) == before


@pytest.mark.slow
def test_job_held_by_a_live_runner_is_not_sent_twice(home, rx):
    """A real `awty run-slot` process is delivering the job (the receiver holds its request):
    `awty run` refuses it, naming that runner, and the receiver sees one request only."""
    rx.script("/slow", Reply(delay=3, status=200))
    job = add(home, rx.url("/slow"), "--in", "1m")
    slot = job["slot"]
    env = {**os.environ, "AWTY_HOME": str(home), "AWTY_QUICK_RETRIES": "0",
           "AWTY_NOW": f"{slot[:4]}-{slot[4:6]}-{slot[6:8]}T{slot[8:10]}:{slot[10:]}:05Z"}
    p = subprocess.Popen([sys.executable, "-m", "awty", "run-slot"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rx.wait_for(1, "/slow", timeout=30)
        res = runner.invoke(app, ["run", job["id"], "--home", str(home)],
                            env={"AWTY_NOW": env["AWTY_NOW"]})
        assert res.exit_code == 1, res.stdout + res.stderr
        assert f"being delivered now (runner pid {p.pid})" in res.stderr
        assert "nothing was run" in res.stderr
    finally:
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert len(rx.requests("/slow")) == 1
    assert hist(home)[job["id"]]["outcome"] == "done"
    executions = db_rows(home, EXECUTIONS)
    assert len(executions) == 1 and executions[0]["slot"] == slot


def test_past_due_job_fires_even_under_misfire_skip(home, rx):
    job = add(home, rx.url("/late"), "--in", "1m")
    later = datetime(2026, 11, 23, 9, 0).isoformat() + "Z"
    res = runner.invoke(app, ["run", job["id"], "--home", str(home)],
                        env={"AWTY_NOW": later, "AWTY_MISFIRE": "skip"})
    assert res.exit_code == 0, res.stderr
    assert len(rx.requests("/late")) == 1 and hist(home)[job["id"]]["outcome"] == "done"
