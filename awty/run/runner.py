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
import signal
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..config import Settings
from ..errors import AwtyError, Interrupted, InvalidInput
from ..ids import new_owner, shard_of
from ..model import (
    Answer,
    Attempt,
    Decision,
    End,
    Execution,
    Job,
    Kind,
    MisfirePolicy,
    Outcome,
    Reslot,
    Result,
    RunSummary,
    SlotSummary,
)
from ..policy import decide, misfired, quick_retry_delay
from ..record import Record, _draft, _seal
from ..slotdir import SlotTree
from ..executors.base import submit
from ..slots import current_slot, iso, slot_id
from ..store.base import Store
from .reconcile import Reconciler
from .slotrun import Backlog, Done, SlotRun, catch_stop_signals
from .storeproc import RunStore

if TYPE_CHECKING:
    from logging import Logger

    from ..executors.base import Executor

OnEvent = Callable[[str, dict[str, Any]], None]


class RunOptions(Record):
    __slots__ = ("shard", "dry_run", "misfire", "misfire_grace")
    shard: tuple[int, int] | None  # (index, count), 0-based index
    dry_run: bool
    misfire: MisfirePolicy | None  # overrides settings.misfire
    misfire_grace: float | None

    def __new__(cls, shard: tuple[int, int] | None = None, dry_run: bool = False,
                misfire: MisfirePolicy | None = None,
                misfire_grace: float | None = None) -> RunOptions:
        s = _draft(cls)
        s.shard = shard
        s.dry_run = dry_run
        s.misfire = misfire
        s.misfire_grace = misfire_grace
        return _seal(s, cls)


class CatchupSummary:
    def __init__(self, slots: list[SlotSummary] | None = None, seconds: float = 0.0,
                 dry_run: bool = False) -> None:
        self.slots: list[SlotSummary] = [] if slots is None else slots
        self.seconds = seconds
        self.dry_run = dry_run

    def to_dict(self) -> dict[str, Any]:
        totals: dict[str, int] = {}
        for s in self.slots:
            for k, v in s.outcomes.items():
                totals[k] = totals.get(k, 0) + v
        return {"slots": [s.to_dict() for s in self.slots], "ran": sum(s.ran for s in self.slots),
                "outcomes": totals, "seconds": round(self.seconds, 3), "dry_run": self.dry_run}


