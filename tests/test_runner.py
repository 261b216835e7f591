"""The runner against a real HTTP receiver on 127.0.0.1, a real SQLite file and slot tree,
and a FixedClock moved slot by slot (never sleeping for a slot)."""

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from standardwebhooks.webhooks import Webhook

from awty.api import Awty
from awty.errors import InvalidInput
from awty.slots import iso, slot_for, slot_id
from helpers import EXECUTIONS, T0, db_rows, tree_files
from awty.testing.receiver import Reply

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def make(home, clock, backend=None, **overrides):
    """An Awty on SQLite, or on the ``backend`` fixture's store (tests taking ``backend`` run
    once per store)."""
    env = overrides.pop("env", {})
    overrides.setdefault("quick_retries", 0)
    if backend is not None:
        overrides.update(backend.kw)
    a = Awty(home, clock=clock, env=env, **overrides)
    _made.append(a)
    return a


_made: list[Awty] = []


@pytest.fixture(autouse=True)
def _close_made():
    """Close what ``make`` opened (a PostgreSQL pool has threads to stop)."""
    yield
    while _made:
        _made.pop().close()


def fire(a, clock, at):
    """Move the clock to ``at`` and run the slot that has just passed, as cron would."""
    clock.set(at)
    return a.run_slot()


def hist(home):
    return {h["id"]: h for h in db_rows(home, "job_history")}


def ended(a) -> dict[str, dict]:
    """``hist`` through the API: what either store says about ended jobs."""
    return {h.id: {"outcome": h.outcome.value, "reason": h.reason, "attempts": h.attempts}
            for h in a.history()}


def test_every_job_delivered_once_in_order_signed(home, clock, rx, backend):
    a = make(home, clock, backend, env={"AWTY_SIGNING_SECRET": SECRET}, concurrency=1)
    ids = [a.add(rx.url(f"/j{i}"), in_="5m", payload={"n": i}, entity="order",
                 key=str(i)).job.id for i in range(20)]
    slot = slot_for(T0 + timedelta(minutes=5), 15)
    summary = fire(a, clock, slot + timedelta(seconds=3))
    assert summary.outcomes == {"done": 20} and summary.ran == 20
    reqs = rx.requests()
    assert [r.job_id for r in reqs] == sorted(ids)  # claim order = id order
    assert sorted(ids) == ids  # due at the same moment: in the order they were added
    first = next(r for r in reqs if r.job_id == ids[0])
    body = json.loads(first.body)
    assert body == {"id": ids[0], "entity": "order", "key": "0", "payload": {"n": 0},
                    "check": 1, "attempt": 1, "slot": slot_id(slot),
                    "first_check_at": iso(T0 + timedelta(minutes=5))}
    h = first.headers
    assert h["content-type"] == "application/json" and h["user-agent"].startswith("awty/")
    assert h["x-awty-check"] == "1" and h["x-awty-attempt"] == "1"
    assert int(h["webhook-timestamp"]) == int(clock.now().timestamp())  # the attempt's time
    with freeze_time(clock.now()):
        for r in reqs:
            Webhook(SECRET).verify(r.body, r.headers)
    assert list(a.list()) == [] and tree_files(home) == []
    assert not (home / "slots" / slot_id(slot)).exists()  # emptied slot removed
    assert {v["outcome"] for v in ended(a).values()} == {"done"}


