"""The store process's own side (``python -m awty.run.storechild``) and the wire both sides
speak: see ``storeproc`` for the protocol and the process's lifetime. A module of its own so
that the process imports no ``asyncio`` (with ssl, logging and concurrent.futures, ~35 ms of
CPU at each run's start, as much as 1.5-2 µs a callback of a 20,000-job run): only the
parent's side runs an event loop."""

from __future__ import annotations

import heapq
import pickle
import signal
import socket
import struct
import threading

from ..errors import AwtyError, StoreError
from ..gcpause import running
from ..model import (
    Answer, Decision, End, Execution, Job, Kind, Outcome, Reslot, Result, Status,
)

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

    from ..store.base import Store
    from ..store.spec import StoreSpec

_LEN = struct.Struct("!I")
_KINDS = {k.value: k for k in Kind}
_ANSWERS = {a.value: a for a in Answer}
_OUTCOMES = {o.value: o for o in Outcome}


# --- the wire ---------------------------------------------------------------------------------
# An enum's text by ``_value_``: ``.value`` is a Python-level property (~60 ns), and every
# callback's result and execution cross here.
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
    return (j.id, j.kind._value_, j.target, j.payload_json, j.headers, j.entity_name, j.entity_key,
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
    return (r.answer._value_, r.recheck_at, r.retry_after, r.status, r.error, r.output,
            r.duration, r.deferred)


def _result_in(t: tuple[Any, ...] | None) -> Result | None:
    if t is None:
        return None
    return Result(_ANSWERS[t[0]], t[1], t[2], t[3], t[4], t[5], t[6], t[7])


def _execution_out(e: Execution) -> tuple[Any, ...]:
    return (e.job_id, e.at, e.slot, e.check, e.attempt, e.answer._value_, e.status,
            e.duration_ms, e.lateness_ms, e.error, e.host, e.pid)


def _execution_in(t: tuple[Any, ...]) -> Execution:
    return Execution(t[0], t[1], t[2], t[3], t[4], _ANSWERS[t[5]], t[6], t[7], t[8], t[9],
                     t[10], t[11])


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
        # the claimed Jobs live here until their finish, as in the run's own process
        with running():
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
    # A start or finish that kept every job (the usual answer; both keep a sub-list, in
    # order) is answered None: the parent has the batch, and its ids crossed once already.
    if op == "start":
        _, ids, owner, now = request
        kept = store.start(ids, owner=owner, now=now)
        return None if len(kept) == len(ids) else kept
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
        return None if len(applied) == len(decisions) else [d.job.id for d in applied]
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