class Runner:
    def __init__(self, *, store: Store, tree: SlotTree | None, settings: Settings, clock: Clock,
                 secret: Callable[[], tuple[bytes, ...]] = tuple,
                 log: Callable[[], Logger] | None = None,
                 on_event: OnEvent | None = None):
        self.store = store
        # None: no slot tree (PostgreSQL, shared by hosts): no drop-ins to reconcile, no files
        # to keep in step. The only thing the runner knows of which store it has.
        self.tree = tree
        self.s = settings
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
        # A catch-up runs its slots on one event loop, one RunStore, one set of executors and
        # one backlog of unwritten results (see ``catchup``); the runs sending now, which its
        # SIGTERM/SIGINT handler, or an error in a slot before theirs, stops.
        self._shared: RunStore | None = None
        self._shared_executors: dict[Kind, Any] | None = None
        self._backlog: Backlog | None = None
        self._sending: set[SlotRun] = set()
        self._stopped_by: int | None = None
        self._failed: datetime | None = None  # the first slot of a catch-up that raised
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
        if self.tree is not None:
            self.tree.purge_retired()
        return summary

    def _note_runner(self, now: datetime) -> None:
        """Hosts sharing a PostgreSQL store say, once per runner, which kinds they claim and
        that they run (doctor finds the jobs no live runner may claim)."""
        if self.tree is None and not self._noted:
            self.store.note_runner(socket.gethostname(), os.getpid(), self.s.runner_kinds, now)
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
        current = current_slot(self.clock.now(), self.s.resolution)
        limit = min(until, current) if until is not None else current
        return self._run_slots(self._work_until(limit), opts or RunOptions(), on_slot)

    def run_late(self, slot: datetime, opts: RunOptions | None = None) -> list[SlotSummary]:
        """After cron's run of ``slot``: the slots before it still holding work (missed while
        the machine slept or was off), oldest first, each under its own lock as ``catchup``
        runs them. Bounded: slots up to ``batch_size`` jobs in all (the oldest one whole,
        whatever its size); the rest is the next run's, or the hourly catch-up's. Run after
        ``slot``, never before: the slot due now waits for no late work."""
        counts = self._work_until(slot - timedelta(minutes=self.s.resolution))
        picked: dict[datetime, int] = {}
        jobs = 0
        for late in sorted(counts):
            if picked and jobs + counts[late] > self.s.batch_size:
                break
            picked[late] = counts[late]
            jobs += counts[late]
        if not picked:  # nearly every run: one indexed look, nothing late
            return []
        return self._run_slots(picked, opts or RunOptions(), None).slots

    def _work_until(self, limit: datetime) -> dict[datetime, int]:
        """Slots up to ``limit`` holding jobs (their counts), and those of the slot tree (an
        envelope dropped in without a row yet)."""
        counts = dict(self.store.slots_with_work(until=limit))
        for slot in self.tree.slots() if self.tree is not None else ():
            if slot <= limit:
                counts.setdefault(slot, 0)
        return counts

    def _run_slots(self, counts: dict[datetime, int], opts: RunOptions,
                   on_slot: Callable[[datetime, int], None] | None) -> CatchupSummary:
        """``counts``' slots, oldest first, on one event loop (see ``_catch_up``)."""
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
        # The slots share one event loop and one store process: started per slot, a store
        # process never paid for itself in slots of a batch or less (its claims never come back
        # full), so 96 missed slots of 1,000 ran on one core where one slot of 96,000 used two.
        # And one set of executors: a slot's first requests go out on the connections the slot
        # before it left open (opening them took ~5 ms a slot). One slot sends at a time, so
        # the per-host cap still holds; each slot starts with closed breakers (``new_run``).
        mode = self.s.store_process
        if mode == "auto" and sum(counts.values()) >= self.s.batch_size:
            mode = "on"
        self.secret()  # an unreadable secret stops the catch-up before anything is claimed
        self._note_runner(now)
        try:
            with _loop_runner() as loop:
                self._shared = RunStore(self.store, mode, self.s.batch_size, loop.get_loop())
                self._shared_executors = {}
                self._backlog = Backlog(self.s.batch_size)
                try:
                    loop.run(self._catch_up(sorted(counts), opts, out, announce))
                finally:
                    loop.run(_close_all(self._shared_executors))
                    loop.run(self._shared.aclose())
        finally:
            self._shared, self._shared_executors, self._backlog = None, None, None
            self._sending.clear()
            if self.tree is not None:
                self.tree.purge_retired()
        out.seconds = monotonic() - started
        return out

    async def _catch_up(self, slots: list[datetime], opts: RunOptions, out: CatchupSummary,
                        announce: Callable[[datetime], None]) -> None:
        """The slots in order, each under its own lock and owner session, overlapped: once a
        slot's claim comes back empty, the next one is opened and claims a batch; it starts its
        first chunk once the slot before has started its last, and sends once that one has
        nothing left to send (one slot sends at a time), while that one's last results are
        written and its directory retired. Run one after the other, a slot of 1,000 spent ~9 ms
        between its last answer and the next slot's first request, a store busy with results
        the wire had outrun. At most three slots are open: one ending, one sending, one
        claiming; their unwritten results count against one backlog (two batches). SIGTERM/SIGINT
        stop the open slots and open no other; an error in one slot stops the slots after it at
        once (without ``Interrupted``: their unsent claims are given back), the slots before it
        finish, and the error is raised once they are over."""
        loop = asyncio.get_running_loop()
        self._stopped_by, self._failed = None, None
        caught = catch_stop_signals(loop, self._stop_catch_up)
        ending: list[_Opened] = []  # nothing left to send; in slot order
        prev: _Opened | None = None
        cur: _Opened | None = None
        try:
            for slot in slots:
                if self._stopped_by is not None or self._failed is not None:
                    break
                announce(slot)
                cur = _Opened(loop, slot_id(slot), gated=prev is not None)
                cur.task = asyncio.ensure_future(self._slot(slot, opts, cur.summary, cur))
                cur.task.add_done_callback(partial(self._slot_ended, slot))
                if prev is not None:
                    await prev.until(prev.all_started)
                    if self._failed is not None:
                        break
                    _set(cur.start_gate)
                    await prev.until(prev.sent)
                    if self._failed is not None:
                        break
                    for ex in (self._shared_executors or {}).values():
                        ex.new_run()  # each slot starts afresh: breakers closed, names resolved
                    _set(cur.send_gate)
                    ending.append(prev)
                    prev = None
                    while len(ending) > 1:  # the newest is still writing its last results
                        await self._end_of(ending.pop(0), out)
                await cur.until(cur.claimed_all)
                prev, cur = cur, None
            ending += [o for o in (prev, cur) if o is not None]  # a failed slot's error goes up
            prev = cur = None
            while ending:
                await self._end_of(ending.pop(0), out)
        finally:
            opened = [o.task for o in (*ending, prev, cur) if o is not None]
            if left := [t for t in opened if not t.done()]:
                for run in list(self._sending):  # an error: what is open stops, its results
                    run.stop(None)  # recorded, before the error goes up
                await asyncio.wait(left)
            for t in opened:  # only the first slot's error goes up: the others' are taken
                if not t.cancelled():  # here (asyncio would print them as never retrieved)
                    t.exception()
            for sig in caught:
                loop.remove_signal_handler(sig)
        if self._stopped_by is not None:  # between two slots: no slot raised it
            raise Interrupted(self._stopped_by, (
                f"stopped by {signal.Signals(self._stopped_by).name}: catchup: "
                f"{len(out.slots)} slot(s) ran; the next catchup runs the rest"))

    @staticmethod
    async def _end_of(opened: _Opened, out: CatchupSummary) -> None:
        await opened.task
        out.slots.append(opened.summary)

    def _stop_catch_up(self, signum: int) -> None:
        if self._stopped_by is None:
            self._stopped_by = signum
        for run in list(self._sending):
            run.stop(signum)

    def _slot_ended(self, slot: datetime, task: asyncio.Future) -> None:
        """A catch-up's slot ended: if it raised, the slots after it stop now, not once the
        catch-up reaches its error in slot order (by then the next slot had sent in full)."""
        if task.cancelled():
            return
        error = task.exception()
        if error is None or isinstance(error, Interrupted):  # a signal stops every slot itself
            return
        if self._failed is None or slot < self._failed:
            self._failed = slot
        for run in list(self._sending):
            if run.slot > slot:
                run.stop(None)

    async def _slot(self, slot: datetime, opts: RunOptions, summary: SlotSummary,
                    opened: _Opened | None = None) -> None:
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
                ids, clock=self.clock, settings=self.s, owner=owner, summary=summary,
                # a few named jobs: their own store, no store process
                store=RunStore(self.store, "off", self.s.batch_size, asyncio.get_running_loop()),
                slot=current_slot(self.clock.now(), self.s.resolution),
                # slot None: the job's own slot, what the receiver, AWTY_SLOT and history call it
                execute=Executing(self, None, opts, executors),
                recorded=lambda applied: self._recorded_ids(applied, summary),
                on_job=self._on_job(None))
            try:
                await run.run()
            finally:
                claimed.update(run.claimed_slots)
                await _close_all(executors)

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

    def _settle_ids(self, slots: dict[str, datetime], summary: SlotSummary) -> None:
        """The recorded jobs' envelopes leave the slots they were in, unless the job was
        re-slotted into that same slot (due in the next slot, re-checked into it): there the
        file is already the new envelope."""
        done, self._done = self._done, []
        if not done or self.tree is None:  # no slot tree (PostgreSQL): nothing to follow
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
            trouble += self.tree.remove_many(job_ids, slot)
            self.tree.remove_slot_if_empty(slot)
        self._warn_tree(trouble, summary)

    def _dry_run(self, slot, now, summary, opts) -> SlotSummary:
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
            summary.count("misfired" if misfired(j, now, self.s, opts.misfire_grace, opts.misfire)
                          else "would_fire")
        if self.tree is not None:
            summary.imported = len(self.tree.strangers(slot, self.store.slot_ids(slot)))
        return summary

    # -- executing ------------------------------------------------------------------------
    async def _drive(self, slot: datetime, opts: RunOptions, summary: SlotSummary,
                     owner: str, done: list[str], opened: _Opened | None) -> None:
        shared = self._shared_executors
        executors: dict[Kind, Any] = shared if shared is not None else {}
        prepare = None
        tree = self.tree
        if tree is not None and (opts.shard is None or opts.shard[0] == 0):
            def prepare(claimed: set[str]) -> list[str]:
                return Reconciler(self.store, tree, self.s, self.clock, self._warn).run(
                    slot, summary, claimed)
        if self._shared is not None:  # a catch-up's slot: the store calls of every slot
            store = self._shared
        else:
            store = RunStore(self.store, self.s.store_process, self.s.batch_size,
                             asyncio.get_running_loop())
        hooks: dict[str, Any] = {}
        if opened is not None:
            def sent() -> None:
                self._sending.discard(run)
                _set(opened.sent)

            hooks = {"start_gate": opened.start_gate, "send_gate": opened.send_gate,
                     "on_claimed_all": lambda: _set(opened.claimed_all),
                     "on_all_started": lambda: _set(opened.all_started), "on_sent": sent}
        run = SlotRun(
            store=store, clock=self.clock, settings=self.s, slot=slot, shard=opts.shard,
            owner=owner, summary=summary,
            execute=Executing(self, slot, opts, executors),
            recorded=lambda applied: self._apply_files(applied, summary, done),
            on_job=self._on_job(summary.slot), prepare=prepare,
            warm=_warm_http, signals=opened is None, backlog=self._backlog, **hooks)
        if opened is not None:
            self._sending.add(run)  # what a signal stops, until it has nothing left to send
            if self._stopped_by is not None:  # a signal came while the slot was opened
                run.stop(self._stopped_by)
            elif self._failed is not None and slot > self._failed:  # so did an earlier error
                run.stop(None)
        try:
            await run.run()
        finally:
            self._sending.discard(run)
            if executors is not shared:
                await _close_all(executors)
            if store is not self._shared:
                await store.aclose()

    def _on_job(self, sid: str | None) -> Callable[[str], None] | None:
        """What each executed job is reported to: nothing unless someone watches (a progress
        bar), so that an unwatched run builds no event per job. With its slot: a catch-up's
        next slot starts while the one before still reports its last jobs."""
        if not self._watched:
            return None
        return lambda job_id: self.on_event("job", {"id": job_id, "slot": sid})

    def _executor(self, kind: Kind, executors: dict[Kind, Any]) -> Executor:
        ex: Executor
        if kind is Kind.HTTP:
            from ..executors.http import HttpExecutor

            ex = HttpExecutor(self.s, self.clock, self.secret())
        elif kind is Kind.EXEC:
            from ..executors.exec import ExecExecutor

            ex = ExecExecutor(self.s, self.clock)
        else:
            from ..executors.python import PythonExecutor

            ex = PythonExecutor(self.s, self.clock)
        executors[kind] = ex
        return ex

    def _apply_files(self, applied: list[Decision], summary: SlotSummary,
                     done: list[str]) -> None:
        """The store has recorded these decisions; the tree follows. A re-slotted job's new
        envelope is written now; the files left in this slot go when the run ends
        (``_settle_tree``). A file that cannot be written or removed (a full or read-only disk)
        undoes nothing: a pending row without an envelope still runs, an envelope without its
        row is an orphan, doctor --repair mends both."""
        trouble: list[OSError] = []
        for d in applied:
            job = d.job
            summary.ran += 1
            done.append(job.id)
            if isinstance(d, End):
                summary.count(d.outcome.value)
                if d.outcome in (Outcome.FAILED,) or d.reason == "misfired":
                    self._warn(f"job {job.id} {d.outcome.value}: {d.reason}",
                               slot=summary.slot, job=job.id, outcome=d.outcome.value)
            else:
                assert isinstance(d, Reslot)
                moved = job.replace(next_check_at=d.next_check_at, check_count=d.check_count,
                                attempt=d.attempt)
                if self.tree is not None:
                    _tree_op(trouble, self.tree.write, moved)
                if d.result is not None and d.result.deferred:
                    summary.deferred += 1
                    summary.ran -= 1
                elif d.result is not None and d.result.answer is Answer.RECHECK:
                    summary.rechecked += 1
                else:
                    summary.retried += 1
        self._warn_tree(trouble, summary)

    def _settle_tree(self, slot: datetime, summary: SlotSummary, done: list[str]) -> None:
        """Removing envelopes one by one is the costliest step of a run on a real disk (~70 µs
        a file on ext4 once written back, and every unlink takes the GIL back from the event
        loop). A slot whose rows are all gone is instead retired whole: one rename takes its
        directory out of the tree, and a detached ``rm`` deletes it once the run (or the whole
        catch-up) is over. A slot that still holds rows (another shard's, a run cut short)
        loses only this run's files, in parallel."""
        tree = self.tree
        if tree is None:
            return
        try:
            left = bool(self.store.slot_ids(slot))
        except AwtyError:
            left = True
        trouble: list[OSError] = []
        if not left and done:
            try:
                kept = tree.retire(slot, set(done), self._ended)
            except OSError as e:
                trouble.append(e)
            else:
                if kept:
                    self._warn(f"slot {summary.slot}: {kept} file(s) arrived during the run; "
                               "they wait in the slot for its next run")
                done = []
        if done:
            with ThreadPoolExecutor(8, thread_name_prefix="awty-unlink") as pool:
                for errors in pool.map(lambda ids: tree.remove_many(ids, slot),
                                       [done[i:i + 256] for i in range(0, len(done), 256)]):
                    trouble += errors
        self._warn_tree(trouble, summary)
        tree.remove_slot_if_empty(slot)

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


