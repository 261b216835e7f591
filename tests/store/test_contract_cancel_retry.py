"""The store contract (awty/store/base.py), checked against every store. Changing a job: cancel
(one, an entity, a running one), reschedule, retry, prune, and the words of every conflict. Each
test calls ``Store`` methods directly, on a fresh store per test (see conftest.py); the suite's
vocabulary is contractkit.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awty.errors import Conflict, JobNotFound
from awty.model import Answer, End, Kind, Outcome, Result, Status
from awty.record import replace
from contractkit import (
    A, B, MIN, NOW, S1, S2, S3, T0, add, claim, end, execution, hold, ids, mk, wait_dead,
)


def test_cancel_pending_and_claimed_not_started(store):
    p, c, keep = add(store, mk(S2), mk(S1), mk(S1))
    claim(store, S1, limit=1)
    result = store.cancel([p.id, c.id, "01UNKNOWN"], T0, reason="user asked")
    assert sorted(result.cancelled) == sorted([p.id, c.id])
    assert result.running == [] and result.missing == ["01UNKNOWN"]
    assert store.get(p.id) is None and store.get(c.id) is None
    [row] = store.get_history(c.id)
    assert (row.outcome, row.reason, row.ended_at) == (Outcome.CANCELLED, "user asked", T0)
    with store.owner_session(A):
        assert store.start([c.id], owner=A, now=T0) == []
    again = store.cancel([p.id], T0)
    assert again.cancelled == [] and again.missing == [p.id]
    assert store.get(keep.id) is not None


@pytest.mark.slow
def test_cancel_leaves_running_job_of_live_owner(store, case, holders):
    h = hold(case, holders, A)
    [j] = add(store, mk(S1))
    claim(store, S1, owner=A, lease=timedelta(seconds=10))
    store.start([j.id], owner=A, now=NOW)
    later = NOW + timedelta(hours=1)  # lease expired, owner alive: still running
    result = store.cancel([j.id], later)
    assert result.running == [j.id] and result.cancelled == [] and result.missing == []
    assert store.get(j.id).status is Status.IN_FLIGHT
    h.kill()
    wait_dead(store, A, later)
    result = store.cancel([j.id], later)
    assert result.cancelled == [j.id]
    assert store.get_history(j.id)[0].outcome is Outcome.CANCELLED


def test_cancel_started_without_session_judged_by_lease(store, case):
    [j] = add(store, mk(S1))
    claim(store, S1, owner=A, lease=timedelta(seconds=30))
    with store.owner_session(A):  # closed: its owner gone, or never known (SQLite)
        store.start([j.id], owner=A, now=NOW)
    if case.kind == "postgres":
        # no session lock held: the owner is gone (base.py: PostgreSQL always knows), so
        # the job is not being delivered, whatever its lease says
        assert store.cancel([j.id], NOW + timedelta(seconds=29)).cancelled == [j.id]
        return
    assert store.cancel([j.id], NOW + timedelta(seconds=29)).running == [j.id]
    assert store.cancel([j.id], NOW + timedelta(seconds=30)).cancelled == [j.id]


@pytest.mark.slow
def test_a_started_job_of_a_dead_owner_may_be_cancelled_while_its_lease_is_live(
        store, case, holders):
    """base.py: a started job whose owner is dead is not running, however long its lease
    still runs (PostgreSQL reported it "being delivered" until the lease ran out)."""
    h = hold(case, holders, A)
    first, second = add(store, mk(S1), mk(S1))
    claim(store, S1, owner=A, lease=timedelta(minutes=10))
    assert store.start([first.id, second.id], owner=A, now=NOW) == [first.id, second.id]
    assert store.cancel([first.id], NOW).running == [first.id]  # alive: delivering
    h.kill()
    wait_dead(store, A, NOW)
    soon = NOW + timedelta(minutes=1)  # the lease runs 9 more minutes
    assert store.cancel([first.id], soon).cancelled == [first.id]
    moved = store.reschedule(second.id, S3, soon)
    assert (moved.status, moved.next_check_at, moved.lease_owner) == (Status.PENDING, S3, None)


@pytest.mark.slow
def test_every_conflict_says_the_same_on_every_store(store, case, holders):
    """Each refusal's text is ``rules``' own, so a caller (and a test) reads the same words
    whichever store a home uses."""
    from awty.store import rules

    def refused(call) -> str:
        with pytest.raises(Conflict) as e:
            call()
        return str(e.value)

    [held] = add(store, mk(S1, idem="k1"), fp="a")
    assert refused(lambda: add(store, mk(S1, idem="k1"), fp="b")) == \
        str(rules.key_taken("k1", held.id))
    assert refused(lambda: store.add([mk(S1, idem="k2"), mk(S1, idem="k2")], ["a", "b"])) \
        == str(rules.key_twice("k2"))
    assert refused(lambda: store.add([held.replace(idempotency_key=None)], [None])) == \
        str(rules.id_taken())
    store.cancel([held.id], NOW)  # the key lives on in history
    assert refused(lambda: add(store, mk(S1, idem="k1"), fp="c")) == \
        str(rules.key_taken("k1", held.id))
    done, pending = add(store, mk(S1), mk(S2))
    with store.owner_session(B):
        [claimed] = claim(store, S1, owner=B)
        store.start([done.id], owner=B, now=NOW)
        store.finish([end(claimed)], owner=B, now=NOW)
    assert refused(lambda: store.retry(done.id, S3, NOW)) == \
        str(rules.not_rearmable(done.id, "done"))
    assert refused(lambda: store.retry(pending.id, S3, NOW)) == \
        str(rules.still_pending(pending.id))
    hold(case, holders, A)
    [busy] = claim(store, S2, owner=A)
    store.start([busy.id], owner=A, now=NOW)
    assert refused(lambda: store.reschedule(busy.id, S3, NOW)) == \
        str(rules.being_delivered(busy))


def test_cancel_entity(store):
    a, b, c, d = add(store, mk(S1, entity="order", key="1"), mk(S2, entity="order", key="2"),
                     mk(S2, entity="order", key="1"), mk(S2, entity="user", key="1"))
    result = store.cancel_entity("order", "1", NOW)
    assert sorted(result.cancelled) == sorted([a.id, c.id])
    assert store.cancel_entity("order", None, NOW).cancelled == [b.id]
    assert ids(store.list()) == [d.id]
    assert store.cancel_entity("nothing", None, NOW).cancelled == []


@pytest.mark.slow
def test_reschedule_pending_claimed_running(store, case, holders):
    p, c, r = add(store, mk(S1), mk(S1), mk(S1))
    moved = store.reschedule(p.id, S3, NOW)
    assert (moved.next_check_at, moved.status) == (S3, Status.PENDING)
    assert store.get(p.id) == moved and moved.updated_at == NOW
    hold(case, holders, A)
    claim(store, S1, owner=A)
    store.start([r.id], owner=A, now=NOW)
    back = store.reschedule(c.id, S2, NOW)
    assert (back.status, back.lease_owner, back.next_check_at) == (Status.PENDING, None, S2)
    assert store.start([c.id], owner=A, now=NOW) == []
    with pytest.raises(Conflict, match=A):
        store.reschedule(r.id, S3, NOW)
    assert store.get(r.id).next_check_at == S1
    with pytest.raises(JobNotFound):
        store.reschedule("01UNKNOWN", S3, NOW)


def test_retry_rearms_an_ended_job(store):
    [j] = add(store, mk(S1, kind=Kind.EXEC, env={"A": "1"}, cwd="/tmp", max_attempts=3))
    [c] = claim(store, S1)
    failed = End(replace(c, attempt=2), Outcome.FAILED, "exit 1",
                 Result(Answer.FAIL, status=1, error="exit 1"))
    store.finish([failed], owner=A, now=T0)
    with pytest.raises(JobNotFound):
        store.retry("01UNKNOWN", S3, T0)
    job = store.retry(j.id, S3, T0)
    assert (job.id, job.status, job.next_check_at, job.attempt) == (j.id, Status.PENDING, S3, 0)
    assert (job.env, job.cwd, job.kind, job.max_attempts) == ({"A": "1"}, "/tmp", Kind.EXEC, 3)
    assert job.lease_owner is None and store.get(j.id) == job
    with pytest.raises(Conflict):
        store.retry(j.id, S3, T0)
    [c] = claim(store, S3, now=T0)
    store.finish([end(c)], owner=A, now=T0 + MIN)
    assert [h.outcome for h in store.get_history(j.id)] == [Outcome.FAILED, Outcome.DONE]


def test_prune_and_dry_run(store):
    a, b, c = add(store, mk(S1), mk(S1), mk(S1))
    claim(store, S1)
    for job, when in ((a, T0), (b, T0 + MIN), (c, T0 + 2 * MIN)):
        store.finish([end(job)], owner=A, now=when, executions=[execution(job, when)])
    assert store.prune(T0 + MIN, dry_run=True) == 1
    assert len(list(store.history())) == 3
    assert store.prune(T0 + MIN) == 1
    assert ids(store.history()) == ids([c, b])
    assert store.executions(a.id) == [] and len(store.executions(b.id)) == 1
    assert store.prune(T0 + MIN) == 0
