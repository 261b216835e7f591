"""One subprocess under a wall-clock deadline: the shared machinery of the exec and python
executors.

- The child runs in its own session (``start_new_session=True``), so its process group id is
  its pid and ``os.killpg`` reaches every grandchild that did not leave the group on purpose.
- ``timeout`` is a deadline for the whole execution (spawn, run, output). At the deadline the
  whole group is SIGKILLed, then the leader is reaped.
- When the leader exits on its own, whatever it left running in its group (``sleep 100 &``)
  is SIGKILLed too: nothing a check started outlives the check, and a background process
  holding the output pipe cannot stall the slot.
- Output is drained continuously (never back-pressuring the child) and kept up to a cap: the
  first and the last bytes of each stream, with the count of the rest.
- Cancelling the caller kills the group as well, at any moment, the spawn included.

The child is spawned here (``subprocess.Popen``) and its pipes served by the loop's readers and
writers, not by ``loop.subprocess_exec``: that one makes the process, then connects its pipes
over a few turns of the loop, and a cancel in between takes its own clean-up, which kills the
leader alone: asyncio then waits for the pipes that the rest of the group still holds (a
``sleep 30 &``: 30 s, and ``asyncio.run`` hangs on it the same way, CPython issues 103847 and
125502), uvloop returns and leaves the rest running. Here the pid is known from the moment the
process exists, and every way out of ``run_process`` kills its group. A thread waits for the
leader's exit (as asyncio's default child watcher does on 3.11).

Reaping: the pid of a group leader cannot be reused while group members are alive; between
reaping the leader and the final ``killpg`` a new, unrelated process would have to take the
same pid *and* make itself a group leader, which we accept as negligible.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..execenv import restore, token_of
from ..errors import AwtyError
from ..model import Answer, ApiToken, Attempt, Job, Result
from ..slots import iso
from ..storable import text_of
from .base import truncate

# Environment variables the child must never see (the secret itself, and where it lives).
SECRET_ENV = ("AWTY_SIGNING_SECRET", "AWTY_SIGNING_SECRET_FILE")

TAIL_KEEP = 64 * 1024  # bytes kept from the end of a stream: enough for a last JSON line
REAP_GRACE = 5.0  # seconds to wait for a SIGKILLed leader to be reaped
DRAIN_GRACE = 1.0  # seconds to collect what is left in the pipes after the leader is gone
READ_SIZE = 256 * 1024  # bytes read from an output pipe at a time
ERROR_LIMIT = 500  # characters of an error kept in a result


class Capture:
    """A stream's output, kept up to a cap: the first ``head_cap`` and the last ``tail_cap``
    bytes. Everything is read (the pipe never fills up); the middle is counted, not kept."""

    __slots__ = ("head", "tail", "total", "_head_cap", "_tail_cap")

    def __init__(self, head_cap: int, tail_cap: int):
        tail_cap = max(tail_cap, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._head_cap = head_cap
        self._tail_cap = tail_cap

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail += data[-self._tail_cap:]
        if len(self.tail) > self._tail_cap:
            del self.tail[: len(self.tail) - self._tail_cap]

    def last_line(self) -> bytes:
        """The last non-empty line (b"" when none, or when it did not fit in the tail)."""
        lines = bytes(self.tail).splitlines()
        if self.total > len(self.tail):
            lines = lines[1:]  # the first kept line may have begun before the tail
        for line in reversed(lines):
            if line.strip():
                return line.strip()
        return b""

    def render(self, limit: int) -> str:
        """The output as text, at most about ``limit`` bytes: all of it, or its beginning and
        end with the number of bytes left out in between."""
        if limit <= 0 or self.total == 0:
            return ""
        if self.total <= limit and self.total <= len(self.tail):
            return text_of(bytes(self.tail))
        first = min(limit // 2, len(self.head))
        last = min(limit - first, len(self.tail))
        skipped = self.total - first - last
        head = text_of(bytes(self.head[:first]))
        tail = text_of(bytes(self.tail[len(self.tail) - last:])) if last else ""
        return f"{head}\n… [{skipped} bytes skipped] …\n{tail}"


def render_outputs(out: Capture, err: Capture, limit: int) -> str:
    """stdout, then stderr under a marker, within ``limit`` bytes shared fairly between them."""
    if err.total == 0:
        return out.render(limit)
    if out.total == 0:
        return err.render(limit)
    a = min(out.total, max(limit // 2, limit - err.total))
    return out.render(a) + "\n--- stderr ---\n" + err.render(limit - a)


@dataclass(frozen=True, slots=True)
class ProcOutcome:
    returncode: int | None  # negative: killed by that signal; None: never reaped
    timed_out: bool
    stdout: Capture
    stderr: Capture
    duration: float  # monotonic seconds, spawn to the end


class _Pipes:
    """The child's stdin, stdout and stderr, served by the loop (``add_reader``/``add_writer``):
    the payload written as the child takes it, then stdin closed; the output read into two
    Captures until each pipe's end (``drained``: every holder of their write ends is gone)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes],
                 head_cap: int):
        self.stdout = Capture(head_cap, max(head_cap, TAIL_KEEP))
        self.stderr = Capture(head_cap, max(head_cap, TAIL_KEEP))
        self.drained: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._stdin, out, err = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
        self._files = {self._stdin: proc.stdin, out: proc.stdout, err: proc.stderr}
        self._outputs = {out: self.stdout, err: self.stderr}
        self._serving: dict[int, Callable[[int], object]] = {}  # fd -> how to stop serving it
        self._payload = memoryview(b"")

    def serve(self, payload: bytes) -> None:
        for fd in self._files:
            os.set_blocking(fd, False)
        for fd in self._outputs:
            self._loop.add_reader(fd, self._read, fd)
            self._serving[fd] = self._loop.remove_reader
        self._payload = memoryview(payload)
        self._feed()

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._outputs[fd].feed(data)
            return
        self._close(fd)
        del self._outputs[fd]
        if not self._outputs and not self.drained.done():
            self.drained.set_result(None)

    def _feed(self) -> None:
        fd = self._stdin
        try:
            while self._payload:
                self._payload = self._payload[os.write(fd, self._payload):]
        except BlockingIOError:  # the pipe is full: the rest once the child has read some
            if fd not in self._serving:
                self._loop.add_writer(fd, self._feed)
                self._serving[fd] = self._loop.remove_writer
            return
        except OSError:
            pass  # the child closed its stdin (or exited) without reading it all
        self._close(fd)

    def _close(self, fd: int) -> None:
        stop = self._serving.pop(fd, None)
        if stop is not None:
            stop(fd)  # before closing: the number may be reused at once
        pipe = self._files.pop(fd, None)
        if pipe is not None:
            pipe.close()

    def close(self) -> None:
        """Stop serving the pipes and close them (those never served as well)."""
        for fd in list(self._files):
            self._close(fd)


