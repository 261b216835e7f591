"""A store in a process of its own, for a slot run's hot calls: claim (by slot or by id), start,
finish, release.

In one process, the store's work shares the GIL with the event loop that sends: the two took
turns, and a run used one core of two. Here the store's Python and SQLite (or psycopg) work
runs in a child process on the other core; the run's event loop only writes a request and
reads the answer when its socket is readable, like any other connection. The child opens the
same store as the parent (``Store.spec``), so it keeps every rule of the store contract: the
rows are what decide.

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
import heapq
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

from .. import errors
from ..errors import AwtyError, StoreError
from ..model import (
    Answer, Decision, End, Execution, Job, Kind, Outcome, Reslot, Result, Status,
)

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor
    from typing import Any

    from ..store.base import Store
    from ..store.spec import StoreSpec

_LEN = struct.Struct("!I")
_KINDS = {k.value: k for k in Kind}
_ANSWERS = {a.value: a for a in Answer}
_OUTCOMES = {o.value: o for o in Outcome}


class StoreGone(StoreError):
    """The store process ended (or never came up): the caller goes on with its own store."""


# --- the wire ---------------------------------------------------------------------------------
def _send(sock: socket.socket, obj: object) -> None:
    data = pickle.dumps(obj, 5)
    sock.sendall(_LEN.pack(len(data)) + data)


def _recv(sock: socket.socket) -> Any:
    head = _recv_exactly(sock, 4)
    return pickle.loads(_recv_exactly(sock, _LEN.unpack(head)[0]))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def job_out(j: Job) -> tuple[Any, ...]:
    """A claimed job as the parent needs it (status and lease are the claim's own)."""
    return (j.id, j.kind.value, j.target, j.payload_json, j.headers, j.entity_name, j.entity_key,
            j.first_check_at, j.next_check_at, j.check_count, j.attempt, j.max_checks, j.horizon,
            j.timeout, j.max_attempts, j.misfire_grace, j.idempotency_key, j.cwd, j.created_at,
            j.updated_at, j.last_error, j.env, j.schedule, j.occurrence)


def job_in(t: tuple[Any, ...], owner: str, lease_until: datetime) -> Job:
    return Job(t[0], _KINDS[t[1]], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10],
               Status.IN_FLIGHT, t[11], t[12], t[13], t[14], t[15], t[16], t[17], t[18], t[19],
               t[20], owner, lease_until, None, t[21], t[22], t[23])


def _result_out(r: Result | None) -> tuple[Any, ...] | None:
    if r is None:
        return None
    return (r.answer.value, r.recheck_at, r.retry_after, r.status, r.error, r.output,
            r.duration, r.deferred)


def _result_in(t: tuple[Any, ...] | None) -> Result | None:
    if t is None:
        return None
    return Result(_ANSWERS[t[0]], t[1], t[2], t[3], t[4], t[5], t[6], t[7])


def _execution_out(e: Execution) -> tuple[Any, ...]:
    return (e.job_id, e.at, e.slot, e.check, e.attempt, e.answer.value, e.status,
            e.duration_ms, e.lateness_ms, e.error, e.host, e.pid)