def test_recheck_moves_to_later_slot_then_max_checks_expires(home, clock, rx):
    a = make(home, clock, max_checks=5)
    rx.script("/r", json={"recheck_in": "1h"})
    job = a.add(rx.url("/r"), in_="1m").job
    at = job.next_check_at
    for n in range(1, 6):
        s = fire(a, clock, at)
        assert s.rechecked == 1
        row = db_rows(home, "future_job")[0]
        assert row["check_count"] == n
        expected = slot_for(at + timedelta(hours=1), 15)
        assert row["next_check_at"] == iso(expected)
        assert tree_files(home) == [f"{slot_id(expected)}/{job.id}.json"]
        at = expected
    s = fire(a, clock, at)  # the 6th re-check request is refused
    assert s.outcomes == {"expired": 1}
    h = hist(home)[job.id]
    assert (h["outcome"], h["reason"], h["checks"]) == ("expired", "max_checks", 6)
    assert len(rx.requests("/r")) == 6
    assert [json.loads(r.body)["check"] for r in rx.requests("/r")] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("answer, reason", [
    ({"recheck_in": "30d"}, "horizon"),
    ({"recheck_at": "2020-01-01T00:00:00Z"}, "recheck_in_past"),
])
def test_recheck_guards(home, clock, rx, answer, reason, backend):
    a = make(home, clock, backend)
    rx.script("/g", json=answer)
    job = a.add(rx.url("/g"), in_="1m").job
    fire(a, clock, job.next_check_at)
    assert (ended(a)[job.id]["outcome"], ended(a)[job.id]["reason"]) == ("expired", reason)


def test_202_retry_after_is_a_recheck(home, clock, rx):
    a = make(home, clock)
    rx.script("/w", Reply(status=202, headers={"Retry-After": "3600"}), Reply(status=204))
    job = a.add(rx.url("/w"), in_="1m").job
    fire(a, clock, job.next_check_at)
    row = db_rows(home, "future_job")[0]
    assert row["check_count"] == 1 and row["attempt"] == 0
    assert row["next_check_at"] == iso(slot_for(job.next_check_at + timedelta(hours=1), 15))


def test_500_then_200_retried_in_a_later_slot(home, clock, rx):
    a = make(home, clock)
    rx.script("/f", status=[500, 200])
    job = a.add(rx.url("/f"), in_="1m").job
    s = fire(a, clock, job.next_check_at)
    assert s.retried == 1
    row = db_rows(home, "future_job")[0]
    assert row["attempt"] == 1 and row["last_error"] == "http 500"
    retry_slot = datetime.fromisoformat(row["next_check_at"])
    assert retry_slot == slot_for(job.next_check_at + timedelta(seconds=10), 15)
    s = fire(a, clock, retry_slot)
    assert s.outcomes == {"done": 1}
    h = hist(home)[job.id]
    assert (h["outcome"], h["attempts"], h["last_status"]) == ("done", 2, 200)
    assert [r.headers["x-awty-attempt"] for r in rx.requests("/f")] == ["1", "2"]
    assert len({r.headers["webhook-id"] for r in rx.requests("/f")}) == 1  # stable id


def test_webhook_id_names_one_check_and_stays_for_its_retries(home, clock, rx, backend):
    """A receiver deduplicating on webhook-id (as Standard Webhooks advises) must get a job's
    second check: a check again, then 503, then 204 is two messages, the second sent twice."""
    a = make(home, clock, backend, env={"AWTY_SIGNING_SECRET": SECRET})
    rx.script("/c", Reply(status=200, json={"recheck_in": "1h"}), Reply(status=503),
              Reply(status=204))
    job = a.add(rx.url("/c"), in_="1m").job
    pending = [job]
    for _ in range(3):
        fire(a, clock, pending[0].next_check_at)
        pending = list(a.list())
    assert pending == []
    reqs = rx.requests("/c")
    assert [(r.check, r.attempt) for r in reqs] == [(1, 1), (2, 1), (2, 2)]
    ids = [r.headers["webhook-id"] for r in reqs]
    assert ids == [f"{job.id}_1", f"{job.id}_2", f"{job.id}_2"]
    assert all(len(i) <= 64 and i.isprintable() for i in ids)
    assert {r.job_id for r in reqs} == {job.id}  # X-Awty-Job-Id
    for r in reqs:
        with freeze_time(datetime.fromtimestamp(int(r.headers["webhook-timestamp"]), UTC)):
            assert Webhook(SECRET).verify(r.body, r.headers)["id"] == job.id  # body: the job
    assert ended(a)[job.id]["outcome"] == "done"


