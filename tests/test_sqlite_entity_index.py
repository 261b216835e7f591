"""The SQLite entity index is keyed slot first (a run's deletions stay on a few pages): entity
lookups must still find every job of the entity in every slot, and through that index, never by
reading every pending job."""

from __future__ import annotations

from datetime import timedelta

from awty.api import Awty
from awty.store.sqlite_rows import SELECT_JOB, entity_filters, job_filters

URL = "https://example.com/hook"


def _plan(conn, sql: str, params: list) -> list[str]:
    return [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def _fill(a: Awty, clock) -> None:
    # Slots with and without the entity, keys that sort apart, jobs without any entity.
    for hours in (1, 2, 5, 30, 24 * 40):
        at = clock.now() + timedelta(hours=hours)
        a.add(URL, at=at, entity="order", key=str(hours))
        a.add(URL, at=at, entity="order", key="shared")
        a.add(URL, at=at, entity="user", key=str(hours))
        a.add(URL, at=at)


def test_entity_lookups_find_every_slot_through_the_slot_entity_index(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        _fill(a, clock)
        a.add(URL, at=clock.now() + timedelta(hours=3))  # a slot holding no entity job
        conn = a.store.conn
        for entity, key in (("order", "shared"), ("order", None), ("user", "30")):
            for cond, params in (entity_filters(entity, key),
                                 job_filters(None, None, None, entity, key, None)):
                plan = _plan(conn, SELECT_JOB + cond, params)
                assert any("future_job_slot_entity" in p for p in plan), plan
                assert not any(p.startswith("SCAN future_job") for p in plan), plan
        assert a.count(entity="order", key="shared") == 5
        assert a.count(entity="order") == 10
        assert [j.entity_key for j in a.list(entity="user", key="30")] == ["30"]
        assert a.count(entity="nobody") == 0
        res = a.cancel_entity("order", "shared")
        assert len(res.cancelled) == 5
        assert {res.jobs[i].entity_key for i in res.cancelled} == {"shared"}
        assert len(a.cancel_entity("order").cancelled) == 5
        assert a.count(entity="order") == 0 and a.count(entity="user") == 5
        assert a.count() == 11


def test_entity_lookups_stay_right_after_analyze(home, clock):
    # Statistics change the planner's choices; the answers must not change with them.
    with Awty(home, clock=clock, env={}) as a:
        _fill(a, clock)
        a.store.conn.execute("ANALYZE")
        assert a.count(entity="order", key="shared") == 5
        assert len(a.cancel_entity("user").cancelled) == 5
        assert a.count(entity="user") == 0 and a.count(entity="order") == 10
