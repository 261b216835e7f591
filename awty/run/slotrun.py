"""One run of one slot's claims: claim -> start -> execute -> record.

Store calls are futures on the run's event loop (``RunStoreCalls.call``): claims and starts go
through one thread (``io``), results through another (``rec_io``), so a batch's write never
holds up the start of the next chunk; once a slot proves big (a claim comes back full, setting
``store_process``), the same calls go to a store process on the other core (run/storeproc.py)
and the threads only fall back to if it ends. Meanwhile the loop keeps callbacks in flight: the
next batch is claimed before the current one runs dry, the next chunk is marked started before
the current one is sent (a start covers ``START_LEAD`` seconds of sending at the run's rate so
far), and a batch's results are written while the next one is being sent. The first claim takes
one chunk, and the next batch's claim waits for a first answer (or for reconciling to be due): a
batch's rows become Jobs under the GIL, which the first chunk's connects would wait on.

The slot tree is reconciled (``prepare``: drop-ins imported, orphans removed) on a thread of
its own (``prep_io``, always the run's own store), queued once the first callback is answered
(or ``PREPARE_AFTER`` after the first chunk was started): the rest is sent while it runs. It
sees this run's claims as rows of the slot (their files are not orphans, whatever their rows
became since), and the slot counts as empty only once a claim made after it comes back empty,
so an imported drop-in still fires in this run (a shard's run claims the drop-ins it imported
for other shards by id: their runs may be over).

A claimed job is sent only after ``Store.start`` returned it, just before sending: a job
cancelled or rescheduled since its claim is not returned, and never sent (lazy cancel).

Decisions are written per batch, at least every ``FLUSH_EVERY`` seconds, and once nothing is
left to claim whenever no write is under way (``_tail``), so a SIGKILL sends again at most the
callbacks in flight plus about that much of deliveries; sending pauses while
two batches of decisions wait to be written (a store slower than the wire). SIGTERM and SIGINT
stop gracefully: no more claims or sends, the requests in flight finish (each bounded by its
timeout), every result is recorded, the unsent claims are given back, and ``Interrupted``
is raised (exit 143 / 130): a graceful stop sends nothing twice. A start refused because the
runner's session ended (``SessionLost``, PostgreSQL: others may now take its claims) stops the
run the same way at once, the started jobs not yet sent included, and raises it (exit 1).
"""

from __future__ import annotations

import asyncio
import math
import signal
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from time import monotonic
from typing import Any, Protocol

from ..clock import Clock
from ..config import Settings
from ..errors import Busy, Interrupted, SessionLost, Unstorable
from ..model import ALL_KINDS, Decision, Execution, Job, SlotSummary
from ..policy import unstorable
from .storeproc import RunStoreCalls

# execute(job, events, done): start executing ``job`` (its executions appended to ``events``);
# done(job, outcome) comes once, from a callback of the loop, with its Decision, or with the
# exception that broke the runner (a bug: the run stops, the job is left to its lease).
Done = Callable[[Job, "Decision | BaseException"], None]
Execute = Callable[[Job, list[Execution], Done], None]
FLUSH_EVERY = 0.25  # seconds: the longest a recorded-in-memory decision waits for its write
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
PREPARE_AFTER = 0.05  # seconds after the first chunk is started: reconcile at the latest then
START_LEAD = 0.1  # seconds of sending that a start covers, at the run's rate so far


def lease_seconds(s: Settings) -> float:
    """Long enough for a whole batch to be sent at the configured concurrency, with retries."""
    waves = math.ceil(s.batch_size / max(1, s.concurrency))
    return max(s.lease, s.timeout * (s.quick_retries + 1) * (waves + 1) + 60)


class Backlog:
    """Results sent and not yet written (buffered, or in a write under way), counted across
    the runs that share it: sending pauses at ``cap``. A catch-up's open slots share one, so
    that a slot that sends while the slots before it still write their last results keeps
    the bound of a lone run: a store slower than the wire never lets more than two batches of
    results wait, each one a callback a SIGKILL would send again."""

    __slots__ = ("unwritten", "cap", "runs")

    def __init__(self, batch_size: int):
        self.unwritten = 0
        self.cap = 2 * max(1, batch_size)
        self.runs: list[SlotRun] = []  # what a write's end may let send again

    def room(self) -> bool:
        return self.unwritten < self.cap

    def written(self, n: int, by: SlotRun) -> None:
        """``n`` of ``by``'s results are written (or will never be): the other runs may have
        paused at the cap on them."""
        self.unwritten -= n
        for run in self.runs:
            if run is not by:
                run._pump()