def test_always_500_fails_after_max_attempts_and_retry_rearms(home, clock, rx):
    a = make(home, clock, max_attempts=3)
    rx.script("/x", status=503)
    job = a.add(rx.url("/x"), in_="1m").job
    at = job.next_check_at
    for _ in range(3):
        fire(a, clock, at)
        rows = db_rows(home, "future_job")
        if rows:
            at = datetime.fromisoformat(rows[0]["next_check_at"])
    assert db_rows(home, "future_job") == []
    h = hist(home)[job.id]
    assert (h["outcome"], h["attempts"], h["reason"]) == ("failed", 3, "http 503")
    assert len(rx.requests("/x")) == 3
    rx.script("/x", status=200)
    a.retry([job.id])
    row = db_rows(home, "future_job")[0]
    assert row["attempt"] == 0 and row["id"] == job.id
    fire(a, clock, datetime.fromisoformat(row["next_check_at"]))
    assert [h["outcome"] for h in db_rows(home, "job_history")] == ["failed", "done"]


@pytest.mark.parametrize("status, outcome, reason", [
    (404, "failed", "http 404"), (410, "gone", "http 410"), (400, "failed", "http 400"),
])
def test_terminal_statuses(home, clock, rx, status, outcome, reason, backend):
    a = make(home, clock, backend)
    rx.script("/t", status=status)
    job = a.add(rx.url("/t"), in_="1m").job
    fire(a, clock, job.next_check_at)
    h = ended(a)[job.id]
    assert (h["outcome"], h["reason"], h["attempts"]) == (outcome, reason, 1)
    assert len(rx.requests("/t")) == 1


def test_redirect_not_followed(home, clock, rx, backend):
    a = make(home, clock, backend)
    rx.script("/moved", status=302, headers={"Location": rx.url("/elsewhere")})
    job = a.add(rx.url("/moved"), in_="1m").job
    fire(a, clock, job.next_check_at)
    assert ended(a)[job.id]["outcome"] == "failed"
    assert rx.requests("/elsewhere") == []


@pytest.mark.slow
def test_hanging_receiver_is_cut_and_the_slot_completes(home, clock, rx, backend):
    a = make(home, clock, backend, timeout="1s")
    rx.script("/hang", hang=True)
    hung = a.add(rx.url("/hang"), in_="1m").job
    ok = [a.add(rx.url(f"/ok{i}"), in_="1m").job for i in range(30)]
    started = time.monotonic()
    s = fire(a, clock, hung.next_check_at)
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    assert s.outcomes == {"done": 30} and s.retried == 1
    [row] = a.list()
    assert row.id == hung.id and "timeout" in row.last_error
    assert set(ended(a)) == {j.id for j in ok}


def test_future_slot_refused(home, clock, backend):
    a = make(home, clock, backend)
    with pytest.raises(InvalidInput, match="future"):
        a.run_slot(slot_for(T0 + timedelta(hours=1), 15))


def test_cancelled_job_not_delivered(home, clock, rx, backend):
    a = make(home, clock, backend)
    keep = a.add(rx.url("/keep"), in_="1m").job
    drop = a.add(rx.url("/drop"), in_="1m").job
    a.cancel([drop.id])
    assert not (home / "slots" / slot_id(drop.next_check_at) / f"{drop.id}.json").exists()
    fire(a, clock, keep.next_check_at)
    assert rx.requests("/drop") == [] and len(rx.requests("/keep")) == 1


def test_orphan_file_is_removed_not_run(home, clock, rx):
    a = make(home, clock)
    job = a.add(rx.url("/o"), in_="1m").job
    path = home / "slots" / slot_id(job.next_check_at) / f"{job.id}.json"
    saved = path.read_bytes()
    a.cancel([job.id])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(saved)  # a stale envelope of an ended job (e.g. a crash mid-cancel)
    s = fire(a, clock, job.next_check_at)
    assert s.orphans_removed == 1 and rx.requests("/o") == []
    assert tree_files(home) == []


