"""One run of named jobs (``awty run ID…``): a ``SlotRun`` whose only claim is ``claim_ids``.

Everything after the claim (start just before sending, execute, record per batch, give back
on SIGTERM) is the slot run's own. The claim is all or nothing: if one named job cannot be
claimed (ended, unknown, or leased by another runner), the others are given back unchanged
and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..errors import AwtyError, Conflict, JobNotFound
from ..ids import runner_label
from ..model import Answer, Decision, End, Job, RunSummary, Status
from ..slots import iso
from .slotrun import SlotRun, lease_seconds


class IdsRun(SlotRun):
    def __init__(self, ids: Sequence[str], **kw: Any):
        super().__init__(shard=None, **kw)
        self.ids = list(dict.fromkeys(ids))
        self.claimed_slots: dict[str, datetime] = {}  # id -> the slot its envelope was in
        # One claim holds every named job: its lease must cover them all, not one batch.
        self.lease = lease_seconds(self.settings.replace(batch_size=max(self.settings.batch_size,
                                                                  len(self.ids))))

    async def _claim(self) -> list[Job]:
        assert self.loop is not None
        return await self.loop.run_in_executor(self.io, self._claim_ids)

    def _claim_ids(self) -> list[Job]:
        ids, self.ids = self.ids, []
        if not ids:
            return []  # claimed once already: the run ends when these are sent
        now = self.clock.now()
        store = self.store.local
        jobs = store.claim_ids(ids, now=now, owner=self.owner,
                               lease_until=now + timedelta(seconds=self.lease))
        got = {j.id for j in jobs}
        missing = [i for i in ids if i not in got]
        if missing:
            store.release(sorted(got), owner=self.owner, now=now)
            raise self._why_not(missing[0])
        self.claimed_slots = {j.id: j.next_check_at for j in jobs}
        return jobs

    def _why_not(self, job_id: str) -> AwtyError:
        job = self.store.local.get(job_id)
        if job is None:
            if self.store.local.get_history(job_id):
                return JobNotFound(f"{job_id} (it has ended; see `awty show {job_id}`); "
                                   "nothing was run")
            return JobNotFound(f"{job_id}; nothing was run")
        if job.status is Status.IN_FLIGHT:
            return Conflict(f"job {job_id} is being delivered now "
                            f"({runner_label(job.lease_owner)}); nothing was run")
        return Conflict(f"job {job_id} changed while it was being claimed; nothing was run, "
                        "try again")


def report(applied: list[Decision], summary: RunSummary) -> None:
    """What became of each recorded job, as ``awty run`` shows it (``RunSummary.jobs``)."""
    for d in applied:
        result = d.result
        reason: str | None
        at: str | None
        if isinstance(d, End):
            outcome, reason, at = d.outcome.value, d.reason, None
        else:
            outcome = ("deferred" if result is not None and result.deferred else
                       "rechecked" if result is not None and result.answer is Answer.RECHECK
                       else "retried")
            reason, at = d.error or (result.error if result else None), iso(d.next_check_at)
        summary.jobs.append({"id": d.job.id, "outcome": outcome, "reason": reason,
                             "status": result.status if result else None,
                             "next_check_at": at})