class Gates(Protocol):
    """A catch-up's hold on one of its slots' runs. A catch-up overlaps its slots: the next
    slot is opened once a claim of this one comes back empty (``on_claimed_all``) and claims;
    it starts its first chunk once this one has started its last (``on_all_started``: the
    catch-up then opens the next one's ``start_gate``), so that a job is started no sooner
    than in one slot's run (about START_LEAD seconds of sending ahead), and sends once this one
    has nothing left to send (``on_sent``; its last results may still be being written: the
    next one's ``send_gate``). A gate that is None never holds the run."""

    start_gate: asyncio.Future[None] | None
    send_gate: asyncio.Future[None] | None

    def on_claimed_all(self) -> None: ...

    def on_all_started(self) -> None: ...

    def on_sent(self) -> None: ...


class SlotRun:
    def __init__(self, *, store: RunStoreCalls, clock: Clock, settings: Settings, slot: datetime,
                 shard: tuple[int, int] | None, owner: str, summary: SlotSummary,
                 execute: Execute, recorded: Callable[[list[Decision]], None],
                 on_job: Callable[[str], None] | None = None,
                 prepare: Callable[[set[str]], list[str]] | None = None,
                 warm: Callable[[], None] | None = None, gates: Gates | None = None,
                 signals: bool = True, backlog: Backlog | None = None):
        self.store = store
        self.clock = clock
        self.settings = settings
        self.slot = slot
        self.shard = shard
        self.owner = owner
        self.summary = summary
        self.execute = execute
        self.recorded = recorded
        self.on_job = on_job
        self.prepare = prepare
        self.warm = warm  # start-up work for the loop while the first claim runs
        # ``gates``: a catch-up's hold on this run (None: a lone run, never held). Each of its
        # three moments is told once.
        # ``signals`` False: the caller takes SIGTERM and SIGINT and calls ``stop``.
        start_gate = gates.start_gate if gates is not None else None
        send_gate = gates.send_gate if gates is not None else None
        self.may_start = start_gate is None or start_gate.done()
        self.may_send = send_gate is None or send_gate.done()
        if start_gate is not None and not self.may_start:
            start_gate.add_done_callback(self._may_start)
        if send_gate is not None and not self.may_send:
            send_gate.add_done_callback(self._may_send)
        self.on_claimed_all = gates.on_claimed_all if gates is not None else None
        self.on_all_started = gates.on_all_started if gates is not None else None
        self.on_sent = gates.on_sent if gates is not None else None
        self.signals = signals
        self.preparing: asyncio.Future[Any] | None = None  # submitted once, then kept
        self.claimed: set[str] = set()  # every id this run claimed (on the store thread)
        self.adopt: list[str] = []  # drop-ins a shard imported, to claim whatever their shard
        self.claim_after_prepare = False  # the claim in flight began after ``prepare`` ended
        self.wait_prepare = False  # a claim came back empty: the next one waits for ``prepare``
        # The claim after the first is held back until a first callback is back (or reconciling
        # is due): a batch's claim holds the GIL for a while (its rows become Jobs), and the
        # first chunk's connects would wait on it. Not when the store process claims (a
        # catch-up's later slots): held, the slot's first chunk was sent ~15 ms before the
        # rest came.
        self.holding = True
        self.lease = lease_seconds(settings)
        self.low_water = max(settings.concurrency, settings.batch_size // 4)
        self.chunk = max(1, settings.concurrency)
        # Jobs are started (marked as being sent) a chunk at a time, one start under way at a
        # time: a wave (``concurrency``) at first, then about START_LEAD seconds of sending
        # (up to half a batch), so that a start waiting behind a batch's write in the store
        # does not let the jobs ready to send run out (128 at a time capped a run at ~11,000
        # callbacks/s here), while a slow run still starts no more than a wave ahead: a started
        # job is one that cancel reports as being delivered.
        self.start_size = self.chunk
        self.big_start = max(self.chunk, settings.batch_size // 2)
        self.executed = 0
        self.first_sent: float | None = None
        # The first claim takes one chunk: a batch's claim costs ~40 ms at 1,000 rows, all of
        # it before the first callback; the claims after it take whole batches.
        self.claim_limit = min(self.chunk, settings.batch_size)
        # ``runner_kinds``: the kinds this host claims (None: all, the claim filters nothing)
        self.kinds = None if set(settings.runner_kinds) >= ALL_KINDS else settings.runner_kinds
        self.queue: deque[Job] = deque()  # claimed, not started
        self.ready: deque[Job] = deque()  # started: on their way to the wire
        self.decisions: list[Decision] = []
        self.executions: list[Execution] = []
        self.writes: list[asyncio.Future[Any]] = []
        # Decisions not yet written (buffered or in a write under way), this run's; sending
        # pauses at two batches in the ``backlog`` (this run's, or a catch-up's open slots'): a
        # store slower than the wire (a busy disk, a loaded core) would otherwise let results
        # pile up in memory, each one a callback a SIGKILL would send again.
        self.unrecorded = 0
        self.backlog = backlog or Backlog(settings.batch_size)
        self.limit = max(1, settings.concurrency)  # jobs in flight at most
        self.inflight = 0
        self.pumping = False
        self.halted = False  # stopped (a signal) or broken: nothing more is sent
        self.finished: asyncio.Future[Any] | None = None
        self.claiming: asyncio.Future[Any] | None = None
        self.starting: asyncio.Future[Any] | None = None
        self.starting_jobs: list[Job] = []
        self.exhausted = False  # no more claims: the slot is empty or the store failed
        self.error: BaseException | None = None
        self.stopped_by: int | None = None  # the signal that asked for a graceful stop
        self.io = ThreadPoolExecutor(1, thread_name_prefix="awty-store")
        # Results are written on a thread of their own: a claim or a start never waits in line
        # behind a batch's write (the store decides what runs at once; the store process
        # answers starts and claims first).
        self.rec_io = ThreadPoolExecutor(1, thread_name_prefix="awty-record")
        # Reconciling a big slot (listing 100,000 files) takes half a second: on a thread of
        # its own, with a store connection of its own, so that no start waits behind it.
        self.prep_io = ThreadPoolExecutor(1, thread_name_prefix="awty-reconcile")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closing = False  # the run is over: nothing new goes to the threads

    # -- store calls (futures: the store process, or the store on a thread) --------------------
    async def _claim(self) -> list[Job]:
        now = self.clock.now()
        if self.adopt:
            ids, self.adopt = self.adopt, []
            adopted: list[Job] = await self.store.call(
                self.io, "claim_ids", ids, now=now, owner=self.owner,
                lease_until=now + timedelta(seconds=self.lease))
            if adopted:
                self.claimed.update([j.id for j in adopted])
                return adopted
        jobs: list[Job] = await self.store.call(
            self.io, "claim", self.slot, now=now, owner=self.owner,
            lease_until=now + timedelta(seconds=self.lease), limit=self.claim_limit,
            shard=self.shard, kinds=self.kinds)
        self.claim_limit = self.settings.batch_size
        if self.prepare is not None:
            self.claimed.update([j.id for j in jobs])
        return jobs

    def _prepare(self) -> None:
        assert self.prepare is not None
        imported = self.prepare(self.claimed)
        if self.shard is not None:
            # A shard's slot claims take its own shard's jobs only: the drop-ins it imported
            # for other shards, whose runs may be over already, it claims by id (leases keep
            # a still-running shard from sending them too). Left for them, they waited for the
            # slot's next run.
            self.adopt = list(imported or ())

    async def _start(self, jobs: list[Job]) -> list[Job]:
        kept = await self.store.call(self.io, "start", [j.id for j in jobs], owner=self.owner,
                                     now=self.clock.now())
        if len(kept) == len(jobs):  # all (``start`` returns a sub-list of the ids)
            return jobs
        self.summary.skipped_cancelled += len(jobs) - len(kept)
        kept = set(kept)
        return [j for j in jobs if j.id in kept]

    async def _finish(self, batch: list[Decision], executions: list[Execution],
                      give_up: float) -> list[Decision]:
        # These callbacks were sent: dropping their results over a briefly locked database
        # would send them all again once the leases expire. Keep trying (each try waits the
        # busy timeout) for half a lease; after that the leases decide.
        while True:
            try:
                applied: list[Decision] = await self.store.call(
                    self.rec_io, "finish", batch, owner=self.owner, now=self.clock.now(),
                    executions=executions)
                return applied
            except Busy:
                if monotonic() >= give_up:
                    raise

    async def _write(self, batch: list[Decision], executions: list[Execution],
                     give_up: float) -> list[Decision]:
        """``finish``, split on ``Unstorable`` down to the row the store refused: one job's
        answer (a NUL the database will not take…) never holds back its batch-mates' results,
        whose callbacks were sent, and that job ends failed saying why (``policy.unstorable``)
        rather than being re-sent each lease period."""
        try:
            return await self._finish(batch, executions, give_up)
        except Unstorable as e:
            if not batch:
                raise
            if len(batch) == 1:
                ended = unstorable(batch[0], str(e))
                return await self._finish([ended], [x.replace(error=None) for x in executions],
                                          give_up)
            half = batch[:len(batch) // 2]
            ids = {d.job.id for d in half}
            return (await self._write(half, [x for x in executions if x.job_id in ids], give_up)
                    + await self._write(batch[len(half):],
                                        [x for x in executions if x.job_id not in ids], give_up))

    async def _record(self, batch: list[Decision], executions: list[Execution]) -> None:
        try:
            applied = await self._write(batch, executions, monotonic() + self.lease / 2)
        finally:
            self.unrecorded -= len(batch)
            if self._tail():
                self.flush()
            self._pump()
            self.backlog.written(len(batch), self)
        assert self.loop is not None
        await self.loop.run_in_executor(self.rec_io, self.recorded, applied)

    def _tail(self) -> bool:
        """Nothing is left to claim, no write is under way and results wait: write them now.
        Kept for a whole batch, the last results of a slot were written after its last answer,
        in one transaction (~25 ms for 1,000 jobs), once per slot of a catch-up. Before the
        end (``finished``) only: ``run`` writes what is left itself."""
        return (self.exhausted and bool(self.decisions) and self.unrecorded == len(self.decisions)
                and self.finished is not None and not self.finished.done())

    # -- on the event loop --------------------------------------------------------------------
    def stop(self, signum: int | None = signal.SIGTERM) -> None:
        """Stop claiming and sending; what is in flight finishes and is recorded. ``signum``
        None: stopped for a reason of the caller's (no ``Interrupted``)."""
        if self.stopped_by is None:
            self.stopped_by = signum
        self._exhaust()
        self.halted = True
        self._pump()

    def _fail(self, error: BaseException | None) -> None:
        self._exhaust()
        self.error = self.error or error
        if isinstance(error, SessionLost):
            # Other runners now take this one for gone and may claim its jobs: what was
            # started and not yet sent stays unsent (given back at the end); only the
            # requests in flight finish, and are recorded.
            self.halted = True

    def _exhaust(self) -> None:
        """No more claims."""
        self.exhausted = True
        self._claimed_all()

    def _claimed_all(self) -> None:
        """A claim came back empty (the slot may still import drop-ins), or no more claims."""
        if self.on_claimed_all is not None:
            told, self.on_claimed_all = self.on_claimed_all, None
            told()

    def _may_start(self, _: asyncio.Future[Any]) -> None:
        self.may_start = True
        self._pump()

    def _may_send(self, _: asyncio.Future[Any]) -> None:
        self.may_send = True
        self._pump()

    def _kick_prepare(self) -> asyncio.Future[Any] | None:
        if self.preparing is None and self.prepare is not None and not self.closing:
            assert self.loop is not None
            self.preparing = self.loop.run_in_executor(self.prep_io, self._prepare)
            self.preparing.add_done_callback(self._prepared)
        return self.preparing

    def _prepared(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self._fail(None if fut.cancelled() else fut.exception())
        waited, self.wait_prepare = self.wait_prepare, False
        if waited:  # the claim that waited for it goes now, not once the jobs in hand are sent:
            self._kick_claim()  # its empty answer ends the claims (``on_claimed_all``)
        self._pump()

    def _kick_claim(self) -> asyncio.Future[Any] | None:
        if self.claiming is None and not self.exhausted:
            if self.wait_prepare:
                return None  # reconciling may import drop-ins: the slot is empty only after it
            prepared = self.preparing is not None and self.preparing.done()
            self.claim_after_prepare = self.prepare is None or prepared
            fut = asyncio.ensure_future(self._claim())
            fut.add_done_callback(self._claimed)
            self.claiming = fut
        return self.claiming

    def _claimed(self, fut: asyncio.Future[Any]) -> None:
        if self.claiming is not fut:
            return  # handed over already
        self.claiming = None
        if fut.cancelled() or fut.exception() is not None:
            self._fail(None if fut.cancelled() else fut.exception())
            self._pump()
            return
        jobs = fut.result()
        if not jobs:
            self._claimed_all()
            if self.claim_after_prepare:
                self._exhaust()
            elif (preparing := self._kick_prepare()) is not None and not preparing.done():
                self.wait_prepare = True  # the next claim, made once it ended, sees its drop-ins
        self.queue.extend(jobs)
        if jobs and not self.exhausted and len(self.ready) < self.start_size:
            self._kick_start()  # the next chunk is started while the one in hand is sent
        self._pump()

    def _kick_start(self) -> asyncio.Future[Any] | None:
        if self.starting is None and self.queue and self.error is None and self.may_start:
            if self.first_sent is not None and self.executed:
                rate = self.executed / max(1e-3, monotonic() - self.first_sent)
                self.start_size = max(self.chunk, min(self.big_start, int(rate * START_LEAD)))
            todo = [self.queue.popleft() for _ in range(min(self.start_size, len(self.queue)))]
            fut = asyncio.ensure_future(self._start(todo))
            fut.add_done_callback(self._started)
            self.starting, self.starting_jobs = fut, todo
            if len(self.queue) < self.low_water and (not self.holding
                                                     or self.store.offloaded):
                self._kick_claim()  # queued behind the start: the chunk in hand goes out first
        return self.starting

    def _started(self, fut: asyncio.Future[Any]) -> None:
        if self.starting is not fut:
            return
        self.starting = None
        if fut.cancelled() or fut.exception() is not None:
            self.queue.extendleft(reversed(self.starting_jobs))  # never sent: released at the end
            self._fail(None if fut.cancelled() else fut.exception())
            self._pump()
            return
        self.ready.extend(fut.result())
        if self.preparing is None and self.prepare is not None:
            # Reconcile once the first callback is back, or after PREPARE_AFTER: started
            # at once, its Python would hold the GIL while the first requests go out.
            assert self.loop is not None
            self.loop.call_later(PREPARE_AFTER, self._prepare_due)
        self._pump()

    def _release_hold(self) -> None:
        """Queue the claim held back since the start, ahead of reconciling: the sending goes
        on from it while the slot tree is reconciled."""
        self.holding = False
        if len(self.queue) < self.low_water:
            self._kick_claim()

    def _prepare_due(self) -> None:
        if self.holding:
            self._release_hold()
        self._kick_prepare()

    def flush(self) -> None:
        if self.decisions:
            self.writes.append(asyncio.ensure_future(
                self._record(self.decisions[:], self.executions[:])))
            self.decisions.clear()
            self.executions.clear()

    def _pump(self) -> None:
        """Start ready jobs while fewer than ``concurrency`` are in flight; when none are
        ready, start the next chunk or claim the next batch; notice the end of the run. Called
        after every change that can let a job start or the run end: no task waits per job."""
        if self.pumping or self.loop is None:
            return  # a job that ended at once, reported from inside this loop
        self.pumping = True
        try:
            ready = self.ready
            room = self.backlog.room
            while (ready and self.inflight < self.limit and not self.halted and self.may_send
                   and room()):
                job = ready.popleft()
                if len(ready) < self.start_size:
                    self._kick_start()  # the next chunk is started while this one is sent
                self.inflight += 1
                if self.first_sent is None:
                    self.first_sent = monotonic()
                self.execute(job, self.executions, self._done)
            if (not ready and not self.halted and self.inflight < self.limit
                    and room()):
                # room to send and nothing ready (a worker idle, in a runner with tasks); a
                # slot waiting to start claims a batch ahead, not the whole slot
                if self._kick_start() is None and (self.may_start
                                                   or len(self.queue) < self.low_water):
                    self._kick_claim()
        finally:
            self.pumping = False
        self._check_end()

    def _check_end(self) -> None:
        """The run is over when nothing is in flight and either it was halted, or nothing is
        left to send: no claim or start under way, nothing started and unsent, the slot empty
        (or a claim or start failed: what was not started then waits for the next run)."""
        if (self.on_all_started is not None and self.exhausted and not self.queue
                and self.starting is None and self.error is None):
            told, self.on_all_started = self.on_all_started, None
            told()
        if self.inflight or self.finished is None or self.finished.done():
            return
        if not self.halted:
            if self.ready or self.claiming is not None or self.starting is not None:
                return
            if not self.exhausted or (self.queue and self.error is None):
                return
        self.finished.set_result(None)

    def _done(self, job: Job, outcome: Decision | BaseException) -> None:
        """A job's execution ended (see ``Execute``)."""
        self.inflight -= 1
        self.executed += 1
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            if self.holding:
                self._release_hold()
            self.decisions.append(outcome)
            self.unrecorded += 1
            self.backlog.unwritten += 1
            if self.preparing is None:
                self._kick_prepare()
            if self.on_job is not None:
                self.on_job(job.id)
            if len(self.decisions) >= self.settings.batch_size or (self.exhausted
                                                                  and self._tail()):
                self.flush()
        except BaseException as e:  # the runner is broken: send nothing more, stop
            self._fail(e)
            self.halted = True
        self._pump()

    async def _flush_often(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            self.flush()

    def _sent(self) -> None:
        if self.on_sent is not None:
            told, self.on_sent = self.on_sent, None
            told()

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        caught = catch_stop_signals(self.loop, self.stop) if self.signals else []
        flusher = asyncio.ensure_future(self._flush_often())
        self.backlog.runs.append(self)
        try:
            self.finished = self.loop.create_future()
            self._kick_claim()
            if self.warm is not None:
                self.warm()
            self._pump()  # stopped before it ran (a catch-up's slot): nothing else would end it
            await self.finished
            flusher.cancel()
            self.flush()
            if (preparing := self._kick_prepare()) is not None:  # stopped or failed before
                self.writes.append(preparing)  # it was queued
            if self.error is None:  # failed, the run's end tells: the next slot is stopped then
                self._sent()
            failed = [r for r in await asyncio.gather(*self.writes, return_exceptions=True)
                      if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
            if self.error is not None and not isinstance(self.error, SessionLost):
                raise self.error  # a claim or start failed: what is left waits for the next run
        finally:
            flusher.cancel()
            for sig in caught:
                self.loop.remove_signal_handler(sig)
            self._exhaust()  # what is handed over below is given back, never started
            self.halted = True
            # a claim, start or write still under way finishes first
            under_way = [f for f in (self.claiming, self.starting, *self.writes)
                         if f is not None and not f.done()]
            if under_way:
                await asyncio.wait(under_way)
            self.backlog.runs.remove(self)
            self.backlog.written(self.unrecorded, self)  # never written (cancelled): not waiting
            self.unrecorded = 0
            self.closing = True
            self.io.shutdown(wait=True)
            self.rec_io.shutdown(wait=True)
            self.prep_io.shutdown(wait=True)
            for fut, handover in ((self.claiming, self._claimed), (self.starting, self._started)):
                if fut is not None and fut.done():
                    handover(fut)
            unsent = [j.id for j in (*self.ready, *self.queue)]
            if unsent:  # interrupted: hand the unsent claims back rather than wait on leases
                await self.store.call(None, "release", unsent, owner=self.owner,
                                      now=self.clock.now())
        if isinstance(self.error, SessionLost):
            raise SessionLost(
                f"{self.error}: slot {self.summary.slot}: {self.summary.ran} job(s) recorded, "
                f"{len(unsent)} unsent claim(s) given back; the next run sends them") from None
        if self.stopped_by is not None:
            name = signal.Signals(self.stopped_by).name
            raise Interrupted(self.stopped_by, (
                f"stopped by {name}: slot {self.summary.slot}: {self.summary.ran} job(s) "
                f"recorded, {len(unsent)} unsent claim(s) given back; the next run sends them"))


def catch_stop_signals(loop: asyncio.AbstractEventLoop,
                       stop: Callable[[int], None]) -> list[int]:
    """SIGTERM and SIGINT call ``stop(signum)`` on ``loop``; returns the signals caught (none
    off the main thread: signal handlers belong to it, and a library caller's loop may not)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    caught: list[int] = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, stop, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        caught.append(sig)
    return caught