def test_row_without_file_still_runs(home, clock, rx):
    a = make(home, clock)
    job = a.add(rx.url("/nofile"), in_="1m").job
    os.unlink(home / "slots" / slot_id(job.next_check_at) / f"{job.id}.json")
    fire(a, clock, job.next_check_at)
    assert len(rx.requests("/nofile")) == 1


def test_drop_in_envelope_runs_and_malformed_is_set_aside(home, clock, rx):
    a = make(home, clock)
    real = a.add(rx.url("/real"), in_="1m").job
    slot_dir = home / "slots" / slot_id(real.next_check_at)
    (slot_dir / "from-another-program.json").write_text(json.dumps(
        {"target": rx.url("/dropped"), "payload": {"hello": "world"}, "entity": "x"}))
    (slot_dir / "broken.json").write_text("{not json")
    (slot_dir / "bad-target.json").write_text(json.dumps({"target": "ftp://nope"}))
    s = fire(a, clock, real.next_check_at)
    assert s.imported == 1 and s.rejected == 2
    assert s.outcomes == {"done": 2}
    dropped = rx.requests("/dropped")
    assert len(dropped) == 1 and json.loads(dropped[0].body)["payload"] == {"hello": "world"}
    rejected = home / "rejected" / slot_id(real.next_check_at)
    assert (rejected / "broken.json").exists()
    assert "not JSON" in (rejected / "broken.json.reason").read_text()
    assert "http" in (rejected / "bad-target.json.reason").read_text()


def test_exec_and_python_jobs_through_the_runner(home, clock, tmp_path, monkeypatch):
    a = make(home, clock)
    mod = tmp_path / "checks_mod.py"
    mod.write_text("from datetime import timedelta\n"
                   "def later(job):\n    return timedelta(hours=2)\n"
                   "def done(job):\n    return None\n")
    out = tmp_path / "out.txt"
    monkeypatch.chdir(tmp_path)
    e1 = a.add(f"cat > {out}; echo ok", kind="exec", in_="1m", payload={"p": 1}).job
    e2 = a.add("echo '{\"recheck_in\": \"1h\"}'", kind="exec", in_="1m").job
    e3 = a.add("exit 4", kind="exec", in_="1m", max_attempts=1).job
    p1 = a.add("checks_mod:later", kind="python", in_="1m").job
    p2 = a.add("checks_mod:done", kind="python", in_="1m").job
    s = fire(a, clock, e1.next_check_at)
    assert json.loads(out.read_text()) == {"p": 1}
    h = hist(home)
    assert h[e1.id]["outcome"] == "done" and h[p2.id]["outcome"] == "done"
    assert (h[e3.id]["outcome"], h[e3.id]["reason"], h[e3.id]["last_status"]) == \
        ("failed", "exit 4", 4)
    pending = {r["id"]: r for r in db_rows(home, "future_job")}
    assert pending[e2.id]["check_count"] == 1 and pending[p1.id]["check_count"] == 1
    assert s.rechecked == 2


def test_history_and_show_events(home, clock, rx, backend):
    a = make(home, clock, backend)
    rx.script("/h", status=[500, 200])
    job = a.add(rx.url("/h"), in_="1m").job
    fire(a, clock, job.next_check_at)
    fire(a, clock, a.get(job.id).job.next_check_at)
    events = a.executions(job.id)
    assert [(e.attempt, e.answer.value, e.status) for e in events] == \
        [(1, "retry", 500), (2, "done", 200)]
    rows = a.history(outcome="done")
    assert [r.id for r in rows] == [job.id]


def test_quick_retry_absorbs_a_dropped_connection(home, clock, rx, backend):
    a = make(home, clock, backend, quick_retries=1)
    rx.script("/q", Reply(status=503), Reply(status=200))
    job = a.add(rx.url("/q"), in_="1m").job
    s = fire(a, clock, job.next_check_at)
    assert s.outcomes == {"done": 1}
    assert ended(a)[job.id]["attempts"] == 2