class _Opened:
    """A catch-up's slot under way: its task (``Runner._slot``), its summary, and the moments
    the catch-up waits for (a claim back empty, its last job started, nothing left to send) or
    gives (its gates: start, send)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sid: str, gated: bool):
        self.summary = SlotSummary(slot=sid)
        self.task: asyncio.Future  # set once the slot's coroutine is made with this
        self.claimed_all = loop.create_future()
        self.all_started = loop.create_future()
        self.sent = loop.create_future()
        self.start_gate = loop.create_future() if gated else None
        self.send_gate = loop.create_future() if gated else None

    async def until(self, moment: asyncio.Future) -> None:
        """Until ``moment`` or the slot's end (busy, failed, or over before it came)."""
        await asyncio.wait([moment, self.task], return_when=asyncio.FIRST_COMPLETED)


def _set(fut: asyncio.Future | None) -> None:
    if fut is not None and not fut.done():
        fut.set_result(None)


class Executing:
    """How a run executes one job: misfire check, attempts (a quick retry or two within the
    run), an execution event per attempt, then the decision, reported to ``done`` (see
    ``slotrun.Execute``). What is the same for every job of the run is worked out once, here:
    this runs once per callback, in callbacks of the loop (no task per job)."""

    __slots__ = ("runner", "s", "clock", "slot", "sid", "opts", "skip", "executors", "loop",
                 "host", "pid")

    def __init__(self, runner: Runner, slot: datetime | None, opts: RunOptions,
                 executors: dict[Kind, Any]):
        self.runner = runner
        self.s = runner.s
        self.clock = runner.clock
        self.slot = slot  # None: each job's own slot (``awty run ID``)
        self.sid = slot_id(slot) if slot is not None else None
        self.opts = opts
        self.skip = (opts.misfire or self.s.misfire) == MisfirePolicy.SKIP
        self.executors = executors
        self.loop: asyncio.AbstractEventLoop | None = None
        # who fires: on every execution recorded (as in the run's owner id, ``ids.new_owner``)
        self.host, self.pid = socket.gethostname(), os.getpid()

    def __call__(self, job: Job, events: list[Execution], done: Done) -> None:
        loop = self.loop
        if loop is None:
            loop = self.loop = asyncio.get_running_loop()
        try:
            s = self.s
            now = self.clock.now()
            lateness = (now - job.next_check_at).total_seconds()
            if self.skip and misfired(job, now, s, self.opts.misfire_grace, self.opts.misfire):
                loop.call_soon(done, job, End(job, Outcome.EXPIRED, "misfired", None, lateness))
                return
            executor = self.executors.get(job.kind) or self.runner._executor(job.kind,
                                                                             self.executors)
            timeout = job.timeout if job.timeout is not None else s.timeout
            _Attempts(self, job, events, done, executor, lateness,
                      self.sid or slot_id(job.next_check_at), timeout).go(now)
        except BaseException as e:  # a bug: the run stops, the job is left to its lease
            loop.call_soon(done, job, e)


