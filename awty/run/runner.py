"""The slot runner: one pass over one slot, no sleeping for time and no printing.

Per slot: refuse the future, load the signing secret, take the slot's lock without waiting
(``Store.slot_lock``), reconcile the slot tree with the store (``reconcile``), then, holding
an owner session for the whole run, let a ``SlotRun`` claim jobs in batches with a lease, mark
each chunk started just before sending it, execute with bounded concurrency and record the
decisions per batch and at least every 250 ms. A SIGKILL sends again, once the leases expire,
at most the callbacks in flight plus ~0.25 s of deliveries; SIGTERM/SIGINT send nothing twice;
no job is ever lost (SPEC 6, 12; tests/reliability/test_crash.py and test_stop.py measure it).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from time import monotonic
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..config import Settings
from ..errors import AwtyError, InvalidInput
from ..gcpause import running
from ..ids import new_owner, shard_of
from ..model import (
    Answer,
    Decision,
    End,
    Kind,
    MisfirePolicy,
    Outcome,
    Reslot,
    RunSummary,
    SlotSummary,
)
from ..policy import misfired
from ..slottree.tree import NoTree, SlotTree
from ..slots import current_slot, iso, slot_id
from ..store.base import Store
from .attempts import Executing, RunOptions, close_all, executor_for, warm_http
from .catchup import CatchUp, CatchupSummary, OpenSlot, late_work
from .reconcile import Reconciler
from .slotrun import SlotRun
from .storeproc import RunStoreCalls, pays

if TYPE_CHECKING:
    from logging import Logger

    from ..executors.base import Executor

OnEvent = Callable[[str, dict[str, Any]], None]


class Runner:
    def __init__(self, *, store: Store, tree: SlotTree | NoTree, settings: Settings, clock: Clock,
                 secret: Callable[[], tuple[bytes, ...]] = tuple,
                 log: Callable[[], Logger] | None = None,
                 on_event: OnEvent | None = None):
        self.store = store
        # NoTree: no slot tree (PostgreSQL, shared by hosts): no drop-ins to reconcile, no files
        # to keep in step. The only thing the runner knows of which store it has.
        self.tree = tree
        self.settings = settings
        self.clock = clock
        self._load_secret = secret
        self._secret: tuple[bytes, ...] = ()
        self._secret_loaded = False
        # the log, opened at its first line: its imports and file checks are not the first
        # callback's to wait on
        self._open_log = log
        self._log: Logger | None = None
        self._log_lock = threading.Lock()  # warnings come from the store thread too
        self.on_event = on_event or (lambda kind, data: None)
        self._watched = on_event is not None  # a slot's count is read only for a watcher
        self._done: list[str] = []  # ``run ID…``'s recorded jobs: their envelopes go
        self._noted = False  # this runner's host noted in the store (``_note_runner``)

    # -- public -------------------------------------------------------------------------
    def run_slot(self, slot: datetime, opts: RunOptions | None = None) -> SlotSummary:
        opts = opts or RunOptions()
        now = self.clock.now()
        sid = slot_id(slot)
        if slot > now:
            raise InvalidInput(f"slot {sid} is in the future (now is {iso(now)}); "
                               "a slot runs once its boundary has passed")
        summary = SlotSummary(slot=sid, dry_run=opts.dry_run)
        if opts.dry_run:
            return self._dry_run(slot, now, summary, opts)
        self.secret()  # an unreadable secret stops the run here, before anything is claimed
        self._note_runner(now)
        _run_async(self._slot(slot, opts, summary))
        self.tree.purge_retired()
        return summary

    def _note_runner(self, now: datetime) -> None:
        """Hosts sharing a PostgreSQL store say, once per runner, which kinds they claim and
        that they run (doctor finds the jobs no live runner may claim)."""
        if not self.tree.keeps_files and not self._noted:
            kinds = self.settings.runner_kinds
            self.store.note_runner(socket.gethostname(), os.getpid(), kinds, now)
            self._noted = True

    def secret(self) -> tuple[bytes, ...]:
        """The signing secrets (none: unsigned), loaded (and validated) once per runner."""
        if not self._secret_loaded:
            self._secret = self._load_secret()
            self._secret_loaded = True
        return self._secret

    def catchup(self, *, until: datetime | None = None, opts: RunOptions | None = None,
                on_slot: Callable[[datetime, int], None] | None = None) -> CatchupSummary:
        """Every past slot holding work, oldest first, then the current slot."""
        current = current_slot(self.clock.now(), self.settings.resolution)
        limit = min(until, current) if until is not None else current
        return self._run_slots(self._work_until(limit), opts or RunOptions(), on_slot)

    def run_late(self, slot: datetime, opts: RunOptions | None = None) -> list[SlotSummary]:
        """After cron's run of ``slot``: the slots before it still holding work (missed while
        the machine slept or was off), oldest first, each under its own lock as ``catchup``
        runs them. Bounded: slots up to ``batch_size`` jobs in all (the oldest one whole,
        whatever its size); the rest is the next run's, or the hourly catch-up's. Run after
        ``slot``, never before: the slot due now waits for no late work."""
        picked = late_work(self._work_until(slot - timedelta(minutes=self.settings.resolution)),
                           self.settings.batch_size)
        if not picked:  # nearly every run: one indexed look, nothing late
            return []
        return self._run_slots(picked, opts or RunOptions(), None).slots

    def _work_until(self, limit: datetime) -> dict[datetime, int]:
        """Slots up to ``limit`` holding jobs (their counts), and those of the slot tree (an
        envelope dropped in without a row yet)."""
        counts = dict(self.store.slots_with_work(until=limit))
        for slot in self.tree.slots():
            if slot <= limit:
                counts.setdefault(slot, 0)
        return counts

    def _run_slots(self, counts: dict[datetime, int], opts: RunOptions,
                   on_slot: Callable[[datetime, int], None] | None) -> CatchupSummary:
        """``counts``' slots, oldest first, on one event loop (see ``CatchUp.run``)."""
        now = self.clock.now()
        out = CatchupSummary(dry_run=opts.dry_run)
        started = monotonic()
        self.on_event("catchup_start", {"slots": len(counts), "jobs": sum(counts.values())})

        def announce(slot: datetime) -> None:
            if on_slot:
                on_slot(slot, counts[slot])

        if opts.dry_run or not counts:
            for slot in sorted(counts):
                announce(slot)
                out.slots.append(self.run_slot(slot, opts))
            out.seconds = monotonic() - started
            return out
        # One event loop, one store process, one set of executors for all the slots (``CatchUp``)
        mode = self.settings.store_process
        if mode == "auto" and sum(counts.values()) >= self.settings.batch_size and \
                pays(self.store):
            mode = "on"
        self.secret()  # an unreadable secret stops the catch-up before anything is claimed
        self._note_runner(now)
        try:
            with _loop_runner() as loop:
                catch_up = CatchUp(self.store, self.settings, loop.get_loop(), mode, self._slot)
                try:
                    loop.run(catch_up.run(sorted(counts), opts, out, announce))
                finally:
                    loop.run(catch_up.aclose())
        finally:
            self.tree.purge_retired()
        out.seconds = monotonic() - started
        return out

    async def _slot(self, slot: datetime, opts: RunOptions, summary: SlotSummary,
                    opened: OpenSlot | None = None) -> None:
        """One slot's run under its lock and owner session, then its tree settled (``opened``:
        a catch-up's slot)."""
        sid = summary.slot
        lock = self.store.slot_lock(slot, opts.shard)
        if not lock.acquire():
            summary.busy = lock.holder()
            self.on_event("busy", {"slot": sid, "holder": summary.busy})
            return
        started = monotonic()
        done: list[str] = []  # the recorded jobs: their envelopes in this slot go
        try:
            if self._watched:  # ~10 ms at 100,000 jobs, before the first callback
                self.on_event("slot_start", {"slot": sid, "total": self.store.count(slot=slot)})
            owner = new_owner()
            try:
                with self.store.owner_session(owner):
                    await self._drive(slot, opts, summary, owner, done, opened)
            finally:
                self._settle_tree(slot, summary, done)
        finally:
            summary.seconds = monotonic() - started
            lock.release()
        self._log_slot(summary)
        self.on_event("slot_end", summary.to_dict())

    # -- awty run ID… -----------------------------------------------------------------------
    def run_ids(self, ids: list[str]) -> RunSummary:
        """Fire these jobs now, whatever their slot, as their slot's run would: same signing,
        guards, decisions, history, leases and owner session (``IdsRun``). No slot lock: it
        only keeps two runners off one slot's claim queue; what stops a job being sent twice
        is its lease, which ``claim_ids`` honours on the same terms as a slot's ``claim`` (a
        job a live runner holds is refused here, and a job held here is skipped by the slot
        run). The jobs may sit in several slots, so no slot is reconciled; their envelopes
        follow the store as a slot run's do. Returns a ``RunSummary``."""
        from .idsrun import IdsRun

        summary = RunSummary(slot="now")
        self.secret()  # an unreadable secret stops the run here, before anything is claimed
        opts = RunOptions(misfire=MisfirePolicy.FIRE)  # asked for by hand: late is fine
        executors: dict[Kind, Any] = {}
        owner = new_owner()
        claimed: dict[str, datetime] = {}  # id -> the slot it was claimed from

        async def drive() -> None:
            run = IdsRun(
                ids, clock=self.clock, settings=self.settings, owner=owner, summary=summary,
                # a few named jobs: their own store, no store process
                store=RunStoreCalls(self.store, "off", self.settings.batch_size,
                               asyncio.get_running_loop()),
                slot=current_slot(self.clock.now(), self.settings.resolution),
                # slot None: the job's own slot, what the receiver, AWTY_SLOT and history call it
                execute=Executing(self.settings, self.clock, None, opts, executors,
                                  self._new_executor),
                recorded=lambda applied: self._recorded_ids(applied, summary),
                on_job=self._on_job(None))
            try:
                await run.run()
            finally:
                claimed.update(run.claimed_slots)
                await close_all(executors)

        started = monotonic()
        try:
            with self.store.owner_session(owner):
                _run_async(drive())
        finally:
            summary.seconds = monotonic() - started
            self._settle_ids(claimed, summary)
        self._log_slot(summary)
        return summary

    def _recorded_ids(self, applied: list[Decision], summary: RunSummary) -> None:
        self._apply_files(applied, summary, self._done)
        from .idsrun import report

        report(applied, summary)

    def _settle_ids(self, slots: dict[str, datetime], summary: SlotSummary) -> None:
        """The recorded jobs' envelopes leave the slots they were in, unless the job was
        re-slotted into that same slot (due in the next slot, re-checked into it): there the
        file is already the new envelope."""
        done, self._done = self._done, []
        # no files (PostgreSQL): no need to ask the store where the jobs went
        if not done or not self.tree.keeps_files:
            return
        try:
            where = self.store.find(done)
        except AwtyError:
            return  # the files stay as orphans: the next run of their slot removes them
        by_slot: dict[datetime, list[str]] = {}
        for job_id in done:
            if job_id in slots and where.get(job_id) != slots[job_id]:
                by_slot.setdefault(slots[job_id], []).append(job_id)
        trouble: list[OSError] = []
        for slot, job_ids in by_slot.items():
            trouble += self.tree.settle(slot, job_ids).trouble
        self._warn_tree(trouble, summary)

    def _dry_run(self, slot: datetime, now: datetime, summary: SlotSummary,
                 opts: RunOptions) -> SlotSummary:
        jobs = [j for j in self.store.list(slot=slot)
                if j.status.value == "pending" or (j.lease_until and j.lease_until <= now)]
        if opts.shard:
            jobs = [j for j in jobs if shard_of(j.id, opts.shard[1]) == opts.shard[0]]
        summary.ran = len(jobs)
        dropped: set[str] = set()
        if any(j.schedule for j in jobs):
            from ..store.schedrules import dry_run

            counts, dropped = dry_run(self.store, jobs, now)
            for key, n in counts.items():
                summary.count(key, n)
        for j in jobs:
            if j.id in dropped:  # the claim would end it as skipped, never firing it
                continue
            late = misfired(j, now, self.settings, opts.misfire_grace, opts.misfire)
            summary.count("misfired" if late else "would_fire")
        names = self.tree.names(slot)  # none: no drop-in, and no need to read the rows
        if names:
            summary.imported = len(self.tree.strangers(slot, self.store.slot_ids(slot), names))
        return summary

    # -- executing ------------------------------------------------------------------------
    async def _drive(self, slot: datetime, opts: RunOptions, summary: SlotSummary,
                     owner: str, done: list[str], opened: OpenSlot | None) -> None:
        catch_up = opened.catch_up if opened is not None else None
        executors: dict[Kind, Any] = catch_up.executors if catch_up is not None else {}
        prepare = None
        tree = self.tree
        # drop-ins only where there are files; one reconciler per slot (shard 0's)
        if isinstance(tree, SlotTree) and (opts.shard is None or opts.shard[0] == 0):
            def prepare(claimed: set[str]) -> list[str]:
                return Reconciler(self.store, tree, self.settings, self.clock, self._warn).run(
                    slot, summary, claimed)
        if catch_up is not None:  # a catch-up's slot: the store calls of every slot
            store = catch_up.store
        else:
            store = RunStoreCalls(self.store, self.settings.store_process, self.settings.batch_size,
                             asyncio.get_running_loop())
        run = SlotRun(
            store=store, clock=self.clock, settings=self.settings, slot=slot, shard=opts.shard,
            owner=owner, summary=summary,
            execute=Executing(self.settings, self.clock, slot, opts, executors, self._new_executor),
            recorded=lambda applied: self._apply_files(applied, summary, done),
            on_job=self._on_job(summary.slot), prepare=prepare, warm=warm_http, gates=opened,
            signals=opened is None, backlog=catch_up.backlog if catch_up is not None else None)
        if opened is not None:
            opened.catch_up.enrol(opened, run)
        try:
            await run.run()
        finally:
            if catch_up is not None:
                catch_up.sending.discard(run)
            else:
                await close_all(executors)
                await store.aclose()

    def _on_job(self, sid: str | None) -> Callable[[str], None] | None:
        """What each executed job is reported to: nothing unless someone watches (a progress
        bar), so that an unwatched run builds no event per job. With its slot: a catch-up's
        next slot starts while the one before still reports its last jobs."""
        if not self._watched:
            return None
        return lambda job_id: self.on_event("job", {"id": job_id, "slot": sid})

    def _new_executor(self, kind: Kind) -> Executor:
        return executor_for(kind, self.settings, self.clock, self.secret(),
                            self.store.token_named)

    def _apply_files(self, applied: list[Decision], summary: SlotSummary,
                     done: list[str]) -> None:
        """The store has recorded these decisions: counted, and the tree follows
        (``SlotTree.apply``; the files left in this slot go when the run ends,
        ``_settle_tree``)."""
        for d in applied:
            job = d.job
            summary.ran += 1
            done.append(job.id)
            if isinstance(d, End):
                summary.count(d.outcome._value_)
                if d.outcome in (Outcome.FAILED,) or d.reason == "misfired":
                    self._warn(f"job {job.id} {d.outcome.value}: {d.reason}",
                               slot=summary.slot, job=job.id, outcome=d.outcome.value)
            else:
                assert isinstance(d, Reslot)
                if d.result is not None and d.result.deferred:
                    summary.deferred += 1
                    summary.ran -= 1
                elif d.result is not None and d.result.answer is Answer.RECHECK:
                    summary.rechecked += 1
                else:
                    summary.retried += 1
        self._warn_tree(self.tree.apply(applied), summary)

    def _settle_tree(self, slot: datetime, summary: SlotSummary, done: list[str]) -> None:
        """The run's recorded jobs leave the slot's files (``SlotTree.settle``): a slot the
        store holds no rows of any more is retired whole; one that still holds some (another
        shard's, a run cut short) loses only this run's files."""
        def rows_left() -> bool:
            try:
                return bool(self.store.slot_ids(slot))
            except AwtyError:
                return True

        settled = self.tree.settle(slot, done, rows_left=rows_left, ended=self._ended)
        if settled.kept:
            self._warn(f"slot {summary.slot}: {settled.kept} file(s) arrived during the run; "
                       "they wait in the slot for its next run")
        self._warn_tree(settled.trouble, summary)

    def _ended(self, ids: list[str]) -> set[str]:
        """Which of these ids have ended (known only to history)."""
        return {i for i, pending in self.store.find(ids).items() if pending is None}

    def _warn_tree(self, trouble: list[OSError], summary: SlotSummary) -> None:
        if trouble:
            self._warn(f"slot {summary.slot}: {len(trouble)} envelope change(s) not made "
                       f"({trouble[0].strerror or trouble[0]}); the database has them; "
                       "`awty doctor --repair` mends the slot tree")

    # -- logging --------------------------------------------------------------------------
    def _logger(self) -> Logger | None:
        with self._log_lock:
            if self._log is None and self._open_log is not None:
                self._log = self._open_log()
            return self._log

    def _warn(self, text: str, **fields: Any) -> None:
        """A warning line; ``fields`` (slot, job, outcome) are its JSON keys (``log_format``)."""
        log = self._logger()
        if log is not None:
            log.warning(text, extra={"awty": fields})

    def _log_slot(self, summary: SlotSummary) -> None:
        log = self._logger() if (summary.ran or summary.rejected or summary.deferred
                                 or summary.imported) else None
        if log is None:
            return
        outcomes = " ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
        log.info(f"slot {summary.slot}: ran {summary.ran} in {summary.seconds:.2f}s {outcomes} "
                 f"rechecked={summary.rechecked} retried={summary.retried} "
                 f"deferred={summary.deferred}",
                 extra={"awty": {"slot": summary.slot, "outcome": dict(summary.outcomes)}})


@contextmanager
def _loop_runner() -> Iterator[asyncio.Runner]:
    """A run's event loop, with the collector eased for its span (``gcpause.running``)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - platforms without uvloop
        loop = asyncio.Runner()
    else:
        loop = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with running(), loop:
        yield loop


def _run_async(coro: Coroutine[Any, Any, None]) -> None:
    with _loop_runner() as runner:
        runner.run(coro)

