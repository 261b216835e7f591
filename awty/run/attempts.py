"""Executing one job in a run: its misfire check, its attempts and the quick retries within the
run, an execution event per attempt, then the decision (``Executing``, per run; ``_Attempts``,
per job); the executors a run makes, one a kind (``executor_for``), and the options of a run
(``RunOptions``). Given settings, a clock and an executor factory: nothing here knows the
runner."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from functools import partial
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..config import Settings
from ..executors.base import Answered, submit
from ..model import (
    Answer, Attempt, End, Execution, Job, Kind, MisfirePolicy, Outcome, Result, millis,
)
from ..policy import decide, misfired, quick_retry_delay, settled
from ..record import Record, _draft, _seal
from ..slots import slot_id
from .slotrun import Done

if TYPE_CHECKING:
    from ..executors.base import Executor
    from ..model import ApiToken


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


class Executing:
    """How a run executes one job: misfire check, attempts (a quick retry or two within the
    run), an execution event per attempt, then the decision, reported to ``done`` (see
    ``slotrun.Execute``). What is the same for every job of the run is worked out once, here:
    this runs once per callback, in callbacks of the loop (no task per job)."""

    __slots__ = ("settings", "clock", "slot", "sid", "opts", "skip", "executors", "new_executor",
                 "sends", "loop", "host", "pid")

    def __init__(self, settings: Settings, clock: Clock, slot: datetime | None,
                 opts: RunOptions, executors: dict[Kind, Any],
                 new_executor: Callable[[Kind], Executor]):
        self.settings = settings
        self.clock = clock
        self.slot = slot  # None: each job's own slot (``awty run ID``)
        self.sid = slot_id(slot) if slot is not None else None
        self.opts = opts
        self.skip = (opts.misfire or self.settings.misfire) == MisfirePolicy.SKIP
        # the run's executors, one a kind, made by ``new_executor`` at the first job of its kind
        # (a catch-up's slots share them)
        self.executors = executors
        self.new_executor = new_executor
        # how an attempt of a kind starts: the executor's own ``submit`` (http), looked up once
        self.sends: dict[Kind, Callable[[Job, Attempt, Answered], None]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        # who fires: on every execution recorded (as in the run's owner id, ``ids.new_owner``)
        self.host, self.pid = socket.gethostname(), os.getpid()

    def __call__(self, job: Job, events: list[Execution], done: Done) -> None:
        loop = self.loop
        if loop is None:
            loop = self.loop = asyncio.get_running_loop()
        try:
            s = self.settings
            now = self.clock.now()
            lateness = (now - job.next_check_at).total_seconds()
            if self.skip and misfired(job, now, s, self.opts.misfire_grace, self.opts.misfire):
                loop.call_soon(done, job, End(job, Outcome.EXPIRED, "misfired", None, lateness))
                return
            send = self.sends.get(job.kind)
            if send is None:
                send = self._sender(job.kind)
            timeout = job.timeout if job.timeout is not None else s.timeout
            _Attempts(self, job, events, done, send, lateness,
                      self.sid or slot_id(job.next_check_at), timeout).go(now, lateness)
        except BaseException as e:  # a bug: the run stops, the job is left to its lease
            loop.call_soon(done, job, e)

    def _sender(self, kind: Kind) -> Callable[[Job, Attempt, Answered], None]:
        executor = self.executors.get(kind)
        if executor is None:
            executor = self.executors[kind] = self.new_executor(kind)
        send = self.sends[kind] = getattr(executor, "submit", None) or partial(submit, executor)
        return send


class _Attempts:
    """One job's attempts in one run (the first, and quick retries)."""

    __slots__ = ("executing", "job", "first", "events", "done", "send", "lateness", "sid",
                 "timeout", "started", "late", "attempt")

    def __init__(self, x: Executing, job: Job, events: list[Execution], done: Done,
                 send: Callable[[Job, Attempt, Answered], None], lateness: float, sid: str,
                 timeout: float):
        self.executing = x
        self.job = self.first = job
        self.events = events
        self.done = done
        self.send = send
        self.lateness = lateness
        self.sid = sid
        self.timeout = timeout

    def go(self, started: datetime, late: float) -> None:
        """Send the next attempt, started at ``started``, ``late`` seconds after the slot."""
        job = self.job
        self.started = started
        self.late = late
        self.attempt = attempt = Attempt(self.sid, job.check_count + 1, job.attempt + 1,
                                         self.timeout)
        self.send(job, attempt, self.answered)

    def again(self) -> None:
        try:
            now = self.executing.clock.now()
            self.go(now, (now - self.first.next_check_at).total_seconds())
        except BaseException as e:
            self.done(self.first, e)

    def answered(self, result: Result | BaseException) -> None:
        if isinstance(result, BaseException):  # the executor broke: the run stops
            self.done(self.first, result)
            return
        try:
            job, x = self.job, self.executing
            if not result.deferred:
                attempt, started = self.attempt, self.started
                self.events.append(Execution(
                    job.id, started, self.sid, attempt.check, attempt.attempt, result.answer,
                    result.status, millis(result.duration), millis(self.late),
                    (result.error or None) and result.error[:500], x.host, x.pid))
            if result.answer is Answer.RETRY:
                delay = quick_retry_delay(job, result, x.settings)
                if delay is not None:
                    self.job = job.replace(attempt=job.attempt + 1)
                    assert x.loop is not None
                    x.loop.call_later(delay, self.again)
                    return
            decision = (settled(job, result, self.lateness)
                        or decide(job, result, x.clock.now(), x.settings, self.lateness))
        except BaseException as e:  # a bug: the run stops, the job is left to its lease
            self.done(self.first, e)
            return
        self.done(self.first, decision)


async def close_all(executors: dict[Kind, Any]) -> None:
    for ex in executors.values():
        await ex.close()



def warm_http() -> None:
    """Load the http executor before the first send: most slots are callbacks. It runs before
    the first claim reaches the store thread (the claim's task takes its first step once
    ``SlotRun.run`` awaits); handing the claim over first, to run beside this import, gained
    nothing: both hold the GIL for most of their ~3-4 ms (interleaved timeline, 15 pairs:
    slot run made -> first chunk started 8.3 ms as is, 9.1 with the claim first)."""
    from ..executors import http  # noqa: F401



def executor_for(kind: Kind, settings: Settings, clock: Clock,
                 secret: tuple[bytes, ...],
                 tokens: Callable[[str], ApiToken | None] | None = None) -> Executor:
    """A new executor of ``kind``; each is imported only once a job of its kind runs.
    ``tokens`` (``Store.token_named``): where exec and python jobs added over HTTP find their
    token's environment."""
    if kind is Kind.HTTP:
        from ..executors.http import HttpExecutor

        return HttpExecutor(settings, clock, secret)
    if kind is Kind.EXEC:
        from ..executors.exec import ExecExecutor

        return ExecExecutor(settings, clock, tokens)
    from ..executors.python import PythonExecutor

    return PythonExecutor(settings, clock, tokens)

