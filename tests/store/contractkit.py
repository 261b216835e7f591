"""The store contract suite's vocabulary (tests/store/test_contract*.py): its instants and slots,
two owners, a job (``mk``, ids in time order as real adds make them) and the store calls the
tests make most (``add``, ``claim``, ``end``), an execution row, and the wait for a SIGKILLed
owner's session to end. Imported as ``contractkit`` (tests/store/conftest.py puts this folder on
``sys.path``, as tests/serve does for servekit)."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta

from awty.ids import new_id
from awty.model import Answer, End, Execution, Job, Kind, Outcome, Result

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
