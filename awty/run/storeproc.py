"""A store in a process of its own, for a slot run's hot calls: claim (by slot or by id), start,
finish, release.

In one process, the store's work shares the GIL with the event loop that sends: the two took
turns, and a run used one core of two. Here the store's Python and SQLite (or psycopg) work
runs in a child process on the other core (``storechild``: its side, and the wire); the run's
event loop only writes a request and reads the answer when its socket is readable, like any
other connection. The child opens the same store as the parent (``Store.spec``), so it keeps
every rule of the store contract: the rows are what decide.

Protocol: length-prefixed pickles over a socketpair (the child's end is its stdin; it inherits
no other descriptor, so no lock of the parent's). Each request carries a number its answer
repeats: a run has claims, starts and a batch's results under way at once, and the child
answers starts, then claims, before writing results (one store, one request at a time), so
that the jobs ready to send never wait in line behind a batch's write. Jobs and decisions
travel as plain tuples (the child keeps the Jobs it claimed and is sent only their ids back);
errors as the store's own AwtyError classes.

Lifetime: the child ignores SIGINT and SIGTERM (the runner's graceful stop still has results
to record through it) and ends when the parent says so or its socket closes: a parent that is
killed leaves a child that finishes the request in hand, then exits. A child that dies makes
every later call raise ``StoreGone``; the run's calls then go to the parent's own store
(``RunStoreCalls``), which the contract makes safe: finish applies only to jobs still leased by
the run, start marks are idempotent, and a claim the child made but never answered is a lease
that expires like any dead runner's.
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

from .. import errors
from ..errors import AwtyError, StoreError
from ..model import Decision, End, Job
from .storechild import _LEN, _execution_out, _result_out, _send, job_in

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor
    from typing import Any

    from ..store.base import Store
    from ..store.spec import StoreSpec


class StoreGone(StoreError):
    """The store process ended (or never came up): the caller goes on with its own store."""


# --- the parent's side ------------------------------------------------------------------------
class StoreProcess:
    """The parent's handle on a store process, on the run's event loop: a request is a future
    answered from the loop's own reading of the socket (no thread to wake, so no turn of the
    GIL to wait for between the answer and the job it lets go out)."""

    def __init__(self, spec: StoreSpec, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.up = False
        self.gone: str | None = None  # why the process cannot be used, once it cannot
        # the Jobs the process claimed, as it holds them: a decision about one of these very
        # Jobs travels as its id; about a Job changed since (a quick retry's attempt), whole
        self._mine: dict[str, Job] = {}
        self._waiting: dict[int, tuple[asyncio.Future[Any], Callable[[Any], Any]]] = {}
        self._next = 0
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._ended: asyncio.Future[None] = loop.create_future()
        self._proc: subprocess.Popen[bytes] | None = None
        parent, child = socket.socketpair()
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent.parent.parent)  # the awty it must run
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "awty.run.storechild"], stdin=child.fileno(),
                stdout=subprocess.DEVNULL, env=env, close_fds=True)
            _send(parent, spec)  # small: written whole before the socket turns non-blocking
        except OSError as e:
            self._lost(f"cannot start a store process: {e}")
            parent.close()
            return
        finally:
            child.close()
        parent.setblocking(False)
        # on ``loop`` whether or not it runs yet (a catch-up makes its store before its slots)
        self._connecting = loop.create_task(
            loop.connect_accepted_socket(lambda: _Channel(self), sock=parent))

    # -- the channel's events -------------------------------------------------------------
    def _received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 4:
            n = _LEN.unpack_from(buf)[0]
            if len(buf) < 4 + n:
                return
            message = pickle.loads(bytes(buf[4:4 + n]))
            del buf[:4 + n]
            if not self.up:
                if message[0] == "ready":
                    self.up = True
                else:
                    self._lost(f"store process could not open its store: {message[2]}")
                continue
            number, answer = message
            fut, decode = self._waiting.pop(number)
            if fut.done():
                continue
            if answer[0] == "ok":
                try:
                    fut.set_result(decode(answer[1]))
                except Exception as e:  # noqa: BLE001 - a bug in decoding: the caller's
                    fut.set_exception(e)
            else:
                kind = getattr(errors, answer[1], None)
                if isinstance(kind, type) and issubclass(kind, AwtyError):
                    fut.set_exception(kind(answer[2]))
                else:
                    fut.set_exception(StoreError(f"store process: {answer[2]}"))

    def _lost(self, why: str) -> None:
        if self.gone is None:
            self.gone = why
        self.up = False
        waiting, self._waiting = self._waiting, {}
        for fut, _ in waiting.values():
            if not fut.done():
                fut.set_exception(StoreGone(self.gone))
        if not self._ended.done():
            self._ended.set_result(None)

    # -- requests ------------------------------------------------------------------------
    def request(self, op: str, *args: Any, **kw: Any) -> asyncio.Future[Any]:
        """The store's ``op`` (claim, claim_ids, start, finish, release), answered by the
        process."""
        fut: asyncio.Future[Any] = self.loop.create_future()
        if self.gone is not None or self._transport is None:
            fut.set_exception(StoreGone(self.gone or "store process not up"))
            return fut
        decode: Callable[[Any], Any]
        if op in ("claim", "claim_ids"):
            owner, lease_until = kw["owner"], kw["lease_until"]
            body: tuple[Any, ...] = (op, args[0], kw["now"], owner, lease_until, kw.get("limit"),
                                     kw.get("shard"), kw.get("kinds"))

            def jobs_in(rows: list[tuple[Any, ...]]) -> list[Job]:
                jobs = [job_in(t, owner, lease_until) for t in rows]
                self._mine.update((j.id, j) for j in jobs)
                return jobs

            decode = jobs_in
        elif op == "finish":
            decisions: list[Decision] = args[0]
            body = (op, self._decisions_out(decisions), kw["owner"], kw["now"],
                    [_execution_out(e) for e in kw.get("executions", ())])

            def applied_in(ids: list[str] | None) -> list[Decision]:
                if ids is None:  # all (``storechild._handle``)
                    return decisions
                applied = set(ids)
                return [d for d in decisions if d.job.id in applied]

            decode = applied_in
        elif op in ("start", "release"):
            ids: list[str] = args[0]
            body = (op, ids, kw["owner"], kw["now"])
            if op == "release":
                for i in ids:
                    self._mine.pop(i, None)
                decode = _same
            else:
                def kept_in(kept: list[str] | None) -> list[str]:
                    return ids if kept is None else kept  # None: all (``storechild._handle``)

                decode = kept_in
        else:
            raise StoreError(f"no such store request {op!r}")
        self._next += 1
        self._waiting[self._next] = (fut, decode)
        data = pickle.dumps((self._next, body), 5)
        self._transport.write(_LEN.pack(len(data)) + data)
        return fut

    def _decisions_out(self, decisions: list[Decision]) -> list[tuple[Any, ...]]:
        mine = self._mine
        wire: list[tuple[Any, ...]] = []
        for d in decisions:
            j = d.job
            # whole when the process does not hold this very Job: claimed before it was up, or
            # changed since its claim (a quick retry counts an attempt the claim did not have)
            ref: object = j.id if mine.pop(j.id, None) is j else j
            if type(d) is End:  # End is final: mypy reads the else as Reslot
                wire.append((0, ref, d.outcome._value_, d.reason,
                             _result_out(d.result), d.lateness))
            else:
                wire.append((1, ref, d.next_check_at, d.check_count,
                             d.attempt, _result_out(d.result), d.error))
        return wire

    async def aclose(self) -> None:
        """Tell the process it is done (the end of its input), wait for it to answer what it
        was asked and end."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not self.up:  # asked nothing (calls go to it once up): nothing of the run's to finish.
            # It may still be opening its store: connecting to a server gone silent waits out
            # the whole connect timeout, which an outage run's give-up bound cannot include.
            proc.kill()
        try:
            if self._transport is not None and not self._transport.is_closing():
                self._transport.write_eof()
                await asyncio.wait_for(asyncio.shield(self._ended), 30)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            if self._transport is not None:
                self._transport.close()
            else:
                self._connecting.cancel()
            try:
                await self.loop.run_in_executor(None, proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _same(value: Any) -> Any:
    return value


class _Channel(asyncio.Protocol):
    def __init__(self, process: StoreProcess):
        self.process = process

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream socket's: a Transport (asyncio.Protocol's signature names the base class;
        # uvloop's are no subclass to isinstance, and typing.cast would cost this start ~3 ms)
        self.process._transport = transport  # type: ignore[assignment]  # see above

    def data_received(self, data: bytes) -> None:
        try:
            self.process._received(data)
        except Exception as e:  # noqa: BLE001 - a garbled answer: the process is not usable
            self.process._lost(f"store process: unreadable answer ({e})")
            if self.process._transport is not None:
                self.process._transport.abort()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.process._lost(f"store process ended ({exc or 'its end of the socket closed'})")


# --- what a slot run uses -----------------------------------------------------------------------
def pays(store: Store) -> bool:
    """Whether a store process would take more work off a run than it adds, as the store says
    (``Store.offload``): what "auto" asks before starting one."""
    return store.offload


class RunStoreCalls:
    """The store calls of one slot run (claim, claim_ids, start, finish, release) as futures
    on its loop: to the store process once it is up, else to the run's own store on the thread
    the run gives (``None``: at once, in the loop's thread); back to the own store if the process
    ends (safe: see the module's text). ``mode`` (``store_process``): "on" starts the process
    at once, "auto" once a claim comes back with a whole batch (a slot big enough for the
    process to pay: it takes ~50 ms of CPU to start) of a store it pays for (``pays``), "off"
    never. ``aclose`` at the end."""

    def __init__(self, local: Store, mode: str, batch: int,
                 loop: asyncio.AbstractEventLoop):
        self.local = local
        self.mode = "off" if mode == "auto" and not pays(local) else mode
        self.batch = batch
        self.loop = loop
        self.process: StoreProcess | None = None
        if mode == "on":
            self._spawn()

    def _spawn(self) -> None:
        try:
            spec = self.local.spec()
        except (AttributeError, NotImplementedError):
            self.mode = "off"  # a store that cannot be opened elsewhere
            return
        self.process = StoreProcess(spec, self.loop)

    @property
    def offloaded(self) -> bool:
        """Calls go to the store process now (the run's own Python holds no GIL for them)."""
        return self.process is not None and self.process.up

    def call(self, io: Executor | None, op: str, *args: Any, **kw: Any) -> asyncio.Future[Any]:
        process = self.process
        if process is not None and process.up:  # ``offloaded``
            return asyncio.ensure_future(self._in_process(process, io, op, args, kw))
        return self._local(io, op, args, kw)

    async def _in_process(self, process: StoreProcess, io: Executor | None, op: str,
                      args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        try:
            return await process.request(op, *args, **kw)
        except StoreGone:
            return await self._local(io, op, args, kw)
        except errors.Unreachable as e:
            # The run's own store knows it too: its calls at the run's end (the session's
            # unlock) then fail at once rather than wait for a probe of their own.
            told = getattr(self.local, "told_unreachable", None)
            if told is not None:
                told(str(e))
            raise

    def _local(self, io: Executor | None, op: str, args: tuple[Any, ...],
               kw: dict[str, Any]) -> asyncio.Future[Any]:
        fn = getattr(self.local, op)
        if op == "claim" and self.mode == "auto" and self.process is None:
            fn = self._claim_then_spawn
        if io is None:
            fut: asyncio.Future[Any] = self.loop.create_future()
            try:
                fut.set_result(fn(*args, **kw))
            except Exception as e:  # noqa: BLE001 - the caller's to handle, as from a thread
                fut.set_exception(e)
            return fut
        return self.loop.run_in_executor(io, functools.partial(fn, *args, **kw))

    def _claim_then_spawn(self, *args: Any, **kw: Any) -> list[Job]:
        jobs = self.local.claim(*args, **kw)
        if len(jobs) >= self.batch and self.process is None:
            self.loop.call_soon_threadsafe(self._spawn_once)
        return jobs

    def _spawn_once(self) -> None:
        if self.process is None:
            self._spawn()

    async def aclose(self) -> None:
        if self.process is not None:
            await self.process.aclose()