class _Attempts:
    """One job's attempts in one run (the first, and quick retries)."""

    __slots__ = ("x", "job", "first", "events", "done", "executor", "lateness", "sid",
                 "timeout", "started", "attempt")

    def __init__(self, x: Executing, job: Job, events: list[Execution], done: Done,
                 executor: Any, lateness: float, sid: str, timeout: float):
        self.x = x
        self.job = self.first = job
        self.events = events
        self.done = done
        self.executor = executor
        self.lateness = lateness
        self.sid = sid
        self.timeout = timeout

    def go(self, started: datetime) -> None:
        job = self.job
        self.started = started
        self.attempt = attempt = Attempt(self.sid, job.check_count + 1, job.attempt + 1,
                                         self.timeout)
        submit(self.executor, job, attempt, self.answered)

    def again(self) -> None:
        try:
            self.go(self.x.clock.now())
        except BaseException as e:
            self.done(self.first, e)

    def answered(self, result: Result | BaseException) -> None:
        if isinstance(result, BaseException):  # the executor broke: the run stops
            self.done(self.first, result)
            return
        try:
            job, x = self.job, self.x
            if not result.deferred:
                attempt, started = self.attempt, self.started
                self.events.append(Execution(
                    job.id, started, self.sid, attempt.check, attempt.attempt, result.answer,
                    result.status, round(result.duration * 1000, 3),
                    round((started - job.next_check_at).total_seconds() * 1000, 3),
                    (result.error or None) and result.error[:500], x.host, x.pid))
            if result.answer is Answer.RETRY:
                delay = quick_retry_delay(job, result, x.s)
                if delay is not None:
                    self.job = job.replace(attempt=job.attempt + 1)
                    assert x.loop is not None
                    x.loop.call_later(delay, self.again)
                    return
            decision = decide(job, result, x.clock.now(), x.s, self.lateness)
        except BaseException as e:  # a bug: the run stops, the job is left to its lease
            self.done(self.first, e)
            return
        self.done(self.first, decision)


async def _close_all(executors: dict[Kind, Any]) -> None:
    for ex in executors.values():
        await ex.close()


def _tree_op(trouble: list[OSError], op: Callable[..., object], *args: object) -> None:
    try:
        op(*args)
    except OSError as e:
        trouble.append(e)


def _warm_http() -> None:
    """Load the http executor while the first claim runs on the store thread (SQLite leaves
    the GIL to us): most slots are callbacks, and its import would otherwise come after the
    claim, before the first send."""
    from ..executors import http  # noqa: F401


def _loop_runner() -> asyncio.Runner:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - platforms without uvloop
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def _run_async(coro) -> None:
    with _loop_runner() as runner:
        runner.run(coro)

