"""The store contract: everything any caller (runner, facade, doctor, stats) asks of a store.
SQLite (+ the slot tree) is the embedded default; PostgreSQL implements exactly this, and the
runner never learns which one it has. Nothing outside ``awty/store/`` holds SQL. What the
rules below decide is written once, in ``rules`` (each store reads and writes around it), and
a store is opened only through ``store.open(spec)``.

Rules every implementation keeps (``tests/store/test_contract*.py`` check each, per store):

Jobs and history
- ``future_job`` holds pending work only; a job that ends leaves it and gains one
  ``job_history`` row in the same transaction (nothing is lost between the two).
- Every method is one transaction: it happens whole or not at all.
- Times are aware UTC datetimes; slots are slot-boundary datetimes. Order is always
  ``(next_check_at, id)``; ids are ULIDs of the first due time (``ids.new_id``).

Owners, leases and the life of a claim
- A runner is an *owner* (``"host:pid:nonce"``). It holds ``owner_session(owner)`` open for
  as long as it runs; the store can then tell that the owner is *alive* (SQLite: an flock
  on a file beside the database; PostgreSQL: a session advisory lock) whatever any clock says.
- ``claim`` moves jobs ``pending -> in_flight`` with ``lease_owner`` and ``lease_until``.
  ``start`` then marks claimed jobs ``started_at`` just before their execution begins: a
  claimed job is the runner's intention, a started one is (or may be) on the wire.
- Lease times are kept in one clock. SQLite: the callers' ``now`` (one host, one clock: every
  runner of a home reads the same system clock). PostgreSQL (several hosts, whose clocks may
  differ by hours): the server's ``now()``; a claim's lease lasts ``lease_until - now`` from
  the server's now, and the ``now`` given plays no part in expiry (``lease_clock="caller"``
  keeps the callers' time instead, for tests that move time by hand).
- A claim is *taken over* (claimed again by another owner) only when its lease has expired
  (``lease_until <= now``, the boundary included) **and** its owner is not alive. A live
  owner's claims are never taken over, even by a process whose clock runs ahead; an owner
  that never opened a session is judged by its lease alone. A claimer never takes back its
  own expired leases (they are still its work in progress).
- A session can end under a live runner only on PostgreSQL (the server closes the connection
  holding the lock: terminated, timed out, failed over, the network lost). Its claims may then
  be taken over, so ``start`` is made there only while the session is held, checked by the
  server in the start's own statement from whichever process asks; a start refused for that
  raises ``SessionLost`` and the runner starts nothing more. SQLite's session is the runner's
  own flock, held until its process exits.
- ``finish`` applies a decision only to jobs still leased by the same owner; a job cancelled,
  rescheduled or taken over meanwhile is left as it is (its result is dropped, never
  half-applied).
- ``cancel`` / ``reschedule`` of a job that is pending, or claimed but not started, take it
  back (the runner's ``start`` will not return it, so no request for it starts afterwards).
  A started job whose owner is alive (or, unknown liveness, whose lease is live) is *running*:
  cancel leaves it alone and reports it, reschedule raises ``Conflict``; its real outcome
  reaches history through ``finish``. A started job of a dead owner may be cancelled.

Recurring schedules
- A schedule's occurrences are ordinary jobs naming it (``Job.schedule``, ``Job.occurrence``:
  the nominal time); ``(schedule, occurrence)`` is unique among pending jobs. Only the next
  occurrence exists as a pending job (``Schedule.next_at`` names it): ``claim`` (and
  ``claim_ids``) of it makes the next one in the same transaction, by ``schedrules.at_claim``
  (the missed-run policy: missed ones to fire are made too, what does not fire ends as one
  ``skipped`` history row; a claimed occurrence that does not fire is left out of the claim).
  ``next_at`` moves only from the occurrence claimed, so a claim taken over, a re-run or a
  second runner never makes an occurrence twice. A paused or removed schedule moves no more.

Locks
- ``slot_lock(slot, shard)`` is the first line against two runners doing one slot's work
  twice; leases are the second. SQLite: an unsharded run holds the slot exclusively; shards
  hold it shared plus their own shard exclusively, so an unsharded run and sharded runs of one
  slot exclude each other. PostgreSQL: runners on any number of hosts share a slot (claims
  use ``FOR UPDATE SKIP LOCKED``); the lock is an advisory lock shared by runners.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..model import (
    Added, ApiToken, CancelResult, Decision, Durations, End, Execution, HistoryRow, Job,
    LeaseGroup, Reslot, Schedule, StoreHealth, StoreStats,
)

if TYPE_CHECKING:
    from .spec import StoreSpec

__all__ = ["Added", "CancelResult", "Decision", "End", "Reslot", "SlotLock", "Store"]


class SlotLock(Protocol):
    """A non-blocking lock on one slot (or one shard of it) for one run."""

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another runner holds it in a way that
        excludes this one (that runner's run is then the slot's run)."""

    def release(self) -> None: ...

    def holder(self) -> str:
        """Who holds it, for the "busy" message (e.g. ``pid 123 on host-a``)."""


