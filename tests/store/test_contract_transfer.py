"""The store contract (awty/store/base.py), checked against every store. Moving a home between
stores (export / import) and the cluster's settings in meta. Each test calls ``Store`` methods
directly, on a fresh store per test (see conftest.py); the suite's vocabulary is contractkit.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awty.errors import Conflict, StoreError
from awty.model import Job, Outcome, Status
from awty.record import replace
from awty.slots import iso
from contractkit import A, B, MIN, NOW, S1, S2, S3, T0, _next_id, add, claim, end, mk


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
