"""The store contract (awty/store/base.py), checked against every store. Claims and leases:
claim (limits, shards, kinds, lease boundaries, live and dead owners), start, finish, release,
the owners' leases and sessions, slot locks, runners' notes. Each test calls ``Store`` methods
directly, on a fresh store per test (see conftest.py); the suite's vocabulary is contractkit.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awty.errors import SessionLost
from awty.ids import shard_of
from awty.model import Answer, End, Execution, Kind, Outcome, Reslot, Result, Status
from awty.record import replace
from contractkit import (
    A, B, MIN, NOW, S1, S2, S3, T0, add, claim, end, execution, hold, ids, mk, utc, wait_dead,
)


def test_claim_limit_order_and_leases(store):
    jobs = add(store, *(mk(S1) for _ in range(5)))
    other = add(store, mk(S2))[0]
    lease_until = NOW + timedelta(seconds=90)
    got = store.claim(S1, now=NOW, owner=A, lease_until=lease_until, limit=3)
    assert ids(got) == ids(jobs[:3])
    for j in got:
        assert (j.status, j.lease_owner, j.lease_until) == (Status.IN_FLIGHT, A, lease_until)
        assert store.get(j.id) == j
    assert ids(claim(store, S1, owner=B)) == ids(jobs[3:])  # live leases are not claimed again
    assert claim(store, S1, owner=B) == []
    assert store.get(other.id).status is Status.PENDING


def test_claim_shards_partition_the_slot(store):
    jobs = add(store, *(mk(S1) for _ in range(60)))
    seen: list[str] = []
    for i in range(3):
        got = claim(store, S1, owner=f"h:{i}:x", shard=(i, 3))
        assert all(shard_of(j.id, 3) == i for j in got)
        assert ids(got) == sorted(ids(got))
        seen += ids(got)
    assert sorted(seen) == ids(jobs)


def test_lease_boundary_expired_at_equal_now(store):
    # Owner A never opened a session: its claims are judged by their lease alone.
    [j] = add(store, mk(S1))
    lease_until = NOW + timedelta(seconds=30)
    store.claim(S1, now=NOW, owner=A, lease_until=lease_until, limit=10)
    assert claim(store, S1, owner=B, now=lease_until - timedelta(seconds=1)) == []
    [taken] = claim(store, S1, owner=B, now=lease_until)
    assert taken.id == j.id and taken.lease_owner == B


def test_claimer_never_takes_back_its_own_expired_leases(store):
    [j] = add(store, mk(S1))
    lease_until = NOW + timedelta(seconds=30)
    store.claim(S1, now=NOW, owner=A, lease_until=lease_until, limit=10)
    later = lease_until + MIN  # A's clock jumped: the job is still in A's hands
    assert claim(store, S1, owner=A, now=later) == []
    assert store.claim_ids([j.id], now=later, owner=A, lease_until=later + MIN) == []
    assert ids(claim(store, S1, owner=B, now=later)) == [j.id]


@pytest.mark.slow
def test_live_owner_claims_never_taken_over(store, case, holders):
    h = hold(case, holders, A)
    [j] = add(store, mk(S1))
    store.claim(S1, now=NOW, owner=A, lease_until=NOW + timedelta(seconds=30), limit=10)
    far = NOW + timedelta(hours=5)  # a clock far ahead: the lease looks long expired
    assert claim(store, S1, owner=B, now=far) == []
    assert store.claim_ids([j.id], now=far, owner=B, lease_until=far + MIN) == []
    h.kill()
    wait_dead(store, A, far)
    [taken] = claim(store, S1, owner=B, now=far)
    assert taken.id == j.id and taken.lease_owner == B


@pytest.mark.slow
def test_dead_owner_with_live_lease_is_not_taken_over(store, case, holders):
    h = hold(case, holders, A)
    add(store, mk(S1))
    claim(store, S1, owner=A, now=NOW, lease=timedelta(minutes=5))
    h.kill()
    wait_dead(store, A, NOW)
    assert claim(store, S1, owner=B, now=NOW + MIN) == []


@pytest.mark.slow
def test_claim_ids_any_slot_on_the_same_terms(store, case, holders):
    hold(case, holders, A)
    p1, p2, leased_live, ended = add(store, mk(S1), mk(S3), mk(S2), mk(S2))
    store.claim_ids([leased_live.id, ended.id], now=NOW, owner=A,
                    lease_until=NOW + timedelta(seconds=1))
    store.finish([end(store.get(ended.id))], owner=A, now=NOW)
    later = NOW + MIN
    got = store.claim_ids([p2.id, "01UNKNOWN", leased_live.id, ended.id, p1.id], now=later,
                          owner=B, lease_until=later + MIN)
    assert sorted(ids(got)) == sorted([p1.id, p2.id])
    assert all(j.lease_owner == B and j.status is Status.IN_FLIGHT for j in got)


def test_start_returns_only_still_claimed_in_given_order(store):
    a, b, c, d, e = add(store, *(mk(S1) for _ in range(5)))
    lease_until = NOW + timedelta(seconds=30)
    store.claim(S1, now=NOW, owner=A, lease_until=lease_until, limit=10)
    store.cancel([a.id], NOW)
    store.reschedule(b.id, S3, NOW)
    store.claim_ids([c.id], now=lease_until, owner=B, lease_until=lease_until + MIN)
    with store.owner_session(A):
        started = store.start([e.id, a.id, b.id, c.id, d.id], owner=A, now=NOW)
    assert started == [e.id, d.id]
    assert store.get(e.id).started_at == NOW and utc(store.get(e.id).started_at)
    assert store.get(b.id).started_at is None and store.get(b.id).status is Status.PENDING
    with store.owner_session(B):
        assert store.start([c.id], owner=B, now=lease_until) == [c.id]


@pytest.mark.slow
def test_a_start_is_made_only_while_the_owners_session_is_held(store, case, holders):
    """PostgreSQL: the server checks the owner's session in the start's own statement, from
    whichever process starts (here not the one holding it, as with the store process): once
    it is gone others may take the owner's claims over, so nothing more is started and the
    runner is told (``SessionLost``). SQLite's session is the runner's own flock, which it
    holds until it exits: its lease and ownership decide, as before."""
    h = hold(case, holders, A)
    j, k = add(store, mk(S1), mk(S1))
    claim(store, S1, owner=A)
    assert store.start([j.id], owner=A, now=NOW) == [j.id]
    h.kill()
    wait_dead(store, A, NOW)
    if case.kind == "postgres":
        with pytest.raises(SessionLost, match="session ended"):
            store.start([k.id], owner=A, now=NOW)
        assert store.get(k.id).started_at is None
    else:
        assert store.start([k.id], owner=A, now=NOW) == [k.id]
    assert store.start([], owner=A, now=NOW) == []


def test_finish_end_and_reslot_with_executions(store):
    a, b = add(store, mk(S1, entity="order", key="7"), mk(S1, env={"PATH": "/bin"}))
    ca, cb = claim(store, S1)
    with store.owner_session(A):
        store.start([a.id, b.id], owner=A, now=T0)
    done = End(ca, Outcome.DONE, "ok", Result(Answer.DONE, status=204, duration=0.125),
               lateness=0.5)
    again = Reslot(cb, S3, check_count=1, attempt=0, result=Result(Answer.RECHECK, status=202),
                   error="not yet")
    runs = [execution(a, T0), execution(b, T0, answer=Answer.RECHECK)]
    applied = store.finish([done, again], owner=A, now=T0 + timedelta(seconds=1), executions=runs)
    assert applied == [done, again]
    assert store.get(a.id) is None
    [row] = store.get_history(a.id)
    assert (row.outcome, row.reason, row.checks, row.last_status) == (Outcome.DONE, "ok", 1, 204)
    assert row.ended_at == T0 + timedelta(seconds=1) and row.duration_ms == pytest.approx(125)
    assert (row.entity_name, row.entity_key, row.kind) == ("order", "7", Kind.HTTP)
    moved = store.get(b.id)
    assert (moved.status, moved.next_check_at, moved.check_count, moved.attempt) == (
        Status.PENDING, S3, 1, 0)
    assert (moved.lease_owner, moved.lease_until, moved.started_at) == (None, None, None)
    assert moved.last_error == "not yet" and moved.env == {"PATH": "/bin"}
    assert store.get_history(b.id) == []
    assert store.executions(a.id) == [runs[0]]
    assert store.executions(b.id) == [runs[1]]


def test_last_fired_is_the_newest_slot_and_its_first_start(store):
    assert store.last_fired() is None
    a, b, c = add(store, mk(S1), mk(S1), mk(S1))
    claimed = claim(store, S1)
    with store.owner_session(A):
        store.start([a.id, b.id, c.id], owner=A, now=T0)
    runs = [replace(execution(a, T0 + timedelta(seconds=30)), slot="202611221000"),
            replace(execution(b, T0 + timedelta(seconds=5)), slot="202611221000"),
            replace(execution(c, T0 - timedelta(minutes=20)), slot="202611220945")]
    store.finish([end(x) for x in claimed], owner=A, now=T0 + timedelta(minutes=1),
                 executions=runs)
    assert store.last_fired() == (T0, T0 + timedelta(seconds=5))


def test_finish_by_non_owner_is_ignored(store):
    [j] = add(store, mk(S1))
    [c] = claim(store, S1, owner=A)
    assert store.finish([end(c)], owner=B, now=NOW) == []
    assert store.get(j.id) == c and store.get_history(j.id) == []
    resl = Reslot(c, S3, 1, 0, None)
    assert store.finish([resl], owner=B, now=NOW) == []
    assert store.get(j.id).next_check_at == S1


def test_finish_after_cancel_drops_the_result(store):
    [j] = add(store, mk(S1))
    [c] = claim(store, S1)
    store.cancel([j.id], NOW)
    assert store.finish([end(c)], owner=A, now=NOW) == []
    [row] = store.get_history(j.id)
    assert row.outcome is Outcome.CANCELLED


def test_release_gives_claims_back_unchanged(store):
    [j, k] = add(store, mk(S1), mk(S1))
    claim(store, S1, owner=A)
    assert store.release([j.id, k.id], owner=B, now=NOW) == 0
    assert store.release([j.id], owner=A, now=NOW) == 1
    assert store.get(j.id).status is Status.PENDING
    assert store.get(j.id).lease_owner is None and store.get(j.id).next_check_at == S1
    assert store.get(k.id).status is Status.IN_FLIGHT
    assert ids(claim(store, S1, owner=B)) == [j.id]


@pytest.mark.slow
def test_release_stale_only_expired_and_dead(store, case, holders):
    a, b, c = add(store, mk(S1), mk(S2), mk(S3))
    dead = "host-d:1:dddd"
    hold(case, holders, A)
    h = hold(case, holders, dead)
    short = NOW + timedelta(seconds=10)
    store.claim_ids([a.id], now=NOW, owner=A, lease_until=short)
    store.claim_ids([b.id], now=NOW, owner=dead, lease_until=short)
    store.claim_ids([c.id], now=NOW, owner=dead, lease_until=NOW + timedelta(hours=1))
    h.kill()
    wait_dead(store, dead, short)
    assert store.release_stale(A, short) == 0  # alive
    assert store.release_stale(dead, short - timedelta(seconds=1)) == 0  # not expired yet
    assert store.release_stale(dead, short) == 1
    assert store.get(b.id).status is Status.PENDING and store.get(b.id).lease_owner is None
    assert store.get(c.id).status is Status.IN_FLIGHT


@pytest.mark.slow
def test_leases_grouped_by_owner(store, case, holders):
    hold(case, holders, A)
    h = hold(case, holders, B)
    add(store, *(mk(S1) for _ in range(3)), *(mk(S2) for _ in range(2)), mk(S3))
    store.claim(S1, now=NOW, owner=A, lease_until=NOW + MIN, limit=2)
    store.claim(S1, now=NOW, owner=A, lease_until=NOW + timedelta(hours=1), limit=2)
    store.claim(S2, now=NOW, owner=B, lease_until=NOW + MIN, limit=5)
    store.claim(S3, now=NOW, owner="never:1:x", lease_until=NOW + MIN, limit=5)
    h.kill()
    wait_dead(store, B, NOW + MIN)
    groups = {g.owner: g for g in store.leases(NOW + MIN)}
    assert set(groups) == {A, B, "never:1:x"}
    assert (groups[A].jobs, groups[A].expired, groups[A].alive) == (3, 2, True)
    assert (groups[B].jobs, groups[B].expired, groups[B].alive) == (2, 2, False)
    assert groups["never:1:x"].alive is not True and groups["never:1:x"].expired == 1
    assert store.leases(NOW - MIN) != [] and all(
        g.expired == 0 for g in store.leases(NOW - MIN))


def test_slot_lock_semantics(store, case):
    other = case.open()
    try:
        held = store.slot_lock(S1)
        assert held.acquire()
        assert isinstance(held.holder(), str) and held.holder()
        if case.kind == "sqlite":
            # One unsharded run per slot; it and sharded runs exclude each other.
            assert not other.slot_lock(S1).acquire()
            assert not other.slot_lock(S1, (0, 2)).acquire()
            assert other.slot_lock(S2).acquire()
            held.release()
            s0 = store.slot_lock(S1, (0, 2))
            assert s0.acquire()
            assert other.slot_lock(S1, (1, 2)).acquire()
            assert not other.slot_lock(S1, (0, 2)).acquire()
            assert not other.slot_lock(S1).acquire()
            s0.release()
        else:
            # Runners on any number of hosts share a slot; SKIP LOCKED shares the work.
            assert other.slot_lock(S1).acquire()
            assert other.slot_lock(S1, (0, 2)).acquire()
            assert store.slot_lock(S1, (0, 2)).acquire()
            held.release()
    finally:
        other.close()


def test_owner_session_makes_owner_alive_in_process(store):
    add(store, mk(S1))
    with store.owner_session(A):
        claim(store, S1, owner=A, lease=timedelta(seconds=1))
        assert [g.alive for g in store.leases(NOW + MIN)] == [True]
    assert [g.alive for g in store.leases(NOW + MIN)] in ([False], [None])
    assert len(claim(store, S1, owner=B, now=NOW + MIN)) == 1


def test_a_retry_keeps_the_results_error_as_last_error(store):
    """A re-slotted job keeps why it was re-slotted: the decision's error, else its result's
    (``list`` and ``show`` print it)."""
    a, b = add(store, mk(), mk())
    ca, cb = claim(store)
    store.finish([Reslot(ca, S3, 0, 1, Result(Answer.RETRY, error="timeout after 1.0s")),
                  Reslot(cb, S3, 0, 1, Result(Answer.RETRY, status=503), error="http 503")],
                 owner=A, now=NOW)
    assert store.get(a.id).last_error == "timeout after 1.0s"
    assert store.get(b.id).last_error == "http 503"


def test_who_fired_what_host_and_pid_on_executions_and_history(store):
    a, b = add(store, mk(S1), mk(S1))
    ran = replace(execution(a, T0), host="host-a", pid=100)
    with store.owner_session(A):  # owner A is "host-a:100:aaaa"
        ca, _ = claim(store, S1)
        store.start([a.id], owner=A, now=T0)
        store.finish([end(ca)], owner=A, now=T0, executions=[ran])
    assert store.executions(a.id) == [ran]
    [row] = store.get_history(a.id)
    assert (row.host, row.pid) == ("host-a", 100)
    [exported] = [h for h in store.export_history() if h["id"] == a.id]
    assert (exported["host"], exported["pid"]) == ("host-a", 100)
    store.cancel([b.id], NOW)  # ended by no runner
    [cancelled] = store.get_history(b.id)
    assert (cancelled.host, cancelled.pid) == (None, None)


def test_claim_takes_only_the_kinds_asked_for(store):
    web, cmd, fn = add(store, mk(S1), mk(S1, kind=Kind.EXEC), mk(S1, kind=Kind.PYTHON))
    assert ids(claim(store, kinds=["http"])) == [web.id]
    assert ids(claim(store, owner=B, kinds=["python", "exec"])) == [cmd.id, fn.id]


def test_runners_note_their_kinds_one_row_per_host(store):
    store.note_runner("host-a", 100, ["http"], T0)
    store.note_runner("host-b", 200, ["http", "exec", "python"], T0 + MIN)
    store.note_runner("host-a", 101, ["http", "exec"], T0 + 2 * MIN)
    assert store.runners() == [("host-a", ("http", "exec"), 101, T0 + 2 * MIN),
                               ("host-b", ("http", "exec", "python"), 200, T0 + MIN)]


def test_an_execution_kept_on_its_history_row_reads_back_as_it_was(store):
    # The execution that ended a job, saying what the history row says (``rules.folds``), is
    # stored on that row: every read of executions gives it back as it was given, beside
    # those that are not (a first attempt retried, one that began after the job ended).
    a, b, c = add(store, mk(S1), mk(S1), mk(S1))
    ca, cb, cc = claim(store, S1)

    def said(job, at, attempt=1):  # what end() records: 200, 250 ms, 500 ms late, by A
        return Execution(job.id, at, "202611221000", attempt, attempt, Answer.DONE, 200, 250.0,
                         500.0, None, "host-a", 100)

    retried = Execution(b.id, T0, "202611221000", 1, 1, Answer.RETRY, 503, 10.0, 500.0,
                        "http 503", "host-a", 100)
    runs = [said(a, T0), retried, said(b, T0 + timedelta(seconds=1), attempt=2),
            said(c, T0 + 2 * MIN)]
    with store.owner_session(A):
        store.start(ids([ca, cb, cc]), owner=A, now=T0)
        store.finish([end(ca), end(cb), end(cc)], owner=A, now=T0 + MIN, executions=runs)
    assert store.executions(a.id) == [runs[0]]
    assert store.executions(b.id) == [retried, runs[2]]
    assert store.executions(c.id) == [runs[3]]
    [row] = store.get_history(a.id)
    assert (row.checks, row.attempts, row.last_status, row.error) == (1, 1, 200, None)
    assert (row.duration_ms, row.host, row.pid) == (250.0, "host-a", 100)
    st = store.stats(now=T0 + MIN, since=T0 - timedelta(hours=1), current=S1, next_slots=1)
    assert (st.executions, st.by_answer, st.retries, st.failures) == (
        4, {"done": 3, "retry": 1}, 1, 1)
    assert (st.lateness_count, st.lateness_max_ms) == (4, 500.0)
    # from T0 + 1 s: b's second attempt (kept on its row) and c's, not a's nor b's first
    st = store.stats(now=T0 + MIN, since=T0 + timedelta(seconds=1), current=S1, next_slots=1)
    assert (st.executions, st.by_answer) == (2, {"done": 2})
    executed, runs_of_slot = store.durations(T0 - timedelta(hours=1), [100.0, 300.0], [1e6])
    assert executed == ([1, 4], 4, pytest.approx(760.0))
    assert runs_of_slot[1] == 1
    # a metrics scrape's one read gives what the two give apart, over any window
    # (a since between whole seconds: stored times are whole seconds, both reads truncate it)
    for since in (T0 - timedelta(hours=1), T0 + timedelta(milliseconds=500),
                  T0 + timedelta(seconds=1), T0 + 3 * MIN):
        assert store.stats_and_durations(
            now=T0 + MIN, since=since, current=S1, next_slots=1, executions_ms=[100.0, 300.0],
            runs_ms=[1e6]) == (store.stats(now=T0 + MIN, since=since, current=S1, next_slots=1),
                               *store.durations(since, [100.0, 300.0], [1e6]))
    assert store.last_fired() == (T0, T0)
    exported = {h["id"]: h for h in store.export_history()}
    assert set(exported[a.id]) == set(exported[c.id])  # the row's own fields only
    # pruned with its history row; an execution after the cut stays
    assert store.prune(T0 + 2 * MIN) == 3
    assert store.executions(a.id) == [] and store.executions(b.id) == []
    assert store.executions(c.id) == [runs[3]]


def _ran(job, at, attempt, answer=Answer.DONE, status=200):
    # what end() records (200, 250 ms, 500 ms late, by A) at ``at``, its ``attempt``
    return Execution(job.id, at, "202611221000", 1, attempt, answer, status, 250.0, 500.0,
                     None, "host-a", 100)


def _life(store, job, at, runs):
    # one claim of ``job`` in S1 ending it (failed: it may be retried) with ``runs`` recorded
    (c,) = claim(store, S1, now=at)
    with store.owner_session(A):
        store.start([c.id], owner=A, now=at)
        store.finish([end(c, Outcome.FAILED, "no")], owner=A, now=at + timedelta(seconds=3),
                     executions=runs)


def test_executions_read_back_in_the_order_recorded_when_the_clock_steps_back(store):
    # A quick retry after the clock stepped back began "before" the attempt it retried: the
    # executions are still read in the order they were recorded (the last is the one that
    # ended the job, kept on its history row), not by the time each one says it began.
    (a,) = add(store, mk(S1))
    runs = [_ran(a, T0 + timedelta(seconds=5), 1, Answer.RETRY, 503), _ran(a, T0, 2)]
    _life(store, a, T0, runs)
    assert store.executions(a.id) == runs


def test_executions_of_a_retried_job_read_back_life_after_life(store):
    # Re-armed by retry within the same second (a fixed clock, or a quick hand): each life's
    # executions, then the next life's, as recorded; a pending life's after every ended one.
    (a,) = add(store, mk(S1))
    first = [_ran(a, T0, 1, Answer.RETRY, 503), _ran(a, T0, 2)]
    _life(store, a, T0, first)
    store.retry(a.id, S1, T0)
    second = [_ran(a, T0, 1, Answer.RETRY, 503), _ran(a, T0, 2)]
    _life(store, a, T0, second)
    store.retry(a.id, S1, T0)
    (c,) = claim(store, S1, now=T0)
    third = [_ran(a, T0, 1, Answer.RETRY, 503)]
    with store.owner_session(A):
        store.start([c.id], owner=A, now=T0)
        store.finish([Reslot(c, S2, 0, 1, Result(Answer.RETRY, status=503))], owner=A,
                     now=T0 + timedelta(seconds=3), executions=third)
    assert store.executions(a.id) == first + second + third
