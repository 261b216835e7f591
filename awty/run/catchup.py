"""A catch-up: every past slot holding work, run in order on one event loop, overlapped.

What only a catch-up has lives here (``CatchUp``): the store calls, executors and backlog of
unwritten results its slots share, the runs sending now (what a signal, or an error in an
earlier slot, stops), and the gates that pace one slot's run behind the one before
(``OpenSlot``, a ``slotrun.Gates``). One slot's run itself is the runner's (``run_slot``)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import Any

from ..config import Settings
from ..errors import Interrupted
from ..model import Kind, SlotSummary
from ..slots import slot_id
from ..store.base import Store
from .attempts import RunOptions, close_all
from .slotrun import Backlog, SlotRun, catch_stop_signals
from .storeproc import RunStoreCalls


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


def late_work(counts: dict[datetime, int], batch_size: int) -> dict[datetime, int]:
    """Which late slots (``counts``: the jobs in each) a run-slot fires after its own
    (``Runner.run_late``): oldest first, up to ``batch_size`` jobs in all, the oldest one whole
    whatever its size; the rest is the next run's, or the hourly catch-up's."""
    picked: dict[datetime, int] = {}
    jobs = 0
    for late in sorted(counts):
        if picked and jobs + counts[late] > batch_size:
            break
        picked[late] = counts[late]
        jobs += counts[late]
    return picked


# run_slot(slot, opts, summary, opened): one slot's run under its lock and owner session, its
# SlotRun held by ``opened``'s gates and enrolled with ``opened.catch_up`` (``Runner._slot``).
RunSlot = Callable[[datetime, RunOptions, SlotSummary, "OpenSlot"], Awaitable[None]]


class CatchUp:
    """The slots share one event loop and one store process: started per slot, a store
    process never paid for itself in slots of a batch or less (its claims never come back
    full), so 96 missed slots of 1,000 ran on one core where one slot of 96,000 used two.
    And one set of executors: a slot's first requests go out on the connections the slot
    before it left open (opening them took ~5 ms a slot). One slot sends at a time, so the
    per-host cap still holds; each slot starts with closed breakers (``new_run``)."""

    def __init__(self, store: Store, settings: Settings, loop: asyncio.AbstractEventLoop,
                 mode: str, run_slot: RunSlot):
        self.store = RunStoreCalls(store, mode, settings.batch_size, loop)
        self.executors: dict[Kind, Any] = {}
        self.backlog = Backlog(settings.batch_size)
        self._run_slot = run_slot
        self.sending: set[SlotRun] = set()  # what a signal, or an earlier slot's error, stops
        self.stopped_by: int | None = None
        self.failed: datetime | None = None  # the first slot that raised

    async def aclose(self) -> None:
        await close_all(self.executors)
        await self.store.aclose()

    def enrol(self, opened: OpenSlot, run: SlotRun) -> None:
        """``opened``'s run, about to run: stopped by what stops the open slots, until it has
        nothing left to send (``OpenSlot.on_sent``) or ends."""
        opened.run = run
        self.sending.add(run)
        if self.stopped_by is not None:  # a signal came while the slot was opened
            run.stop(self.stopped_by)
        elif self.failed is not None and run.slot > self.failed:  # so did an earlier error
            run.stop(None)

    async def run(self, slots: list[datetime], opts: RunOptions, out: CatchupSummary,
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
        self.stopped_by, self.failed = None, None
        caught = catch_stop_signals(loop, self.stop)
        ending: list[OpenSlot] = []  # nothing left to send; in slot order
        prev: OpenSlot | None = None
        cur: OpenSlot | None = None
        try:
            for slot in slots:
                if self.stopped_by is not None or self.failed is not None:
                    break
                announce(slot)
                cur = OpenSlot(self, loop, slot, gated=prev is not None)
                cur.task = asyncio.ensure_future(self._run_slot(slot, opts, cur.summary, cur))
                cur.task.add_done_callback(partial(self._slot_ended, slot))
                if prev is not None:
                    await prev.until(prev.all_started)
                    if self.failed is not None:
                        break
                    _set(cur.start_gate)
                    await prev.until(prev.sent)
                    if self.failed is not None:
                        break
                    for ex in self.executors.values():
                        ex.new_run()  # each slot starts afresh: breakers closed, names resolved
                    _set(cur.send_gate)
                    ending.append(prev)
                    prev = None
                    while len(ending) > 1:  # the newest is still writing its last results
                        await _end_of(ending.pop(0), out)
                await cur.until(cur.claimed_all)
                prev, cur = cur, None
            ending += [o for o in (prev, cur) if o is not None]  # a failed slot's error goes up
            prev = cur = None
            while ending:
                await _end_of(ending.pop(0), out)
        finally:
            opened = [o.task for o in (*ending, prev, cur) if o is not None]
            if left := [t for t in opened if not t.done()]:
                for run in list(self.sending):  # an error: what is open stops, its results
                    run.stop(None)  # recorded, before the error goes up
                await asyncio.wait(left)
            for t in opened:  # only the first slot's error goes up: the others' are taken
                if not t.cancelled():  # here (asyncio would print them as never retrieved)
                    t.exception()
            for sig in caught:
                loop.remove_signal_handler(sig)
            self.sending.clear()
        if self.stopped_by is not None:  # between two slots: no slot raised it
            raise Interrupted(self.stopped_by, (
                f"stopped by {signal.Signals(self.stopped_by).name}: catchup: "
                f"{len(out.slots)} slot(s) ran; the next catchup runs the rest"))

    def stop(self, signum: int) -> None:
        """What SIGTERM/SIGINT do: the open slots stop, no other is opened."""
        if self.stopped_by is None:
            self.stopped_by = signum
        for run in list(self.sending):
            run.stop(signum)

    def _slot_ended(self, slot: datetime, task: asyncio.Future[None]) -> None:
        """A slot ended: if it raised, the slots after it stop now, not once the catch-up
        reaches its error in slot order (by then the next slot had sent in full)."""
        if task.cancelled():
            return
        error = task.exception()
        if error is None or isinstance(error, Interrupted):  # a signal stops every slot itself
            return
        if self.failed is None or slot < self.failed:
            self.failed = slot
        for run in list(self.sending):
            if run.slot > slot:
                run.stop(None)


async def _end_of(opened: OpenSlot, out: CatchupSummary) -> None:
    await opened.task
    out.slots.append(opened.summary)


class OpenSlot:
    """A catch-up's slot under way: its task (``run_slot``), its summary, and the moments the
    catch-up waits for (a claim back empty, its last job started, nothing left to send) or
    gives (its gates: start, send). Its run sees it as its ``slotrun.Gates``."""

    def __init__(self, catch_up: CatchUp, loop: asyncio.AbstractEventLoop, slot: datetime,
                 gated: bool):
        self.catch_up = catch_up
        self.summary = SlotSummary(slot=slot_id(slot))
        self.task: asyncio.Future[None]  # set once the slot's coroutine is made with this
        self.run: SlotRun | None = None  # once enrolled (``CatchUp.enrol``)
        self.claimed_all: asyncio.Future[None] = loop.create_future()
        self.all_started: asyncio.Future[None] = loop.create_future()
        self.sent: asyncio.Future[None] = loop.create_future()
        self.start_gate: asyncio.Future[None] | None = loop.create_future() if gated else None
        self.send_gate: asyncio.Future[None] | None = loop.create_future() if gated else None

    async def until(self, moment: asyncio.Future[None]) -> None:
        """Until ``moment`` or the slot's end (busy, failed, or over before it came)."""
        await asyncio.wait([moment, self.task], return_when=asyncio.FIRST_COMPLETED)

    # -- slotrun.Gates: what the run tells -------------------------------------------------
    def on_claimed_all(self) -> None:
        _set(self.claimed_all)

    def on_all_started(self) -> None:
        _set(self.all_started)

    def on_sent(self) -> None:
        if self.run is not None:
            self.catch_up.sending.discard(self.run)
        _set(self.sent)


def _set(fut: asyncio.Future[None] | None) -> None:
    if fut is not None and not fut.done():
        fut.set_result(None)
