"""The store contract. SQLite is the embedded default; a PostgreSQL store must be able to
implement exactly this without the runner changing. Every method is one transaction.

Rules every implementation keeps:
- ``future_job`` holds pending work only; a job that ends leaves it and gains one
  ``job_history`` row in the same transaction (nothing is lost between the two).
- A job is owned by a runner while ``status == in_flight`` and ``lease_until > now``. A lease
  whose ``lease_until <= now`` (the boundary included) is expired and may be claimed again.
- ``finish`` applies a decision only to jobs still leased by the same owner; a job cancelled
  or re-claimed meanwhile is left as it is (its result is dropped, never half-applied).
- Times are aware UTC datetimes; slots are slot-boundary datetimes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..model import HistoryRow, Job, Outcome, Result


@dataclass(frozen=True, slots=True)
class End:
    """End a job: delete it from future_job and write its history row."""

    job: Job
    outcome: Outcome
    reason: str
    result: Result | None  # the last execution, if any
    lateness: float | None = None  # seconds between the slot boundary and the execution


@dataclass(frozen=True, slots=True)
class Reslot:
    """Put a job back to pending in a later slot (a re-check, a retry, or a deferral)."""

    job: Job
    next_check_at: datetime
    check_count: int
    attempt: int
    result: Result | None
    error: str | None = None


Decision = End | Reslot


@dataclass(frozen=True, slots=True)
class Added:
    job: Job
    created: bool  # False: an existing job returned for the same idempotency key


class Store(Protocol):
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None]) -> list[Added]:
        """Insert all jobs or none. A job whose idempotency_key is already known (pending or in
        history) with the same fingerprint returns the existing job (created=False); with
        another fingerprint raises ``Conflict`` and nothing is inserted."""

    def get(self, job_id: str) -> Job | None: ...

    def get_history(self, job_id: str) -> list[HistoryRow]:
        """Every ended run of that id, oldest first (a retried job can end more than once)."""

    def find(self, ids: Iterable[str]) -> dict[str, datetime | None]:
        """For each given id that is known: its pending slot, or None when only in history."""

    def list(self, *, status: str | None = None, slot: datetime | None = None,
             entity: str | None = None, key: str | None = None, kind: str | None = None,
             limit: int | None = None) -> Iterator[Job]:
        """Pending jobs ordered by (next_check_at, id)."""

    def cancel(self, ids: Sequence[str], now: datetime, reason: str = "cancelled") -> list[Job]:
        """End the named jobs as ``cancelled``; unknown ids are ignored (returned list says)."""

    def cancel_entity(self, entity: str, key: str | None, now: datetime) -> list[Job]: ...

    def reschedule(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        """Move a pending job to another slot. Raises ``JobNotFound``, ``Conflict`` if leased."""

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None) -> list[Job]:
        """Lease up to ``limit`` jobs of ``slot`` (pending, or in_flight with an expired lease
        held by another owner), in (next_check_at, id) order, with ``owner`` and
        ``lease_until``."""

    def finish(self, decisions: Sequence[Decision], *, owner: str, now: datetime) -> list[Decision]:
        """Apply decisions for jobs still leased by ``owner``, in one transaction; returns the
        ones applied."""

    def release(self, ids: Sequence[str], *, owner: str, now: datetime) -> int:
        """Give leased jobs back as pending, unchanged (an interrupted run)."""

    def slot_ids(self, slot: datetime) -> set[str]:
        """Ids of every job (any status) whose next_check_at is ``slot``."""

    def slots_with_work(self, *, until: datetime | None = None,
                        since: datetime | None = None) -> list[tuple[datetime, int]]:
        """(slot, job count) for slots holding jobs, oldest first, within [since, until]. Uses
        the slot index: the cost follows the rows in range, not the table."""

    def retry(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        """Re-arm an ended job (failed, expired…) as pending with fresh attempts. Raises
        ``JobNotFound`` if unknown, ``Conflict`` if it is still pending."""

    def history(self, *, outcome: str | None = None, entity: str | None = None,
                since: datetime | None = None, limit: int | None = None) -> list[HistoryRow]:
        """Ended jobs, newest first."""

    def close(self) -> None: ...
