"""One subprocess under a wall-clock deadline: the shared machinery of the exec and python
executors.

- The child runs in its own session (``start_new_session=True``), so its process group id is
  its pid and ``os.killpg`` reaches every grandchild that did not leave the group on purpose.
- ``timeout`` is a deadline for the whole execution (spawn, run, output). At the deadline the
  whole group is SIGKILLed, then the leader is reaped.
- When the leader exits on its own, whatever it left running in its group (``sleep 100 &``)
  is SIGKILLed too: nothing a check started outlives the check, and a background process
  holding the output pipe cannot stall the slot.
- Output is drained continuously through a protocol (never back-pressuring the child) and
  kept up to a cap: the first and the last bytes of each stream, with the count of the rest.
- Cancelling the caller kills the group as well.

Reaping: the pid of a group leader cannot be reused while group members are alive; between
reaping the leader and the final ``killpg`` a new, unrelated process would have to take the
same pid *and* make itself a group leader, which we accept as negligible.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass
from typing import cast

from ..execenv import restore
from ..model import Attempt, Job

# Environment variables the child must never see (the secret itself, and where it lives).
SECRET_ENV = ("AWTY_SIGNING_SECRET", "AWTY_SIGNING_SECRET_FILE")

TAIL_KEEP = 64 * 1024  # bytes kept from the end of a stream: enough for a last JSON line
REAP_GRACE = 5.0  # seconds to wait for a SIGKILLed leader to be reaped
DRAIN_GRACE = 1.0  # seconds to collect what is left in the pipes after the leader is gone


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
            return bytes(self.tail).decode("utf-8", "replace")
        first = min(limit // 2, len(self.head))
        last = min(limit - first, len(self.tail))
        skipped = self.total - first - last
        head = bytes(self.head[:first]).decode("utf-8", "replace")
        tail = bytes(self.tail[len(self.tail) - last:]).decode("utf-8", "replace") if last else ""
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


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, head_cap: int):
        self.stdout = Capture(head_cap, max(head_cap, TAIL_KEEP))
        self.stderr = Capture(head_cap, max(head_cap, TAIL_KEEP))
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.stdout if fd == 1 else self.stderr).feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def killpg(pgid: int) -> None:
    """SIGKILL a whole process group; a group already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait(fut: asyncio.Future[None], seconds: float) -> bool:
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
    transport, proto = await loop.subprocess_exec(
        lambda: _Protocol(loop, max(keep, 0)), *argv,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
    pid = transport.get_pid()
    timed_out = False
    try:
        pipe = cast("asyncio.WriteTransport | None", transport.get_pipe_transport(0))
        if pipe is not None and not pipe.is_closing():
            try:
                if stdin:
                    pipe.write(stdin)  # buffered by the transport: never blocks on a non-reader
                pipe.close()
            except (RuntimeError, OSError):
                pass  # the command exited (or closed stdin) without reading it: uvloop says so
        if not await _wait(proto.exited, deadline - time.monotonic()):
            timed_out = True
            killpg(pid)
            await _wait(proto.exited, REAP_GRACE)
        else:
            killpg(pid)  # whatever the command left running in its group
        # What the dead wrote is already in the pipes; a holder outside the group (one that
        # made itself a new session) is waited for at most DRAIN_GRACE, never past the deadline.
        await _wait(proto.drained, min(DRAIN_GRACE, max(deadline - time.monotonic(), 0.1)))
    finally:
        if not proto.exited.done():  # cancelled, or the leader could not be reaped
            killpg(pid)
            await _wait(proto.exited, REAP_GRACE)  # reap it here, not after the loop is gone
        transport.close()
    return ProcOutcome(returncode=transport.get_returncode(), timed_out=timed_out,
                       stdout=proto.stdout, stderr=proto.stderr,
                       duration=time.monotonic() - start)


def job_env(job: Job, attempt: Attempt) -> dict[str, str]:
    """The child's environment: the one recorded when the job was added (else ours), never
    the signing secret, plus the job's context."""
    env = restore(job.env, os.environ, SECRET_ENV)
    env.update({
        "AWTY_JOB_ID": job.id,
        "AWTY_ENTITY": job.entity_name or "",
        "AWTY_KEY": job.entity_key or "",
        "AWTY_CHECK": str(attempt.check),
        "AWTY_ATTEMPT": str(attempt.attempt),
        "AWTY_SLOT": attempt.slot,
    })
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