class Store(Protocol):
    # Whether a run's store work is worth a process of its own (``store_process = "auto"``):
    # each store says it, with its reason (``storeproc.pays``)
    offload: bool

    # -- lifecycle ------------------------------------------------------------------------
    def schema_version(self) -> int: ...

    def check(self) -> StoreHealth:
        """The store's own health for ``doctor``: integrity (SQLite) or reachability and
        schema (PostgreSQL). Never raises for what it finds."""

    def close(self) -> None: ...

    def spec(self) -> StoreSpec:
        """How another process opens this same store (``store.open``): a picklable
        description, no connection in it. The runner's store process uses it."""

    # -- what the store keeps about itself -------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """The store's own notes, read when it opened (cheap: no query): ``"settings"``, the
        settings every host of a cluster reads (``set_cluster``: setting -> value, as
        ``config.CLUSTER_KEYS``); ``"moved"``, where this home moved to (``mark_moved``).
        A key never written is absent."""

    def set_cluster(self, values: dict[str, Any], *, now: datetime,
                    reslot: int | None = None) -> int:
        """Keep ``values`` as the ``"settings"`` meta. With ``reslot`` (a new resolution),
        every pending job off a ``reslot``-minute boundary moves to ``slots.slot_for`` of its
        slot, in the same transaction (jobs in flight are left to their runner); returns how
        many moved."""

    def mark_moved(self, to: str, *, now: datetime) -> None:
        """Note that this home moved to ``to`` (``"moved"``: ``{"to": to, "at": iso}``);
        the facade then refuses adds and runs here."""

    # -- adding ---------------------------------------------------------------------------
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None], *,
            tokens: Collection[str] = (), now: datetime | None = None) -> list[Added]:
        """Insert all jobs or none. A job whose idempotency_key is already known (pending or in
        history) with the same fingerprint returns the existing job (created=False); with
        another fingerprint raises ``Conflict`` and nothing is inserted.
        ``tokens``: SHA-256s of serve's tokens the jobs are added with, checked in the same
        transaction before anything goes in (serve's adds: one round trip and commit fewer
        than ``token_for`` first): when one is unknown or revoked, raises ``Revoked`` naming
        those and nothing is inserted; the last use of the others is noted at ``now`` as
        ``token_for`` notes it."""

    def add_chunks(self, chunks: Iterable[tuple[Sequence[Job], Sequence[str | None]]]
                   ) -> list[Added]:
        """``add`` of the jobs ``chunks`` gives (each a list of jobs and their fingerprints),
        in one transaction, all or none: each chunk is stored while ``chunks`` makes the next
        (the facade validating it, ``Awty._streamed``), and an exception from ``chunks`` ends
        the transaction with nothing stored. A job with an idempotency key or a schedule
        raises ``ValueError`` (``rules.admit_chunk``: those go through ``add``). Each chunk's
        rows go in in run order, a chunk after the other."""

    # -- reading --------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None: ...

    def get_history(self, job_id: str) -> list[HistoryRow]:
        """Every ended run of that id, oldest first (a retried job can end more than once)."""

    def executions(self, job_id: str) -> list[Execution]:
        """Every recorded execution of that id, oldest first."""

    def find(self, ids: Iterable[str]) -> dict[str, datetime | None]:
        """For each given id that is known: its pending slot, or None when only in history."""

    def match_ids(self, prefix: str, limit: int) -> list[str]:
        """Distinct ids (pending or ended) that start with ``prefix`` (upper case), in id
        order, at most ``limit``: how ``show 01JD4X`` finds its job."""

    def list(self, *, status: str | None = None, slot: datetime | None = None,
             until: datetime | None = None, entity: str | None = None, key: str | None = None,
             kind: str | None = None, limit: int | None = None,
             after: tuple[datetime, str] | None = None) -> Iterator[Job]:
        """Pending jobs ordered by (next_check_at, id), streamed (memory stays flat);
        ``until``: next_check_at at or before it; ``after``: (next_check_at, id) past this."""

    def count(self, *, status: str | None = None, slot: datetime | None = None,
              until: datetime | None = None, entity: str | None = None,
              key: str | None = None, kind: str | None = None) -> int:
        """How many jobs ``list`` with the same filters would give, without a limit."""

    def slot_ids(self, slot: datetime) -> set[str]:
        """Ids of every job (any status) whose next_check_at is ``slot``."""

    def slots_with_work(self, *, since: datetime | None = None,
                        until: datetime | None = None) -> builtins.list[tuple[datetime, int]]:
        """(slot, job count) for slots holding jobs, oldest first, within [since, until]. Uses
        the slot index: the cost follows the rows in range, not the table."""

    def history(self, *, outcome: str | None = None, entity: str | None = None,
                key: str | None = None, since: datetime | None = None,
                limit: int | None = None) -> Iterator[HistoryRow]:
        """Ended jobs, newest first, streamed as ``list`` (memory stays flat)."""

    def stats(self, *, now: datetime, since: datetime, current: datetime,
              next_slots: int) -> StoreStats:
        """Pending work at ``now`` (``current`` is the current slot) and what ended or ran
        since ``since``; lateness percentiles over the executions in that window."""

    def durations(self, since: datetime, executions_ms: Sequence[float],
                  runs_ms: Sequence[float]) -> tuple[Durations, Durations]:
        """Since ``since``, as histograms over the bounds given (ascending): each execution's
        duration (a callback's answer, an exec or python job's run), and each run's (one
        runner process's executions of one slot: the first start to the last end; a run that
        executed nothing is not there). Computed by the store, never by holding rows."""

    def stats_and_durations(self, *, now: datetime, since: datetime, current: datetime,
                            next_slots: int, executions_ms: Sequence[float],
                            runs_ms: Sequence[float]
                            ) -> tuple[StoreStats, Durations, Durations]:
        """``stats`` and ``durations`` over the one window ``since``, as each gives them, the
        window's executions read once for both (a metrics scrape: reading them is most of
        its cost)."""

    def leases(self, now: datetime) -> builtins.list[LeaseGroup]:
        """Jobs in flight grouped by owner, with how many leases expired and whether the
        owner is alive (None where the store cannot tell: SQLite, an owner that never
        opened a session; PostgreSQL answers False, no session lock being held), and when the
        last of them ends (``ends``, in the lease clock)."""

    def last_fired(self) -> tuple[datetime, datetime] | None:
        """The newest slot in the execution log and when its first execution started (what
        ``doctor`` judges "the last slot fired on time" by), or None when nothing ran. Reads
        only the newest executions: the log can hold millions of rows."""

    # -- changing -------------------------------------------------------------------------
    def cancel(self, ids: Sequence[str], now: datetime,
               reason: str = "cancelled") -> CancelResult:
        """End the named jobs as ``cancelled`` unless running (see the module's rules)."""

    def cancel_entity(self, entity: str, key: str | None, now: datetime) -> CancelResult:
        """``cancel`` of every pending job of ``entity`` (and ``key`` when given)."""

    def reschedule(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        """Move a pending (or claimed, not started) job to another slot, as pending. Raises
        ``JobNotFound``, or ``Conflict`` naming the runner when the job is running."""

    def retry(self, job_id: str, next_check_at: datetime, now: datetime) -> Job:
        """Re-arm an ended job (failed, expired, cancelled) as pending with fresh attempts.
        Raises ``JobNotFound`` if unknown, ``Conflict`` if it is still pending or if it is a
        schedule's occurrence that another job holds now (one job per occurrence)."""

    def prune(self, before: datetime, *, dry_run: bool = False) -> int:
        """Delete history rows (and executions) that ended before ``before``; returns how many
        history rows went (or would go)."""

    # -- running --------------------------------------------------------------------------
    def owner_session(self, owner: str) -> AbstractContextManager[None]:
        """Hold ``owner`` alive for the length of a run (see the module's rules)."""

    def slot_lock(self, slot: datetime, shard: tuple[int, int] | None = None) -> SlotLock:
        """The lock a run of ``slot`` (or one shard: (index, count), 0-based) takes."""

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None,
              kinds: Sequence[str] | None = None) -> builtins.list[Job]:
        """Lease up to ``limit`` jobs of ``slot`` (pending, or in flight and taken over: see
        the rules), in (next_check_at, id) order. ``shard`` keeps only the jobs whose
        ``ids.shard_of(id, count) == index``; ``kinds`` (``runner_kinds``) only jobs of these
        kinds (None: every kind)."""

    def claim_ids(self, ids: Sequence[str], *, now: datetime, owner: str,
                  lease_until: datetime) -> builtins.list[Job]:
        """Lease the named jobs whatever their slot (``awty run ID``), on the same terms as
        ``claim``; ids not claimable are left out."""

    def start(self, ids: Sequence[str], *, owner: str, now: datetime) -> builtins.list[str]:
        """Mark claimed jobs as started, just before executing them; returns those still
        claimed by ``owner``, in the order given. A job left out was cancelled, rescheduled
        or taken over since its claim: it must not run. ``SessionLost``: the owner's session
        ended (PostgreSQL), nothing was started."""

    def finish(self, decisions: Sequence[Decision], *, owner: str, now: datetime,
               executions: Sequence[Execution] = ()) -> builtins.list[Decision]:
        """Apply decisions (and record executions) for jobs still leased by ``owner``, in one
        transaction; returns the ones applied."""

    def release(self, ids: Sequence[str], *, owner: str, now: datetime) -> int:
        """Give ``owner``'s claims back as pending, unchanged (an interrupted run); returns
        how many."""

    def note_runner(self, host: str, pid: int, kinds: Sequence[str], now: datetime) -> None:
        """A runner on ``host`` starts a run claiming ``kinds``: kept (one row per host) for
        ``runners``."""

    def runners(self) -> builtins.list[tuple[str, tuple[str, ...], int | None, datetime]]:
        """(host, kinds, pid, last seen) of every runner host that ever ran, newest first."""

    # -- recurring schedules ----------------------------------------------------------------
    def add_schedule(self, schedule: Schedule, now: datetime) -> Job:
        """Keep ``schedule`` and make its first occurrence's job (``schedule.next_at``), in one
        transaction; returns that job. ``Conflict`` when the name is taken. A job the store
        holds for that occurrence (left by a removed schedule of the name) is its job
        (``schedrules.first_free``: one in flight moves ``next_at`` past it)."""

    def get_schedule(self, name: str) -> Schedule | None: ...

    def schedules(self) -> builtins.list[Schedule]:
        """Every schedule, by name."""

    def schedule_jobs(self, name: str) -> builtins.list[Job]:
        """The schedule's jobs in ``future_job`` (pending or in flight), in run order."""

    def schedule_outcomes(self) -> dict[str, tuple[str, datetime]]:
        """Each schedule's last history row: name -> (outcome, ended_at)."""

    def schedule_counts(self) -> tuple[int, int]:
        """How many schedules there are, and how many of them are paused (``stats``)."""

    def unarmed_schedules(self) -> builtins.list[str]:
        """The live (not paused) schedules with no job of their ``next_at`` (its job was
        cancelled by id, or lost on the way in), by name: ``doctor`` reports them and
        ``--repair`` arms each with ``resume_schedule``."""

    def pause_schedule(self, name: str, now: datetime) -> Schedule:
        """Stop ``name``: its pending jobs end as cancelled (running ones finish), and no claim
        moves it on. ``ScheduleNotFound`` when unknown."""

    def resume_schedule(self, name: str, now: datetime) -> Schedule:
        """Undo a pause, and make the job of ``next_at`` if none exists (a late one fires in
        the next slot, where its claim applies the missed policy; one in flight moves
        ``next_at`` past it, ``schedrules.first_free``). Also what ``doctor --repair`` does
        for a schedule that lost its pending occurrence. Returns the schedule as it is now."""

    def remove_schedule(self, name: str, now: datetime) -> CancelResult:
        """Delete ``name``; its pending jobs end as cancelled (running ones finish, moving
        nothing on)."""

    # -- moving a home (``awty export`` / ``awty import``) --------------------------------
    def export_schedules(self) -> Iterator[Schedule]:
        """Every schedule, by name, streamed (memory stays flat)."""

    def export_pending(self) -> Iterator[tuple[Job, str | None]]:
        """Every job in ``future_job`` (in flight ones as they are) with its idempotency
        fingerprint, in (next_check_at, id) order, streamed (memory stays flat)."""

    def export_history(self) -> Iterator[dict[str, Any]]:
        """Every history row, oldest first, streamed, as a ``portable`` record: what
        ``import_home`` of any store takes back unchanged."""

    def import_home(self, jobs: Sequence[Job], fingerprints: Sequence[str | None],
                    rows: Iterable[dict[str, Any]], schedules: Sequence[Schedule] = ()
                    ) -> tuple[builtins.list[Added], int]:
        """Insert schedules (as they are: their occurrences are among ``jobs``), pending jobs
        (as ``add`` does) and history records (as ``export_history`` gives them, in the order
        given) in one transaction: all, or none. Returns what
        ``add`` would and how many history rows went in. The caller checked every record
        (``transfer.Trust``)."""

    def release_stale(self, owner: str | None, now: datetime) -> int:
        """``doctor --repair``: give back as pending the in-flight jobs of ``owner`` (None: jobs
        in flight with no lease owner, not "any owner") whose lease expired and whose owner is
        not alive; returns how many."""

    # -- serve's tokens (awty token) --------------------------------------------------------
    def add_token(self, token: ApiToken, token_hash: str) -> None:
        """Keep ``token`` under the SHA-256 ``token_hash`` of its secret; raises ``Conflict``
        when a token of that name exists (nothing changed)."""
        ...

    def tokens(self) -> builtins.list[ApiToken]:
        """Every token, by name."""
        ...

    def token_for(self, token_hash: str, now: datetime) -> ApiToken | None:
        """The token whose secret hashes to ``token_hash``, else None (unknown or revoked: a
        revoke is seen by the next request of every process). Notes ``now`` as its last use
        when the one kept is a minute old or more."""
        ...

    def token_named(self, name: str) -> ApiToken | None:
        """The token named ``name`` as kept now, else None (revoked or never made): a run
        reads an exec job's environment from it (``tokens.run_environment``). Notes no use.
        Safe from any thread of the process."""
        ...

    def set_token_env(self, name: str, exec_env: dict[str, str]) -> ApiToken | None:
        """Give the token named ``name`` ``exec_env`` as its jobs' environment (its secret,
        scopes, ref and other options unchanged): the jobs it added, pending or not, run with
        it from their next run on. Returns the token, else None (no token of that name)."""
        ...

    def revoke_token(self, name: str) -> bool:
        """Forget the token named ``name``; False when there is none."""
        ...