def _exit_of(loop: asyncio.AbstractEventLoop,
             proc: subprocess.Popen[bytes]) -> asyncio.Future[int]:
    """The leader's exit status, reaped by a thread of its own and told to the loop."""
    exited: asyncio.Future[int] = loop.create_future()

    def settle(returncode: int) -> None:
        if not exited.done():
            exited.set_result(returncode)

    def reap() -> None:
        returncode = proc.wait()
        try:
            loop.call_soon_threadsafe(settle, returncode)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for it any more

    threading.Thread(target=reap, name=f"awty-reap-{proc.pid}", daemon=True).start()
    return exited


def killpg(pgid: int) -> None:
    """SIGKILL a whole process group; a group already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait(fut: asyncio.Future[Any], seconds: float) -> bool:
    """Wait for ``fut`` at most ``seconds``; True when it completed."""
    if not fut.done():
        try:
            await asyncio.wait_for(asyncio.shield(fut), max(seconds, 0.0))
        except TimeoutError:
            return False
    return True


async def run_process(argv: list[str], *, stdin: bytes, cwd: str | None, env: dict[str, str],
                      timeout: float, keep: int) -> ProcOutcome:
    """Run ``argv`` in its own process group with ``stdin`` fed in, under a wall-clock
    ``timeout`` for the whole execution, keeping about ``keep`` bytes of each output stream
    (plus a larger tail of each, for reading a last line).
    Raises OSError only when the process cannot be started."""
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    deadline = start + timeout
    proc = subprocess.Popen(argv, bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
    pid = proc.pid
    pipes = _Pipes(loop, proc, max(keep, 0))
    exited: asyncio.Future[int] | None = None
    timed_out = False
    try:  # from the spawn on: every way out of here, a cancel included, kills the group
        pipes.serve(stdin)
        exited = _exit_of(loop, proc)
        if not await _wait(exited, deadline - time.monotonic()):
            timed_out = True
            killpg(pid)
            await _wait(exited, REAP_GRACE)
        else:
            killpg(pid)  # whatever the command left running in its group
        # What the dead wrote is already in the pipes; a holder outside the group (one that
        # made itself a new session) is waited for at most DRAIN_GRACE, never past the deadline.
        await _wait(pipes.drained, min(DRAIN_GRACE, max(deadline - time.monotonic(), 0.1)))
    finally:
        try:
            if exited is None or not exited.done():  # cancelled, or the leader not reaped
                killpg(pid)
                if exited is not None:
                    await _wait(exited, REAP_GRACE)  # reap it here, not after the loop is gone
        finally:
            pipes.close()
    return ProcOutcome(returncode=exited.result() if exited.done() else None,
                       timed_out=timed_out, stdout=pipes.stdout, stderr=pipes.stderr,
                       duration=time.monotonic() - start)


TokenLookup = Callable[[str], ApiToken | None]  # ``Store.token_named``


async def attempt_process(argv: list[str], what: str, job: Job, attempt: Attempt, *,
                          stdin: bytes, tokens: TokenLookup | None,
                          limit: asyncio.Semaphore, keep: int) -> ProcOutcome | Result:
    """One attempt's process, ``argv`` (``what`` names it in errors), in the job's directory
    and environment, at most ``limit`` at once; or the Result when it could not run. A job
    whose directory is gone or whose token was revoked fails (never run elsewhere or with
    another environment); a store that cannot say now, or a machine too busy to start a
    process (EAGAIN, EMFILE, ENOMEM), is tried again later."""
    try:
        cwd = job_cwd(job)
        env = await environment(job, attempt, tokens)
    except (FileNotFoundError, LookupError) as e:  # its directory gone, its token revoked
        return Result(Answer.FAIL, error=truncate(str(e), ERROR_LIMIT))
    except AwtyError as e:
        return Result(Answer.RETRY, error=truncate(str(e), ERROR_LIMIT))
    async with limit:
        try:
            return await run_process(argv, stdin=stdin, cwd=cwd, env=env,
                                     timeout=attempt.timeout, keep=keep)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as e:
            return Result(Answer.FAIL, error=truncate(f"cannot start {what}: {e}", ERROR_LIMIT))
        except OSError as e:
            return Result(Answer.RETRY, error=truncate(f"cannot start {what}: {e}", ERROR_LIMIT))


async def environment(job: Job, attempt: Attempt,
                      tokens: TokenLookup | None) -> dict[str, str]:
    """``job_env``; for a job added over HTTP (its environment a reference to its token,
    ``execenv.token_of``), on the token's ``exec_env`` as the store holds it now, read with
    ``tokens`` on a thread. Raises ``LookupError`` when the token was revoked (the job must
    fail, not run with another environment) and the store's ``AwtyError`` when it cannot
    read it (try again later)."""
    ref = token_of(job.env)
    if ref is None:
        return job_env(job, attempt)
    from ..tokens import run_environment

    if tokens is None:  # an executor made without a store: nothing to run with
        raise LookupError(f"token {ref[0]!r}: its environment cannot be read here")
    token = await asyncio.get_running_loop().run_in_executor(None, tokens, ref[0])
    return job_env(job, attempt, run_environment(ref, token, job.cwd or os.getcwd()))


def job_env(job: Job, attempt: Attempt, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``base``, else the one recorded when the job was added (else
    ours), never the signing secret, plus the job's context."""
    env = restore(job.env if base is None else base, os.environ, SECRET_ENV)
    env.update({
        "AWTY_JOB_ID": job.id,
        "AWTY_ENTITY": job.entity_name or "",
        "AWTY_KEY": job.entity_key or "",
        "AWTY_CHECK": str(attempt.check),
        "AWTY_ATTEMPT": str(attempt.attempt),
        "AWTY_SLOT": attempt.slot,
    })
    if job.schedule is not None:
        env["AWTY_SCHEDULE"] = job.schedule
    if job.occurrence is not None:  # none for a `schedule run`
        env["AWTY_OCCURRENCE"] = iso(job.occurrence)
    return env


def job_cwd(job: Job) -> str | None:
    """The directory to run in (None: ours). Raises FileNotFoundError when the job's
    directory no longer exists."""
    if job.cwd is None:
        return None
    if not os.path.isdir(job.cwd):
        raise FileNotFoundError(f"working directory no longer exists: {job.cwd}")
    return job.cwd


def timeout_error(seconds: float) -> str:
    return f"timeout after {seconds:g}s"


def signal_error(returncode: int) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"


def limiter(concurrency: int) -> asyncio.Semaphore:
    """How many processes one executor runs at once."""
    return asyncio.Semaphore(max(1, min(concurrency, 32)))
