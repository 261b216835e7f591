"""A store in a process of its own, for a slot run's hot calls: claim, start, finish, release.

In one process, the store's work shares the GIL with the event loop that sends: the two took
turns, and a run used one core of two. Here the store's Python and SQLite (or psycopg) work
runs in a child process on the other core; the runner's store thread only sends a request and
waits on a socket for the answer (GIL released). The child opens the same store as the parent
(``Store.spec``), so it keeps every rule of the store contract: the rows are what decide.

Protocol: length-prefixed pickles over a socketpair (the child's end is its stdin; it inherits
no other descriptor, so no lock of the parent's). Requests are answered in order, one at a
time. Jobs and decisions travel as plain tuples (the child keeps the Jobs it claimed and is
sent only their ids back); errors as the store's own AwtyError classes.

Lifetime: the child ignores SIGINT and SIGTERM (the runner's graceful stop still has results
to record through it) and ends when the parent says so or its socket closes: a parent that is
killed leaves a child that finishes the request in hand, then exits. A child that dies makes
every later call raise ``StoreGone``; the run's calls then go to the parent's own store
(``RunStore``), which the contract makes safe: finish applies only to jobs still leased by the
run, start marks are idempotent, and a claim the child made but never answered is a lease that
expires like any dead runner's.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from .. import errors
from ..errors import AwtyError, StoreError
from ..model import (
    Answer, Decision, End, Execution, Job, Kind, Outcome, Reslot, Result, Status,
)

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from .base import Store

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
            j.updated_at, j.last_error, j.env)


def job_in(t: tuple[Any, ...], owner: str, lease_until: datetime) -> Job:
    return Job(t[0], _KINDS[t[1]], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10],
               Status.IN_FLIGHT, t[11], t[12], t[13], t[14], t[15], t[16], t[17], t[18], t[19],
               t[20], owner, lease_until, None, t[21])


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
            e.duration_ms, e.lateness_ms, e.error)


def _execution_in(t: tuple[Any, ...]) -> Execution:
    return Execution(t[0], t[1], t[2], t[3], t[4], _ANSWERS[t[5]], t[6], t[7], t[8], t[9])


# --- the parent's side ------------------------------------------------------------------------
class RemoteStore:
    """The parent's handle on a store process. Calls block until answered (call them from
    one thread: the runner's store thread)."""

    def __init__(self, spec: tuple[Any, ...]):
        parent, child = socket.socketpair()
        self._sock = parent
        self._up = False
        self.gone: str | None = None  # why the process cannot be used, once it cannot
        self._mine: set[str] = set()  # ids the process claimed (it holds their Jobs)
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent.parent.parent)  # the awty it must run
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "awty.store.remote"], stdin=child.fileno(),
                stdout=subprocess.DEVNULL, env=env, close_fds=True)
        except OSError as e:
            self._proc = None
            self.gone = f"cannot start a store process: {e}"
        finally:
            child.close()
        if self._proc is not None:
            try:
                _send(parent, spec)
            except OSError as e:
                self._lost(f"store process: {e}")

    def ready(self) -> bool:
        """Has the process opened its store? Never waits."""
        if self._up or self.gone is not None:
            return self._up
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return False
            answer = _recv(self._sock)
        except (OSError, EOFError) as e:
            self._lost(f"store process ended before its store was open ({e or 'no answer'})")
            return False
        if answer[0] != "ready":
            self._lost(f"store process could not open its store: {answer[2]}")
            return False
        self._up = True
        return True

    def _call(self, *request: object) -> Any:
        if self.gone is not None:
            raise StoreGone(self.gone)
        try:
            _send(self._sock, request)
            answer = _recv(self._sock)
        except (OSError, EOFError) as e:
            self._lost(f"store process ended ({e or 'no answer'})")
            raise StoreGone(self.gone or "store process ended") from None
        if answer[0] == "ok":
            return answer[1]
        kind = getattr(errors, answer[1], None)
        if isinstance(kind, type) and issubclass(kind, AwtyError):
            raise kind(answer[2])
        raise StoreError(f"store process: {answer[2]}")

    def _lost(self, why: str) -> None:
        self.gone = why
        self._up = False
        self.close()

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None) -> list[Job]:
        rows = self._call("claim", slot, now, owner, lease_until, limit, shard)
        jobs = [job_in(t, owner, lease_until) for t in rows]
        self._mine.update(j.id for j in jobs)
        return jobs

    def start(self, ids: list[str], *, owner: str, now: datetime) -> list[str]:
        return self._call("start", ids, owner, now)  # type: ignore[no-any-return]

    def finish(self, decisions: list[Decision], *, owner: str, now: datetime,
               executions: list[Execution] | tuple[Execution, ...] = ()) -> list[Decision]:
        mine = self._mine
        wire: list[tuple[Any, ...]] = []
        for d in decisions:
            j = d.job
            ref: object = j.id if j.id in mine else j  # claimed before the process was up
            if d.__class__ is End:
                wire.append((0, ref, d.outcome.value, d.reason, _result_out(d.result),  # type: ignore[union-attr]
                             d.lateness))  # type: ignore[union-attr]
            else:
                wire.append((1, ref, d.next_check_at, d.check_count, d.attempt,  # type: ignore[union-attr]
                             _result_out(d.result), d.error))  # type: ignore[union-attr]
        applied = set(self._call("finish", wire, owner, now,
                                 [_execution_out(e) for e in executions]))
        for d in decisions:
            mine.discard(d.job.id)
        return [d for d in decisions if d.job.id in applied]

    def release(self, ids: list[str], *, owner: str, now: datetime) -> int:
        n = self._call("release", ids, owner, now)
        self._mine.difference_update(ids)
        return n  # type: ignore[no-any-return]

    def close(self) -> None:
        """Ask the process to end and wait for it (briefly: it answers nothing in flight)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            self._sock.close()  # EOF: it ends after the request in hand, if any
        finally:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- the child's side -------------------------------------------------------------------------
def open_spec(spec: tuple[Any, ...]) -> Store:
    """The store a ``Store.spec()`` describes."""
    if spec[0] == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(Path(spec[1]), busy_timeout=spec[2], create=False, migrate=False,
                           locks=Path(spec[3]))
    if spec[0] == "postgres":
        from .postgres import PostgresStore

        return PostgresStore(spec[1], schema=spec[2])
    raise StoreError(f"unknown store {spec[0]!r}")


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


def _answer_requests(sock: socket.socket, store: Store, claimed: dict[str, Job]) -> None:
    while True:
        try:
            request = _recv(sock)
        except EOFError:
            return
        try:
            answer: tuple[Any, ...] = ("ok", _handle(store, claimed, request))
        except AwtyError as e:
            answer = ("err", type(e).__name__, str(e))
        except Exception as e:  # noqa: BLE001 - a bug, told to the parent as a store error
            answer = ("bug", type(e).__name__, f"{type(e).__name__}: {e}")
        try:
            _send(sock, answer)
        except OSError:
            return


def _handle(store: Store, claimed: dict[str, Job], request: tuple[Any, ...]) -> Any:
    op = request[0]
    if op == "claim":
        _, slot, now, owner, lease_until, limit, shard = request
        jobs = store.claim(slot, now=now, owner=owner, lease_until=lease_until, limit=limit,
                           shard=shard)
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
            job = claimed.pop(ref) if ref.__class__ is str else ref
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


if __name__ == "__main__":
    main()


# --- what a slot run uses -----------------------------------------------------------------------
class RunStore:
    """The store calls of one slot run (claim, start, finish, release): to the run's own store
    until a store process is up, then to it; back to the own store if it ends. ``mode``
    (``store_process``): "on" starts the process at once, "auto" once a claim comes back with a
    whole batch (a slot big enough for the process to pay: it takes ~50 ms of CPU to start),
    "off" never. Call from one thread (the run's store thread); ``close`` at the end."""

    def __init__(self, local: Store, mode: str, batch: int):
        self.local = local
        self.mode = mode
        self.batch = batch
        self.remote: RemoteStore | None = None
        if mode == "on":
            self._spawn()

    def _spawn(self) -> None:
        try:
            spec = self.local.spec()
        except (AttributeError, NotImplementedError):
            self.mode = "off"  # a store that cannot be opened elsewhere
            return
        self.remote = RemoteStore(spec)

    def _up(self) -> RemoteStore | None:
        r = self.remote
        return r if r is not None and r.ready() else None

    def claim(self, slot: datetime, *, now: datetime, owner: str, lease_until: datetime,
              limit: int, shard: tuple[int, int] | None = None) -> list[Job]:
        r = self._up()
        if r is not None:
            try:
                return r.claim(slot, now=now, owner=owner, lease_until=lease_until,
                               limit=limit, shard=shard)
            except StoreGone:
                pass
        jobs = self.local.claim(slot, now=now, owner=owner, lease_until=lease_until,
                                limit=limit, shard=shard)
        if self.mode == "auto" and self.remote is None and len(jobs) >= self.batch:
            self._spawn()
        return jobs

    def start(self, ids: list[str], *, owner: str, now: datetime) -> list[str]:
        r = self._up()
        if r is not None:
            try:
                return r.start(ids, owner=owner, now=now)
            except StoreGone:
                pass
        return self.local.start(ids, owner=owner, now=now)

    def finish(self, decisions: list[Decision], *, owner: str, now: datetime,
               executions: list[Execution] | tuple[Execution, ...] = ()) -> list[Decision]:
        r = self._up()
        if r is not None:
            try:
                return r.finish(decisions, owner=owner, now=now, executions=executions)
            except StoreGone:
                pass  # applied or not, applying again is safe: only jobs still leased count
        return self.local.finish(decisions, owner=owner, now=now, executions=executions)

    def release(self, ids: list[str], *, owner: str, now: datetime) -> int:
        r = self._up()
        if r is not None:
            try:
                return r.release(ids, owner=owner, now=now)
            except StoreGone:
                pass
        return self.local.release(ids, owner=owner, now=now)

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()
