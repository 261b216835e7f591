"""The store contract (awty/store/base.py), checked against every store. Adding and reading: the
schema check, add (idempotency, all or nothing), list, count, find, match_ids, slot_ids,
slots_with_work, history, stats. Each test calls ``Store`` methods directly, on a fresh store
per test (see conftest.py); the suite's vocabulary is contractkit.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from awty.errors import Conflict
from awty.model import Added, Answer, Kind, Outcome, Status
from awty.record import replace
from contractkit import A, B, MIN, NOW, S1, S2, S3, T0, add, claim, end, execution, ids, mk, utc


def test_schema_version_and_check(store):
    v = store.schema_version()
    assert isinstance(v, int) and v >= 1
    health = store.check()
    assert health.ok and health.schema_version == v and health.problems == ()
    assert isinstance(health.detail, str) and health.detail


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


def test_list_after_a_position_pages_in_run_order(store):
    jobs = add(store, mk(S1), mk(S1), mk(S2), mk(S2))
    order = [j.id for j in store.list()]
    assert sorted(order) == sorted(ids(jobs))
    first = list(store.list(limit=3))
    rest = list(store.list(after=(first[-1].next_check_at, first[-1].id)))
    assert [j.id for j in first + rest] == order
    assert list(store.list(after=(S2, "~"))) == []