def _execution_in(t: tuple[Any, ...]) -> Execution:
    return Execution(t[0], t[1], t[2], t[3], t[4], _ANSWERS[t[5]], t[6], t[7], t[8], t[9],
                     t[10], t[11])


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
                [sys.executable, "-m", "awty.run.storeproc"], stdin=child.fileno(),
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

            def applied_in(ids: list[str]) -> list[Decision]:
                applied = set(ids)
                return [d for d in decisions if d.job.id in applied]

            decode = applied_in
        elif op in ("start", "release"):
            body = (op, args[0], kw["owner"], kw["now"])
            if op == "release":
                for i in args[0]:
                    self._mine.pop(i, None)
            decode = _same
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
                wire.append((0, ref, d.outcome.value, d.reason,
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


# --- the child's side -------------------------------------------------------------------------
def open_spec(spec: StoreSpec) -> Store:
    """The store a ``Store.spec()`` describes, as its parent already opened it."""
    from ..store import open as open_store

    return open_store(spec, mode="read")


def serve(sock: socket.socket) -> None:
    """The store process: open the store, then answer requests until the socket closes."""
    claimed: dict[str, Job] = {}
    try:
        store = open_spec(_recv(sock))
    except EOFError:
        return
    except Exception as e:  # noqa: BLE001 - told to the parent, which goes on without us
        _send(sock, ("err", type(e).__name__, str(e)))
        return
    _send(sock, ("ready", None))
    try:
        _answer_requests(sock, store, claimed)
    finally:
        store.close()


# Which waiting request the process answers first: what the sending waits on before what it
# does not (results are written while the next jobs go out).
_FIRST = {"start": 0, "claim": 1, "claim_ids": 1, "release": 2, "finish": 3}


def _answer_requests(sock: socket.socket, store: Store, claimed: dict[str, Job]) -> None:
    waiting: list[tuple[int, int, tuple[Any, ...]]] = []  # (priority, number, request)
    more = threading.Condition()
    ended = [False]

    def receive() -> None:
        try:
            while True:
                number, request = _recv(sock)
                with more:
                    heapq.heappush(waiting, (_FIRST.get(request[0], 9), number, request))
                    more.notify()
        except (OSError, EOFError, ValueError):
            with more:
                ended[0] = True
                more.notify()

    def answer(number: int, request: tuple[Any, ...]) -> None:
        try:
            reply: tuple[Any, ...] = ("ok", _handle(store, claimed, request))
        except AwtyError as e:
            reply = ("err", type(e).__name__, str(e))
        except Exception as e:  # noqa: BLE001 - a bug, told to the parent as a store error
            reply = ("bug", type(e).__name__, f"{type(e).__name__}: {e}")
        try:
            _send(sock, (number, reply))
        except OSError:
            pass  # the runner is gone: what it asked for is still done (its results kept)

    threading.Thread(target=receive, name="awty-store-requests", daemon=True).start()
    while True:
        with more:
            while not waiting and not ended[0]:
                more.wait()
            if not waiting:
                return  # the runner is done with us (or gone), and nothing is left to do
            _, number, request = heapq.heappop(waiting)
        answer(number, request)


def _handle(store: Store, claimed: dict[str, Job], request: tuple[Any, ...]) -> Any:
    op = request[0]
    if op in ("claim", "claim_ids"):
        _, what, now, owner, lease_until, limit, shard, kinds = request
        if op == "claim":
            jobs = store.claim(what, now=now, owner=owner, lease_until=lease_until, limit=limit,
                               shard=shard, kinds=kinds)
        else:  # a shard's imported drop-ins, by id
            jobs = store.claim_ids(what, now=now, owner=owner, lease_until=lease_until)
        for j in jobs:
            claimed[j.id] = j
        return [job_out(j) for j in jobs]
    if op == "start":
        _, ids, owner, now = request
        return store.start(ids, owner=owner, now=now)
    if op == "finish":
        _, wire, owner, now, executions = request
        decisions: list[Decision] = []
        for w in wire:
            ref = w[1]
            if ref.__class__ is str:
                job = claimed.pop(ref)
            else:
                job = ref
                claimed.pop(job.id, None)
            if w[0] == 0:
                decisions.append(End(job, _OUTCOMES[w[2]], w[3], _result_in(w[4]), w[5]))
            else:
                decisions.append(Reslot(job, w[2], w[3], w[4], _result_in(w[5]), w[6]))
        applied = store.finish(decisions, owner=owner, now=now,
                               executions=[_execution_in(e) for e in executions])
        return [d.job.id for d in applied]
    if op == "release":
        _, ids, owner, now = request
        for i in ids:
            claimed.pop(i, None)
        return store.release(ids, owner=owner, now=now)
    raise StoreError(f"unknown request {op!r}")


def main() -> None:
    # The runner's graceful stop records its last results through us: its signals are its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        serve(socket.socket(fileno=0))
    except OSError:
        pass  # the runner went away (or stopped listening): its rows say what was done



# --- what a slot run uses -----------------------------------------------------------------------
def pays(store: Store) -> bool:
    """Whether a store process would take more work off a run than it adds, as the store says
    (``offload``, True unless the store says otherwise): what "auto" asks before starting one."""
    return getattr(store, "offload", True)


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


if __name__ == "__main__":
    main()