def test_each_attempts_lateness_is_its_own_start_minus_the_slot(home, rx):
    """A quick retry starts later than the first attempt: its execution row says so (the first
    attempt's lateness is the one the run worked out before sending it)."""
    from awty.clock import FixedClock

    class Ticking(FixedClock):  # a second later at every reading
        def now(self):
            return self.advance(1)

    clock = Ticking(T0)
    a = make(home, clock, quick_retries=1)
    rx.script("/q", Reply(status=503), Reply(status=200))
    job = a.add(rx.url("/q"), in_="1m").job
    fire(a, clock, job.next_check_at)
    rows = sorted(db_rows(home, EXECUTIONS), key=lambda r: r["attempt"])
    assert [r["attempt"] for r in rows] == [1, 2]
    late = [(datetime.fromisoformat(r["at"]) - job.next_check_at).total_seconds() * 1000
            for r in rows]
    assert [r["lateness_ms"] for r in rows] == late and late[0] < late[1]


def test_quick_retry_once_per_check_then_the_backoff_steps(home, clock, rx):
    """A job that always fails: two attempts in its first run (the first failure's quick
    retry), then one a run, each in the slot its backoff step (30 s, 2 m, 10 m, 30 m, rounded
    up to slots) leads to: every step of the schedule is reached before it fails."""
    from awty.slots import backoff_delay

    a = make(home, clock, quick_retries=1)
    rx.script("/down", status=503)
    job = a.add(rx.url("/down"), in_="1m").job
    at, per_run, slots = job.next_check_at, [], []
    while True:
        before = len(rx.requests("/down"))
        fire(a, clock, at)
        per_run.append(len(rx.requests("/down")) - before)
        pending = list(a.list())
        if not pending:
            break
        used = pending[0].attempt
        assert pending[0].next_check_at == slot_for(
            clock.now() + timedelta(seconds=backoff_delay(used, a.settings.backoff)), 15)
        at = pending[0].next_check_at
        slots.append(at)
    assert per_run == [2, 1, 1, 1, 1]
    assert [r.attempt for r in rx.requests("/down")] == [1, 2, 3, 4, 5, 6]
    steps = [(b - a_).total_seconds() / 60 for a_, b in zip([job.next_check_at] + slots, slots)]
    assert steps == [15, 15, 15, 30]  # 30 s, 2 m, 10 m: the next slot; 30 m: two slots on
    assert ended(a)[job.id] == {"outcome": "failed", "reason": "http 503", "attempts": 6}


def test_breaker_defers_an_unreachable_host(home, clock):
    from awty.testing.receiver import free_port

    a = make(home, clock, breaker_threshold=3, concurrency=1)
    port = free_port()  # nothing listens there
    jobs = [a.add(f"http://127.0.0.1:{port}/x{i}", in_="1m").job for i in range(10)]
    s = fire(a, clock, jobs[0].next_check_at)
    assert s.retried == 3 and s.deferred == 7
    rows = db_rows(home, "future_job")
    deferred = [r for r in rows if r["attempt"] == 0]
    assert len(deferred) == 7  # no attempt counted for the deferred
    nxt = slot_for(jobs[0].next_check_at + timedelta(seconds=1), 15)
    assert {r["next_check_at"] for r in deferred} == {iso(nxt)}


