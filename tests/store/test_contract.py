"""The store contract (awty/store/base.py), checked against every store.

Each test calls ``Store`` methods directly, on a fresh store per test (see conftest.py). Live
owners are real child processes holding ``owner_session`` (holder.py); dead owners are those
processes SIGKILLed.
"""

from __future__ import annotations

import itertools
import time
from awty.record import replace
from datetime import UTC, datetime, timedelta

import pytest

from awty.errors import Conflict, JobNotFound, SessionLost, StoreError
from awty.ids import new_id, shard_of
from awty.model import (
    Added, Answer, End, Execution, Job, Kind, Outcome, Reslot, Result, Status,
)
from awty.slots import iso

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
S1, S2, S3 = T0, T0 + MIN, T0 + 2 * MIN
NOW = T0 - timedelta(hours=1)
A, B = "host-a:100:aaaa", "host-b:200:bbbb"
_ids = itertools.count()


def _next_id() -> str:
    # Ids in time order, as the ULIDs of real adds are.
    return new_id(datetime(2026, 11, 1, tzinfo=UTC) + timedelta(milliseconds=next(_ids)))


def mk(slot: datetime = S1, *, kind: Kind = Kind.HTTP, entity: str | None = None,
       key: str | None = None, idem: str | None = None, **fields) -> Job:
    return Job(
        id=fields.pop("id", None) or _next_id(), kind=kind, target="http://127.0.0.1:9/cb",
        payload_json='{"n": 1}', headers=fields.pop("headers", {}), entity_name=entity,
        entity_key=key,
        first_check_at=slot, next_check_at=slot, idempotency_key=idem, created_at=NOW,
        updated_at=NOW, **fields,
    )


def add(store, *jobs: Job, fp: str | None = None) -> list[Job]:
    store.add(list(jobs), [fp] * len(jobs))
    return list(jobs)


def ids(jobs) -> list[str]:
    return [j.id for j in jobs]


def claim(store, slot=S1, *, owner=A, now=NOW, lease=timedelta(minutes=5), limit=100,
          shard=None, **kw) -> list[Job]:
    return store.claim(slot, now=now, owner=owner, lease_until=now + lease, limit=limit,
                       shard=shard, **kw)


def end(job: Job, outcome: Outcome = Outcome.DONE, reason: str = "ok") -> End:
    return End(job, outcome, reason, Result(Answer.DONE, status=200, duration=0.25),
               lateness=0.5)


def execution(job: Job, at: datetime, *, answer=Answer.DONE, attempt=1, lateness_ms=100.0):
    return Execution(job.id, at, "202611221000", 1, attempt, answer, status=200,
                     duration_ms=250.0, lateness_ms=lateness_ms)


