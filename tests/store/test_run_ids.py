"""``Runner.run_ids`` (``awty run ID…``) on each store (SQLite, PostgreSQL): named jobs from
several slots are sent once and recorded; a job a live runner holds is refused, all or
nothing, and nobody else's claim is touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from awty.clock import FixedClock
from awty.config import load
from awty.errors import Conflict
from awty.model import Job, Status
from awty.run.runner import Runner
from awty.slottree.tree import SlotTree
from helpers import make_job

NOW = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)
SLOTS = [datetime(2026, 11, 22, h, 0, tzinfo=UTC) for h in (11, 14)]
A = "holder:4242:aaaaaa"


def job(n: int, url: str, slot: datetime) -> Job:
    return make_job(url, id=f"01JRUN{n:020d}", at=slot, created_at=NOW, updated_at=NOW)


@pytest.fixture
def runner(store, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = load(home, {}, {"quick_retries": 0})
    return Runner(store=store, tree=SlotTree(home), settings=settings, clock=FixedClock(NOW))


def test_named_jobs_of_several_slots_sent_once(store, runner, rx):
    jobs = [job(i, rx.url(f"/j{i}"), SLOTS[i % 2]) for i in range(3)]
    store.add(jobs, [None] * 3)
    summary = runner.run_ids([jobs[2].id, jobs[1].id])
    assert summary.outcomes == {"done": 2} and summary.ran == 2
    assert sorted(j["id"] for j in summary.jobs) == sorted([jobs[1].id, jobs[2].id])
    assert [len(rx.requests(f"/j{i}")) for i in range(3)] == [0, 1, 1]
    assert store.get(jobs[1].id) is None and store.get(jobs[2].id) is None
    assert store.get(jobs[0].id).status is Status.PENDING
    assert {h.outcome.value for h in store.history()} == {"done"}


@pytest.mark.slow
def test_job_held_by_a_live_runner_refused_all_or_nothing(store, case, holders, runner, rx):
    holders.append(case.hold(A))
    held, free = job(1, rx.url("/held"), SLOTS[0]), job(2, rx.url("/free"), SLOTS[1])
    store.add([held, free], [None, None])
    store.claim_ids([held.id], now=NOW, owner=A, lease_until=NOW + timedelta(seconds=1))
    runner.clock.set(NOW + timedelta(hours=5))  # the lease looks long expired: A is alive
    with pytest.raises(Conflict, match=r"being delivered now \(runner pid 4242\)"):
        runner.run_ids([free.id, held.id])
    assert rx.total == 0
    assert store.get(held.id).lease_owner == A
    f = store.get(free.id)
    assert (f.status, f.lease_owner) == (Status.PENDING, None)