# --- real processes ------------------------------------------------------------------------
def awty_proc(home, *args, now):
    env = {**os.environ, "AWTY_HOME": str(home), "AWTY_NOW": iso(now)}
    return subprocess.Popen([sys.executable, "-m", "awty", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_finished_slot_is_retired_whole_and_a_late_drop_in_stays(home, clock, rx,
                                                                 monkeypatch):
    """A slot whose rows are all gone leaves the tree in one rename and is deleted in the
    background; a file dropped in while it ran, once the slot was reconciled (which runs
    beside the sending), is put back for the slot's next run."""
    import awty.run.reconcile as reconcile
    from awty.slottree.retire import wait_purged

    late = json.dumps({"target": rx.url("/late")})
    reconciled = reconcile.Reconciler._reconcile

    def then_drop_late(self, *args):
        reconciled(self, *args)
        if not (slot_dir / "late.json").exists() and not rx.requests("/late"):
            (slot_dir / "late.json").write_text(late)

    monkeypatch.setattr(reconcile.Reconciler, "_reconcile", then_drop_late)
    a = make(home, clock, batch_size=10)
    jobs = [a.add(rx.url(f"/j{i}"), in_="1m").job for i in range(30)]
    slot_dir = home / "slots" / slot_id(jobs[0].next_check_at)
    s = fire(a, clock, jobs[0].next_check_at + timedelta(seconds=1))
    assert s.outcomes == {"done": 30}
    assert tree_files(home) == [f"{slot_id(jobs[0].next_check_at)}/late.json"]
    wait_purged(timeout=30)
    assert list((home / ".retired").iterdir()) == []
    monkeypatch.setattr(reconcile.Reconciler, "_reconcile", reconciled)
    again = a.run_slot(jobs[0].next_check_at)  # the late file is imported and fired
    assert again.imported == 1 and again.outcomes == {"done": 1}
    assert len(rx.requests("/late")) == 1 and tree_files(home) == []


def test_a_retirement_cut_short_gives_its_files_back_at_the_next_run(home, clock, rx,
                                                                     monkeypatch):
    """A runner killed between retire()'s rename and its check leaves ``<slot>.<hex>`` in
    .retired: the next run puts its files back, and the slot's next run imports the late one."""
    from awty.slottree import retire

    a = make(home, clock)
    job = a.add(rx.url("/first"), in_="1m").job
    cut = home / ".retired" / f"{slot_id(job.next_check_at)}.0a1b2c3d"
    cut.mkdir(parents=True)
    (cut / "late.json").write_text(json.dumps({"target": rx.url("/late")}))
    monkeypatch.setattr(retire, "CUT_SHORT_AGE", 0.0)
    fire(a, clock, job.next_check_at + timedelta(seconds=1))
    assert not cut.exists()
    assert tree_files(home) == [f"{slot_id(job.next_check_at)}/late.json"]
    again = a.run_slot(job.next_check_at)
    assert again.imported == 1 and len(rx.requests("/late")) == 1


def test_a_symlinked_retired_directory_is_never_used(home, clock, rx, tmp_path):
    from awty.slottree.retire import wait_purged

    elsewhere = tmp_path / "elsewhere"
    victim = elsewhere / "202611220900.0a1b2c3d.purge"
    victim.mkdir(parents=True)
    (victim / "keep.txt").write_text("not awty's")
    a = make(home, clock)
    jobs = [a.add(rx.url(f"/v{i}"), in_="1m").job for i in range(5)]
    (home / ".retired").symlink_to(elsewhere)
    s = fire(a, clock, jobs[0].next_check_at + timedelta(seconds=1))
    wait_purged(timeout=30)
    assert s.outcomes == {"done": 5} and tree_files(home) == []  # removed file by file
    assert (victim / "keep.txt").read_text() == "not awty's"
    assert sorted(p.name for p in elsewhere.iterdir()) == [victim.name]


def test_a_shard_removes_only_its_own_envelopes(home, clock, rx):
    a = make(home, clock)
    jobs = [a.add(rx.url(f"/s{i}"), in_="1m").job for i in range(40)]
    clock.set(jobs[0].next_check_at + timedelta(seconds=1))
    first = a.run_slot(jobs[0].next_check_at, shard=(0, 2))
    left = {r["id"] for r in db_rows(home, "future_job")}
    assert 0 < first.ran < 40 and len(left) == 40 - first.ran
    assert {f.split("/")[1][:-5] for f in tree_files(home)} == left  # the other shard's files
    assert not (home / ".retired").exists()
    second = a.run_slot(jobs[0].next_check_at, shard=(1, 2))
    assert second.ran == len(left) and tree_files(home) == []


@pytest.mark.slow
def test_two_runners_at_once_deliver_each_job_exactly_once(home, clock, rx):
    a = make(home, clock)
    jobs = [a.add(rx.url(f"/p{i}"), in_="1m").job for i in range(200)]
    rx.script("/p", delay=0.0)
    at = jobs[0].next_check_at + timedelta(seconds=1)
    procs = [awty_proc(home, "run-slot", "--json", now=at) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ids = [r.job_id for r in rx.requests()]
    assert sorted(ids) == sorted(j.id for j in jobs)  # each exactly once
    assert len(db_rows(home, "job_history")) == 200
    docs = [json.loads(o[0]) for o in outs]
    assert sum(d["ran"] for d in docs) == 200


@pytest.mark.slow
def test_run_slot_cli_json_summary(home, clock, rx):
    a = make(home, clock)
    job = a.add(rx.url("/c"), in_="1m").job
    p = awty_proc(home, "run-slot", slot_id(job.next_check_at), "--json",
                  now=job.next_check_at + timedelta(seconds=5))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert doc["slot"] == slot_id(job.next_check_at) and doc["outcomes"] == {"done": 1}
    p = awty_proc(home, "run-slot", "209901010000", now=job.next_check_at)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "future" in err


def test_drop_in_replaying_a_known_id_is_set_aside(home, clock, rx):
    a = make(home, clock)
    done = a.add(rx.url("/first"), in_="1m").job
    fire(a, clock, done.next_check_at)
    nxt = a.add(rx.url("/next"), in_="20m").job
    slot_dir = home / "slots" / slot_id(nxt.next_check_at)
    (slot_dir / "replay.json").write_text(json.dumps({"id": done.id, "target": rx.url("/again")}))
    s = fire(a, clock, nxt.next_check_at)
    assert s.rejected == 1 and rx.requests("/again") == []
    assert [h["id"] for h in db_rows(home, "job_history")].count(done.id) == 1


def test_config_ceilings(home, clock):
    with pytest.raises(InvalidInput, match="at most 10000"):
        Awty(home, clock=clock, env={}, concurrency=10**9)


def test_a_small_slot_records_its_results_while_its_last_answers_are_due(home, clock,
                                                                         monkeypatch):
    # Nothing left to claim: results are written as soon as the store is free, not kept for a
    # whole batch. Kept, a slot smaller than a batch wrote every result in one transaction after
    # its last answer (~25 ms at 1,000 jobs, once per slot of a catch-up).
    from awty.run import slotrun
    from awty.store.sqlite import SQLiteStore
    from awty.testing.receiver import Receiver

    sizes: list[int] = []
    real = SQLiteStore.finish

    def finish(self, decisions, **kw):
        sizes.append(len(decisions))
        return real(self, decisions, **kw)

    monkeypatch.setattr(SQLiteStore, "finish", finish)
    # No flush by the clock, and answers slow enough (200 / 8 x 20 ms = 0.5 s) that the slot is
    # known to be empty (after reconciling, on its own thread) long before its last answer, even
    # on a busy machine: at 2 ms a busy CI run once reconciled only near the end ([197, 3]).
    monkeypatch.setattr(slotrun, "FLUSH_EVERY", 60.0)
    n = 200
    with Receiver(delay=0.02, keep=False) as rx:
        a = make(home, clock, concurrency=8, batch_size=1000, store_process="off")
        jobs = [r.job for r in a.add_many([{"target": rx.url("/t"), "in": "1m"}
                                           for _ in range(n)])]
        s = fire(a, clock, jobs[0].next_check_at + timedelta(seconds=1))
        delivered = rx.counts()
    assert s.ran == n and sorted(delivered.values()) == [1] * n
    assert sum(sizes) == n and len(sizes) > 2
    assert sizes[-1] < n // 4, sizes  # what waited for the last answer is a small part