def wait_dead(store, owner: str, now: datetime, timeout: float = 10.0) -> None:
    """A killed owner's session ends when its server/kernel notices: poll, bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = {g.owner: g for g in store.leases(now)}
        if owner not in groups or not groups[owner].alive:
            return
        time.sleep(0.02)
    raise AssertionError(f"{owner} still alive {timeout}s after SIGKILL")


def hold(case, holders, owner: str):
    h = case.hold(owner)
    holders.append(h)
    return h


def utc(at: datetime) -> bool:
    return at.tzinfo is not None and at.utcoffset() == timedelta(0)


# -- lifecycle ----------------------------------------------------------------------------
def test_schema_version_and_check(store):
    v = store.schema_version()
    assert isinstance(v, int) and v >= 1
    health = store.check()
    assert health.ok and health.schema_version == v and health.problems == ()
    assert isinstance(health.detail, str) and health.detail


# -- adding -------------------------------------------------------------------------------
def test_add_persists_every_field_times_to_the_second(store):
    at = datetime(2026, 11, 22, 9, 30, 15, 987654, tzinfo=UTC)
    j = mk(S2, kind=Kind.EXEC, entity="order", key="42", idem="k-1", headers={"X-A": "1"},
           max_checks=5, horizon=3600.0, timeout=12.5, max_attempts=4, misfire_grace=30.0,
           cwd="/srv", env={"PATH": "/bin", "LANG": "C"}, last_error="earlier",
           check_count=2, attempt=1)
    j = replace(j, payload_json='{"b": [1, 2], "a": "é"}', created_at=at, updated_at=at)
    [added] = store.add([j], ["fp"])
    assert added.created and added.job.id == j.id
    got = store.get(j.id)
    assert got == replace(j, created_at=at.replace(microsecond=0),
                          updated_at=at.replace(microsecond=0))
    assert all(utc(t) for t in (got.first_check_at, got.next_check_at, got.created_at))
    assert store.get("01NOPE") is None


def test_add_is_all_or_nothing(store):
    [first] = add(store, mk(idem="k"), fp="one")
    fresh = mk()
    with pytest.raises(Conflict):
        store.add([fresh, mk(idem="k")], [None, "two"])
    assert store.get(fresh.id) is None
    assert store.count() == 1 and store.get(first.id) is not None


def test_add_idempotency_same_fingerprint_returns_existing(store):
    [first] = add(store, mk(idem="k"), fp="fp")
    again, other = mk(idem="k"), mk()
    result = store.add([other, again], [None, "fp"])
    assert [(r.job.id, r.created) for r in result] == [(other.id, True), (first.id, False)]
    assert store.get(again.id) is None and store.count() == 2


def test_idempotency_key_is_known_in_history_too(store):
    [first] = add(store, mk(idem="k"), fp="fp")
    [c] = claim(store)
    assert store.finish([end(c)], owner=A, now=NOW) == [end(c)]
    [again] = store.add([mk(idem="k")], ["fp"])
    assert again == Added(again.job, False) and again.job.id == first.id
    with pytest.raises(Conflict):
        store.add([mk(idem="k")], ["other"])
    assert store.count() == 0


# -- reading ------------------------------------------------------------------------------
def test_list_orders_by_slot_then_id_and_streams(store):
    late, early_b, early_a = mk(S2), mk(S1), mk(S1)  # ids: late < early_b < early_a
    add(store, early_a, late, early_b)
    listed = store.list()
    assert iter(listed) is listed  # an iterator, not a materialised list
    assert ids(listed) == [early_b.id, early_a.id, late.id]
    many = [mk(S3) for _ in range(2500)]
    add(store, *many)
    stream = store.list(slot=S3)
    assert next(stream).id == many[0].id
    stream.close()  # abandoning a stream leaves the store usable
    assert store.count(slot=S3) == 2500 and ids(store.list(slot=S3)) == ids(many)


def test_list_and_count_filters(store):
    a = mk(S1, entity="order", key="1")
    b = mk(S2, entity="order", key="2", kind=Kind.EXEC)
    c = mk(S3, entity="user", key="1")
    d = mk(S3)
    add(store, a, b, c, d)
    [claimed] = claim(store, S1)
    cases = {
        (): [a, b, c, d],
        (("status", "pending"),): [b, c, d],
        (("status", "in_flight"),): [a],
        (("slot", S3),): [c, d],
        (("until", S2),): [a, b],
        (("until", S1 - MIN),): [],
        (("entity", "order"),): [a, b],
        (("entity", "order"), ("key", "2")): [b],
        (("key", "1"),): [a, c],
        (("kind", "exec"),): [b],
        (("kind", "http"), ("status", "pending")): [c, d],
        (("entity", "user"), ("slot", S1)): [],
    }
    for filters, expected in cases.items():
        kw = dict(filters)
        assert ids(store.list(**kw)) == ids(expected), kw
        assert store.count(**kw) == len(expected), kw
    assert ids(store.list(limit=3)) == ids([a, b, c])
    assert ids(store.list(entity="order", limit=1)) == [a.id]
    assert claimed.status is Status.IN_FLIGHT


def test_find_reports_pending_slot_or_none_for_history(store):
    pending, ended = add(store, mk(S2), mk(S1))
    [c] = claim(store, S1)
    store.finish([end(c)], owner=A, now=NOW)
    assert store.find([pending.id, ended.id, "01UNKNOWN"]) == {pending.id: S2, ended.id: None}
    assert store.find([]) == {}


def test_match_ids_prefix_over_pending_and_history(store):
    jobs = add(store, *(mk(S1, id=f"01JD4X{'0' * 18}{n:02d}") for n in range(4)))
    add(store, mk(S1))
    claimed = claim(store, S1, limit=1)
    store.finish([end(claimed[0])], owner=A, now=NOW)
    prefix = "01JD4X"
    assert store.match_ids(prefix, 10) == ids(jobs)
    assert store.match_ids(prefix, 2) == ids(jobs[:2])
    assert store.match_ids(jobs[3].id, 10) == [jobs[3].id]
    assert store.match_ids("ZZZZ", 10) == []


def test_match_ids_gives_a_retried_id_once(store):
    [j] = add(store, mk(S1))
    for _ in range(2):
        [c] = claim(store, S1)
        store.finish([end(c, Outcome.FAILED, "boom")], owner=A, now=NOW)
        store.retry(j.id, S1, NOW)
    assert store.match_ids(j.id[:12], 10) == [j.id]


def test_slot_ids_any_status(store):
    a, b, _c = add(store, mk(S1), mk(S1), mk(S2))
    claim(store, S1, limit=1)
    assert store.slot_ids(S1) == {a.id, b.id}
    assert store.slot_ids(S3) == set()


def test_slots_with_work_ranges(store):
    add(store, mk(S1), mk(S1), mk(S2), mk(S3), mk(S3), mk(S3))
    claim(store, S1, limit=1)
    assert store.slots_with_work() == [(S1, 2), (S2, 1), (S3, 3)]
    assert store.slots_with_work(since=S2) == [(S2, 1), (S3, 3)]
    assert store.slots_with_work(until=S2) == [(S1, 2), (S2, 1)]
    assert store.slots_with_work(since=S2, until=S2) == [(S2, 1)]
    assert store.slots_with_work(since=S3 + MIN) == []
    assert all(utc(s) for s, _ in store.slots_with_work())


def test_history_filters_newest_first(store):
    a = mk(S1, entity="order", key="1")
    b = mk(S1, entity="order", key="2")
    c = mk(S1, entity="user", key="1")
    add(store, a, b, c)
    claim(store, S1)
    store.finish([end(a)], owner=A, now=T0)
    store.finish([end(b, Outcome.FAILED, "http 500")], owner=A, now=T0 + MIN)
    store.finish([end(c, Outcome.GONE, "gone")], owner=A, now=T0 + 2 * MIN)
    assert ids(store.history()) == ids([c, b, a])
    assert ids(store.history(outcome="failed")) == [b.id]
    assert ids(store.history(entity="order")) == ids([b, a])
    assert ids(store.history(entity="order", key="1")) == [a.id]
    assert ids(store.history(key="1")) == ids([c, a])
    assert ids(store.history(since=T0 + MIN)) == ids([c, b])
    assert ids(store.history(limit=1)) == [c.id]
    row = next(store.history(outcome="failed"))
    assert (row.outcome, row.reason, row.entity_name, row.entity_key) == (
        Outcome.FAILED, "http 500", "order", "2")
    assert row.ended_at == T0 + MIN and utc(row.ended_at)
    assert isinstance(row.payload_json, str) and row.payload_json == a.payload_json


# -- claiming -----------------------------------------------------------------------------
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


# -- start / finish / release -------------------------------------------------------------
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


# -- cancel / reschedule / retry ----------------------------------------------------------
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


# -- aggregates ---------------------------------------------------------------------------
def test_stats(store):
    since = T0 - timedelta(hours=1)
    old, p1, p2, p3, e1 = add(store, mk(T0 - 10 * MIN), mk(S2), mk(S2), mk(S3),
                              mk(S3, kind=Kind.EXEC))
    d1, f1, ancient = add(store, mk(S1), mk(S1), mk(S1))
    claim(store, S1)
    store.finish([end(ancient)], owner=A, now=since - MIN)
    store.finish([end(d1), end(f1, Outcome.FAILED, "http 500")], owner=A, now=T0,
                 executions=[execution(d1, T0, lateness_ms=100.0),
                             execution(f1, T0, answer=Answer.RETRY, lateness_ms=200.0),
                             execution(f1, T0, answer=Answer.FAIL, attempt=2,
                                       lateness_ms=300.0),
                             execution(ancient, since - MIN, lateness_ms=9000.0)])
    st = store.stats(now=T0, since=since, current=S1, next_slots=1)
    assert (st.pending, st.in_flight, st.stale_leases) == (5, 0, 0)
    assert st.by_kind == {"http": 4, "exec": 1}
    assert st.next_slots == [(S2, 2)]
    assert (st.past_slots, st.past_jobs) == (1, 1)
    assert st.outcomes == {"done": 1, "failed": 1}
    assert st.executions == 3 and st.by_answer == {"done": 1, "retry": 1, "fail": 1}
    assert (st.retries, st.failures) == (1, 2)
    assert st.lateness_count == 3 and st.lateness_median_ms == pytest.approx(200)
    assert 200 <= st.lateness_p99_ms <= 300 and st.lateness_max_ms == pytest.approx(300)
    claim(store, T0 - 10 * MIN, owner=B, lease=timedelta(seconds=10))
    st = store.stats(now=T0, since=since, current=S1, next_slots=5)
    assert (st.pending, st.in_flight, st.stale_leases) == (4, 1, 1)
    assert st.next_slots == [(S2, 2), (S3, 2)]


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


# -- locks --------------------------------------------------------------------------------
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


# --- export / import (moving a home between stores) ------------------------------------------
def _a_worked_store(store) -> dict[str, Job]:
    """Pending jobs (one in flight, one with an idempotency key) and history of every kind:
    done (payload only), failed and cancelled (whole job kept), an idempotent one ended."""
    jobs = {n: mk(S1, entity="order", key=n, headers={"X": n}) for n in ("done", "failed", "x")}
    jobs["idem"] = mk(S1, idem="k-1")
    jobs["later"] = mk(S3, idem="k-2")
    jobs["flight"] = mk(S2)
    store.add(list(jobs.values()), [None, None, None, "fp-1", "fp-2", None])
    claimed = {j.id: j for j in claim(store)}
    applied = store.finish([end(claimed[jobs["done"].id]),
                            end(claimed[jobs["failed"].id], Outcome.FAILED, "500 three times"),
                            end(claimed[jobs["idem"].id])], owner=A, now=NOW)
    assert len(applied) == 3
    store.release([jobs["x"].id], owner=A, now=NOW)
    store.cancel([jobs["x"].id], NOW)
    claim(store, S2, owner=B)
    return jobs


def _moved(src, dst) -> tuple[int, int]:
    pending = list(src.export_pending())
    added, n = dst.import_home([replace(j, status=Status.PENDING, lease_owner=None,
                                        lease_until=None, started_at=None) for j, _ in pending],
                               [fp for _, fp in pending], src.export_history())
    assert all(a.created for a in added)
    return len(added), n


def test_export_streams_pending_jobs_and_history(store):
    jobs = _a_worked_store(store)
    pending = list(store.export_pending())
    assert [j.id for j, _ in pending] == [jobs["flight"].id, jobs["later"].id]
    assert dict((j.id, fp) for j, fp in pending)[jobs["later"].id] == "fp-2"
    assert {j.id: j.status for j, _ in pending}[jobs["flight"].id] is Status.IN_FLIGHT
    history = list(store.export_history())
    assert [h["id"] for h in history][:3] == [jobs["done"].id, jobs["failed"].id,
                                              jobs["idem"].id]
    by_id = {h["id"]: h for h in history}
    assert by_id[jobs["done"].id]["job"] is None and by_id[jobs["done"].id]["payload"] == \
        '{"n": 1}'
    assert by_id[jobs["failed"].id]["job"] and by_id[jobs["idem"].id]["fingerprint"] == "fp-1"
    assert by_id[jobs["x"].id]["outcome"] == "cancelled"
    assert by_id[jobs["done"].id]["ended_at"].tzinfo is not None


@pytest.mark.parametrize("to", ["sqlite", "same"])
def test_import_takes_back_what_export_gave(store, case, tmp_path, to):
    """Export, import into another store (SQLite, or the same kind), export again: equal.
    The moved store then behaves the same: retry finds the failed job, idempotency the key."""
    jobs = _a_worked_store(store)
    if to == "sqlite" or case.kind == "sqlite":
        dst = type(case)("sqlite", str(tmp_path / "moved.db")).open(create=True)
    else:
        dst = type(case)("postgres", case.where, case.schema + "_m").open(create=True)
    try:
        assert _moved(store, dst) == (2, 4)
        assert list(dst.export_history()) == list(store.export_history())
        assert [(replace(j, status=Status.PENDING, lease_owner=None, lease_until=None,
                         started_at=None), fp) for j, fp in store.export_pending()] == \
            list(dst.export_pending())
        again = dst.add([mk(S3, idem="k-1")], ["fp-1"])[0]
        assert not again.created and again.job.id == jobs["idem"].id
        with pytest.raises(Conflict):
            dst.add([mk(S3, idem="k-1")], ["another"])
        assert dst.retry(jobs["failed"].id, S3, NOW).headers == {"X": "failed"}
    finally:
        dst.close()
        if case.kind == "postgres" and to == "same":
            import psycopg

            with psycopg.connect(case.where, autocommit=True) as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{case.schema}_m" CASCADE')


def test_import_home_is_all_or_nothing(store):
    """Jobs and history in one transaction: a history row the database refuses leaves
    neither (before, the jobs stayed without their history and a second import was
    refused: the store was not empty)."""
    rows = list(_rows_for_import())
    bad = {**rows[0], "outcome": None}  # NOT NULL: the whole import fails
    with pytest.raises(StoreError):
        store.import_home([mk(S1)], [None], [rows[0], bad])
    assert list(store.export_history()) == [] and store.count() == 0
    added, n = store.import_home([mk(S1)], [None], rows)
    assert [a.created for a in added] == [True] and n == 1


def _rows_for_import():
    yield {"id": _next_id(), "kind": "http", "target": "http://127.0.0.1:9/cb",
           "entity_name": None, "entity_key": None, "outcome": "done", "reason": "ok",
           "checks": 1, "attempts": 1, "first_check_at": S1, "ended_at": S1 + MIN,
           "created_at": NOW, "duration_ms": 1.5, "lateness_ms": 2.0, "last_status": 200,
           "error": None, "output": None, "idempotency_key": None, "fingerprint": None,
           "payload": '{"n": 1}', "job": None}


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


def test_meta_keeps_the_cluster_settings_and_a_move(store, case):
    assert store.meta() == {}
    settings = {"resolution": 15, "backoff": [10.0, 30.0], "max_delay": 86400.0}
    assert store.set_cluster(settings, now=NOW) == 0
    store.mark_moved("postgresql://db.internal/awty", now=NOW)
    expected = {"settings": settings,
                "moved": {"to": "postgresql://db.internal/awty", "at": iso(NOW)}}
    assert store.meta() == expected
    other = case.open()  # another process's view, read when it opens
    try:
        assert other.meta() == expected
    finally:
        other.close()


def test_set_cluster_moves_pending_jobs_off_the_new_boundaries_at_once(store):
    on = mk(T0)  # 10:00: a 15- and a 20-minute boundary
    off = mk(T0 + timedelta(minutes=45))  # 10:45: not on 20 -> 11:00
    late = mk(T0 + timedelta(minutes=50))  # 10:50 -> 11:00
    claimed = mk(T0 + timedelta(minutes=5))  # in flight: left to its runner
    add(store, on, off, late, claimed)
    claim(store, claimed.next_check_at)
    moved = store.set_cluster({"resolution": 20}, now=NOW, reslot=20)
    assert moved == 2
    slots = {j.id: j.next_check_at for j in store.list()}
    assert slots == {on.id: T0, off.id: T0 + timedelta(hours=1),
                     late.id: T0 + timedelta(hours=1),
                     claimed.id: T0 + timedelta(minutes=5)}
    assert store.meta()["settings"] == {"resolution": 20}


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


# -- recurring schedules ----------------------------------------------------------------------
def mk_schedule(name: str = "tick", *, cron: str = "*/5 * * * *", missed: str = "once",
                window: float = 86400.0, next_at: datetime = S1, **fields):
    from awty.model import Schedule

    template = mk(S1, headers={"X-Team": "ops"}, **fields)
    return Schedule(name, cron, None, None, "UTC", missed, window, 1, template, next_at,
                    None, NOW)


def test_import_of_a_schedule_name_taken_names_it_and_changes_nothing(store):
    """An imported schedule whose name the store holds: the refusal names the schedule (not
    a job id), the same on both stores, and nothing of the import is kept."""
    store.add_schedule(mk_schedule(), S1 - MIN)
    other = mk_schedule("other")
    with pytest.raises(Conflict) as e:
        store.import_home([mk(S2, schedule="other", occurrence=S2)], [None], [],
                          [other, mk_schedule(cron="0 * * * *", next_at=S2)])
    assert str(e.value) == "cannot import: schedule 'tick' already exists"
    assert [x.name for x in store.schedules()] == ["tick"]
    assert store.get_schedule("tick").cron == "*/5 * * * *"
    assert pending_of(store, "other") == []


def pending_of(store, name: str) -> list[Job]:
    return store.schedule_jobs(name)


def test_schedule_add_get_list(store):
    s = mk_schedule("b-tick")
    job = store.add_schedule(s, S1 - MIN)
    assert (job.schedule, job.occurrence, job.next_check_at) == ("b-tick", S1, S1)
    assert job.headers == {"X-Team": "ops"} and job.status is Status.PENDING
    got = store.get_schedule("b-tick")
    assert got.replace(template=s.template) == s
    t = got.template
    assert (t.kind, t.target, t.payload_json, t.headers) == (
        s.template.kind, s.template.target, s.template.payload_json, s.template.headers)
    store.add_schedule(mk_schedule("a-tick"), S1 - MIN)
    assert [x.name for x in store.schedules()] == ["a-tick", "b-tick"]
    assert store.get(job.id).occurrence == S1
    assert store.get_schedule("nope") is None


def test_schedule_name_taken_changes_nothing(store):
    store.add_schedule(mk_schedule(), S1 - MIN)
    with pytest.raises(Conflict, match="already exists"):
        store.add_schedule(mk_schedule(cron="0 * * * *", next_at=S2), S1 - MIN)
    assert store.get_schedule("tick").cron == "*/5 * * * *"
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1]


def test_one_job_per_occurrence_is_a_store_key(store):
    job = store.add_schedule(mk_schedule(), S1 - MIN)
    twin = job.replace(id=_next_id())
    # named as the occurrence it is (a dropped-in envelope of it), not as an id taken
    with pytest.raises(Conflict, match=f"^cannot add: job {twin.id} is the "
                       f"{iso(S1)} occurrence of schedule tick, which job {job.id} holds"):
        add(store, twin)
    # a batch naming one occurrence twice: the second job names the first
    one = twin.replace(id=_next_id(), occurrence=S2)
    other = one.replace(id=_next_id())
    with pytest.raises(Conflict, match=f"job {other.id} is the {iso(S2)} occurrence of "
                       f"schedule tick, which job {one.id} holds"):
        add(store, one, other)
    assert ids(pending_of(store, "tick")) == [job.id]


def test_a_claim_of_a_paused_schedules_occurrence_moves_it_past(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.retry(first.id, S1, S1 - MIN)  # the user's ask: it fires, paused or not
    (got,) = claim(store, S1, now=S1)
    assert got.id == first.id and pending_of(store, "tick") == [got]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    store.finish([end(got)], owner=A, now=S1)
    assert store.resume_schedule("tick", S1).next_at == S1 + 5 * MIN
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1 + 5 * MIN]


def test_retry_of_a_cancelled_occurrence_moved_past_is_refused(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.resume_schedule("tick", S1 - MIN)  # makes the occurrence anew
    (again,) = claim(store, S1, now=S1)
    store.finish([end(again)], owner=A, now=S1)  # fired: the schedule is at 10:05
    with pytest.raises(Conflict, match=f"job {first.id} is the {iso(S1)} occurrence of "
                       f"schedule tick, which has moved on to {iso(S1 + 5 * MIN)}"):
        store.retry(first.id, S2, S1)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1 + 5 * MIN]


def test_claim_makes_the_next_occurrence_in_its_transaction(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    got = claim(store, S1, now=S1)
    assert ids(got) == [first.id] and got[0].occurrence == S1
    after = pending_of(store, "tick")
    assert [(j.occurrence, j.next_check_at, j.status) for j in after] == [
        (S1, S1, Status.IN_FLIGHT), (S1 + 5 * MIN, S1 + 5 * MIN, Status.PENDING)]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    nxt = after[1]
    assert nxt.headers == {"X-Team": "ops"} and nxt.id != first.id
    # the occurrence's own end names the schedule in history
    store.finish([end(got[0])], owner=A, now=S1)
    (row,) = store.get_history(first.id)
    assert row.schedule == "tick"


def test_a_claim_taken_over_makes_no_second_occurrence(store):
    store.add_schedule(mk_schedule(), S1 - MIN)
    (job,) = claim(store, S1, now=S1, owner=A, lease=MIN)
    # A vanished (never held a session): its lease runs out and B takes the claim over
    (again,) = claim(store, S1, now=S1 + 2 * MIN, owner=B)
    assert again.id == job.id
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN


def test_runners_stopped_3h_missed_once(store):
    store.add_schedule(mk_schedule(missed="once"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (job,) = claim(store, S1, now=late)
    assert job.occurrence == S1
    (row,) = store.history(outcome="skipped")
    assert row.schedule == "tick"
    assert row.reason.startswith("35 occurrences missed 2026-11-22 10:05–12:55 (UTC), "
                                 "policy once"), row.reason
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, late]


def test_runners_stopped_3h_missed_skip(store):
    store.add_schedule(mk_schedule(missed="skip"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    assert claim(store, S1, now=late) == []
    (row,) = store.history(outcome="skipped")
    assert row.reason.startswith("36 occurrences missed"), row.reason
    assert [j.occurrence for j in pending_of(store, "tick")] == [late]


def test_runners_stopped_3h_missed_all(store):
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (job,) = claim(store, S1, now=late)
    assert job.occurrence == S1
    assert list(store.history(outcome="skipped")) == []
    made = pending_of(store, "tick")
    assert [j.occurrence for j in made] == [S1 + i * 5 * MIN for i in range(37)]
    # the missed ones fire in the next slot, the one after in its own
    assert {j.next_check_at for j in made[1:]} == {late + MIN}


def test_retry_of_a_missed_occurrence_a_pause_cancelled(store):
    """`--missed all` made a job of a missed occurrence as the schedule moved past it; a
    pause cancels it: no other job of it can ever be made, so retry makes it again (once),
    and resume does not; the pending occurrence a pause cancelled stays refused once the
    schedule has fired it anew."""
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (first,) = claim(store, S1, now=late)
    store.finish([end(first)], owner=A, now=late)
    made = {j.occurrence: j for j in pending_of(store, "tick")}
    at = store.get_schedule("tick").next_at
    missed = made[S1 + 10 * MIN]
    store.pause_schedule("tick", late)
    (row,) = store.get_history(missed.id)
    assert row.reason == f"schedule tick paused (its missed {iso(S1 + 10 * MIN)} occurrence)"
    assert store.get_history(made[at].id)[0].reason == "schedule tick paused"
    again = store.retry(missed.id, late + MIN, late)
    assert (again.id, again.occurrence) == (missed.id, S1 + 10 * MIN)
    with pytest.raises(Conflict):  # pending already
        store.retry(missed.id, late + MIN, late)
    store.resume_schedule("tick", late)
    assert sorted(j.occurrence for j in pending_of(store, "tick")) == [S1 + 10 * MIN, at]
    (pending,) = [j for j in pending_of(store, "tick") if j.occurrence == at]
    # both fire: the retried missed one and the pending occurrence made anew at resume
    slot = pending.next_check_at
    got = claim(store, slot, now=max(slot, late + MIN))
    assert sorted(ids(got)) == sorted([missed.id, pending.id])
    store.finish([end(j) for j in got], owner=A, now=max(slot, late + MIN))
    assert store.get_schedule("tick").next_at > at
    assert [j.occurrence for j in pending_of(store, "tick")] == [store.get_schedule(
        "tick").next_at]
    # the pending occurrence the pause cancelled, fired by the job resume made: refused
    with pytest.raises(Conflict, match=f"job {made[at].id} is the {iso(at)} occurrence of "
                       "schedule tick, which has moved on"):
        store.retry(made[at].id, at + MIN, at)


def test_unarmed_schedules_are_the_live_ones_without_their_occurrence(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.add_schedule(mk_schedule("off"), S1 - MIN)
    store.pause_schedule("off", S1 - MIN)
    assert store.unarmed_schedules() == []
    store.cancel([first.id], S1 - MIN)
    assert store.unarmed_schedules() == ["tick"]
    store.resume_schedule("tick", S1 - MIN)
    assert store.unarmed_schedules() == []
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1]


def test_pause_resume_remove_schedule(store):
    from awty.errors import ScheduleNotFound

    first = store.add_schedule(mk_schedule(), S1 - MIN)
    paused = store.pause_schedule("tick", S1 - MIN)
    assert paused.paused_at is not None and pending_of(store, "tick") == []
    assert store.get_history(first.id)[0].reason == "schedule tick paused"
    assert claim(store, S1, now=S1) == []
    resumed = store.resume_schedule("tick", S1 + 12 * MIN)
    assert resumed.paused_at is None
    (again,) = pending_of(store, "tick")
    # the occurrence missed while paused is due at once; its claim applies the policy
    assert (again.occurrence, again.next_check_at) == (S1, S1 + 13 * MIN)
    assert store.resume_schedule("tick", S1 + 12 * MIN) and len(pending_of(store, "tick")) == 1
    (fired,) = claim(store, S1 + 13 * MIN, now=S1 + 13 * MIN)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 15 * MIN]
    store.finish([end(fired)], owner=A, now=S1 + 13 * MIN)
    result = store.remove_schedule("tick", S1 + 14 * MIN)
    assert [result.jobs[i].occurrence for i in result.cancelled] == [S1 + 15 * MIN]
    assert store.get_schedule("tick") is None and pending_of(store, "tick") == []
    with pytest.raises(ScheduleNotFound):
        store.pause_schedule("tick", S1)
# The (schedule, occurrence) key met by a claim, an arm, an add or a retry: a job the store holds
# for an occurrence is that occurrence's job (a home moved while its runner claimed, a retried
# occurrence, a job left in flight by a removed schedule of the same name).
def occurrence_job(name: str, at: datetime, slot: datetime = S1) -> Job:
    return mk(slot, schedule=name, occurrence=at)


def test_a_claim_whose_next_occurrence_has_a_pending_job_keeps_it(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    assert ids(claim(store, S1, now=S1)) == [first.id]
    assert [(j.id, j.occurrence) for j in pending_of(store, "tick")] == [
        (first.id, S1), (held.id, S1 + 5 * MIN)]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    # that job is the occurrence's: its claim moves the schedule on
    assert ids(claim(store, S2, now=S2)) == [held.id]
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN,
                                                                 S1 + 10 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 10 * MIN


def test_a_claim_whose_next_occurrence_is_in_flight_moves_past_it(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    # claimed while it was not the pending occurrence: no claim of it moves the schedule on
    assert ids(store.claim_ids([held.id], now=S1, owner=B, lease_until=S1 + MIN)) == [held.id]
    assert ids(claim(store, S1, now=S1)) == [first.id]
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN,
                                                                 S1 + 10 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 10 * MIN
    assert store.unarmed_schedules() == []


def test_missed_all_makes_no_second_job_of_a_held_occurrence(store):
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(minutes=30)
    (held,) = add(store, occurrence_job("tick", S1 + 10 * MIN, S2))
    claim(store, S1, now=late)
    made = [j.occurrence for j in pending_of(store, "tick")]
    assert sorted(made) == [S1 + i * 5 * MIN for i in range(7)], made
    assert store.get_schedule("tick").next_at == S1 + 30 * MIN


@pytest.mark.slow
def test_add_and_resume_take_a_held_occurrence_as_it_is(store, case, holders):
    hold(case, holders, B)
    job = store.add_schedule(mk_schedule(), S1 - MIN)
    store.claim_ids([job.id], now=S1 - MIN, owner=B, lease_until=S1 + MIN)
    store.start([job.id], owner=B, now=S1 - MIN)
    # removed while its occurrence is in flight, then added again: the job in flight is S1's
    store.remove_schedule("tick", S1 - MIN)
    again = store.add_schedule(mk_schedule(), S1 - MIN)
    assert (again.occurrence, store.get_schedule("tick").next_at) == (S1 + 5 * MIN,
                                                                       S1 + 5 * MIN)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN]
    # a pending one is the occurrence's job: resume (doctor --repair) makes none
    store.pause_schedule("tick", S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    resumed = store.resume_schedule("tick", S1 - MIN)
    assert resumed.next_at == S1 + 5 * MIN
    assert [j.id for j in pending_of(store, "tick") if j.status is Status.PENDING] == [held.id]


def test_retry_of_an_occurrence_held_again_is_refused(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.resume_schedule("tick", S1 - MIN)  # makes the occurrence anew
    (again,) = pending_of(store, "tick")
    assert again.occurrence == S1 and again.id != first.id
    with pytest.raises(Conflict, match=f"occurrence of schedule tick, which job {again.id} "):
        store.retry(first.id, S2, S1 - MIN)
    assert ids(pending_of(store, "tick")) == [again.id]


# --- serve's tokens (awty token) -----------------------------------------------------------
def test_tokens_are_kept_by_hash_with_their_options_and_revoked_at_once(store, case):
    from awty.model import ApiToken

    t = ApiToken("svc", ("jobs:read", "jobs:write"), NOW, None, ("https://a.example/",),
                 "/srv/jobs", {"PATH": "/bin"})
    store.add_token(t, "h1")
    with pytest.raises(Conflict, match="a token named 'svc' exists"):
        store.add_token(ApiToken("svc", ("admin",), NOW), "h2")
    [got] = store.tokens()
    assert (got.name, got.scopes, got.allow_callbacks, got.exec_dir, got.exec_env) == (
        "svc", ("jobs:read", "jobs:write"), ("https://a.example/",), "/srv/jobs",
        {"PATH": "/bin"})
    assert got.created_at == NOW and got.last_used_at is None
    assert store.token_for("nope", NOW) is None
    assert store.token_for("h1", NOW).name == "svc"
    # the last use is written at most once a minute (a token's every request is no write)
    store.token_for("h1", NOW + timedelta(seconds=30))
    assert store.tokens()[0].last_used_at == NOW
    store.token_for("h1", NOW + timedelta(minutes=2))
    assert store.tokens()[0].last_used_at == NOW + timedelta(minutes=2)
    other = case.open()  # another process's connection sees the revoke at once
    try:
        assert other.token_for("h1", NOW) is not None
        # a new environment for its jobs (read when they run): seen by the other at once,
        # everything else of the token kept
        changed = store.set_token_env("svc", {"PATH": "/usr/bin", "DB": "postgresql://x"})
        assert changed is not None and changed.exec_env == {"PATH": "/usr/bin",
                                                             "DB": "postgresql://x"}
        seen = other.token_named("svc")
        assert (seen.scopes, seen.allow_callbacks, seen.exec_dir, seen.exec_env) == (
            ("jobs:read", "jobs:write"), ("https://a.example/",), "/srv/jobs",
            {"PATH": "/usr/bin", "DB": "postgresql://x"})
        assert other.token_for("h1", NOW).exec_env == seen.exec_env
        assert store.set_token_env("nope", {}) is None and store.token_named("nope") is None
        assert store.revoke_token("svc") and not store.revoke_token("svc")
        assert other.token_for("h1", NOW) is None and other.tokens() == []
        assert other.token_named("svc") is None
    finally:
        other.close()


def test_a_tokens_ref_is_kept_and_tells_a_new_token_of_its_name_apart(store):
    from awty import tokens

    first = tokens.make("ops", "jobs:exec", NOW)
    store.add_token(first, "h1")
    assert first.ref and store.token_named("ops").ref == first.ref
    store.revoke_token("ops")
    store.add_token(tokens.make("ops", "jobs:exec", NOW), "h2")
    assert store.token_named("ops").ref not in (None, first.ref)


def test_list_after_a_position_pages_in_run_order(store):
    jobs = add(store, mk(S1), mk(S1), mk(S2), mk(S2))
    order = [j.id for j in store.list()]
    assert sorted(order) == sorted(ids(jobs))
    first = list(store.list(limit=3))
    rest = list(store.list(after=(first[-1].next_check_at, first[-1].id)))
    assert [j.id for j in first + rest] == order
    assert list(store.list(after=(S2, "~"))) == []
