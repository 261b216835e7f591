"""A program as a user writes it against awty's Python API. tests/test_types.py runs
``mypy --strict`` on it (a typed user's view of the API) and also runs it, so every call here
works as well as type-checks. Not collected by pytest (no test_ prefix)."""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta

from awty import (
    AddResult, Awty, AwtyError, Call, CancelResult, FixedClock, HistoryRow, InvalidInput, Job,
    JobNotFound, JobView, Kind, SlotSummary, StoreStats,
)


def order_shipped(job: Call) -> timedelta | None:
    """A --call function as a typed user writes it (awty add user_program:order_shipped
    --call …): the HTTP body's names."""
    print(f"{job.id} {job.entity}/{job.key} check {job.check} attempt {job.attempt} "
          f"slot {job.slot}", file=sys.stderr)
    first: datetime = job.first_check_at
    if job.payload.get("shipped") or job.check > 3 or first.year < 2000:
        return None
    return timedelta(hours=2)


def main(home: str) -> list[str]:
    clock = FixedClock(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
    seen: list[str] = []
    with Awty(home, clock=clock) as a:
        added: AddResult = a.add("http://127.0.0.1:9/hook", in_=timedelta(minutes=30),
                                 payload={"order": 42}, entity="order", key="42")
        job: Job = added.job
        slot: datetime = added.slot
        seen.append(f"added {job.id} kind={job.kind.value} slot={slot.isoformat()}")
        assert job.kind is Kind.HTTP

        a.add("http://127.0.0.1:9/hook", in_=90.0)
        a.add("http://127.0.0.1:9/hook", in_="2 hours")
        a.add("true", kind="exec", at=datetime(2030, 1, 2, 9, 0, tzinfo=UTC))
        many: list[AddResult] = a.add_many([
            {"target": "http://127.0.0.1:9/a", "in": "15m"},
            {"target": "http://127.0.0.1:9/b", "in": "PT1H", "entity": "order", "key": "7"},
        ])
        seen.append(f"add_many {len(many)}")

        pending: list[Job] = list(a.list(entity="order"))
        seen.append(f"listed {len(pending)} of {a.count()}")

        shown: JobView = a.get(job.id)
        if shown.job is not None:
            seen.append(f"get pending {shown.job.next_check_at.isoformat()}")
        as_json: str = json.dumps(shown.as_dict())  # what a web handler returns
        seen.append(f"get as JSON {len(as_json) > 0}")

        moved: Job = a.reschedule(job.id, in_=timedelta(hours=1))
        seen.append(f"rescheduled to {moved.next_check_at.isoformat()}")

        one: CancelResult = a.cancel(many[0].job.id)
        several: CancelResult = a.cancel([many[1].job.id])
        seen.append(f"cancelled {len(one.cancelled) + len(several.cancelled)}")
        ids: list[str] = one.cancelled + one.running + one.missing
        seen.append(f"cancel as JSON {json.dumps(several.as_dict()) != ''} {len(ids)}")

        rows: list[HistoryRow] = a.history(outcome="cancelled", limit=10)
        seen.append(f"history {len(rows)}: {sorted(r.outcome.value for r in rows)}")

        retried: list[Job] = a.retry(rows[0].id)
        seen.append(f"retried {retried[0].id == rows[0].id}")

        slots: list[tuple[datetime, int]] = a.slots()
        seen.append(f"slots {len(slots)}")

        clock.advance(timedelta(days=2))
        summary: SlotSummary = a.run_slot(dry_run=True)
        seen.append(f"run_slot dry_run={summary.dry_run}")

        stats: StoreStats = a.stats(window=timedelta(days=7))
        seen.append(f"stats pending={stats.pending}")

        try:
            a.get("01ZZZZZZZZZZZZZZZZZZZZZZZZ")
        except JobNotFound as e:
            seen.append(f"not found: {e}")
        try:
            a.add("http://127.0.0.1:9/hook", in_="soon-ish")
        except InvalidInput as e:
            seen.append("invalid input refused")
            err: AwtyError = e
            assert isinstance(err, AwtyError)
    return seen


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for line in main(sys.argv[1] if len(sys.argv) > 1 else tmp):
            print(line)
