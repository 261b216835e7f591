"""The executor seam. One executor per job kind (http, exec, python), created once per runner.

Contract:
- ``run`` executes one attempt of one job and returns a ``Result``. It never raises for the
  job's own failure (timeout, connection refused, exit code, exception in user code): those are
  ``Answer.RETRY`` or ``Answer.FAIL`` results with ``error`` set. It raises only when the runner
  itself is broken (a bug), which aborts the slot and leaves the claimed jobs to their leases.
- ``run`` enforces ``attempt.timeout`` as a wall-clock deadline for the whole attempt.
- ``run`` is called concurrently from one asyncio event loop; an executor bounds its own
  per-target concurrency (e.g. per host) but not the global one, which the runner bounds.
- ``close`` releases pooled connections and worker processes; called once, after the last run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..model import Attempt, Job, Result
from ..slots import parse_duration, parse_epoch_or_iso


class Executor(Protocol):
    async def run(self, job: Job, attempt: Attempt) -> Result: ...

    def new_run(self) -> None:
        """The next slot of a catch-up, on the same executor: whatever a run learned of its
        targets (a breaker, a failed resolution) starts afresh, as with a new executor; what is
        only a cost (open connections) is kept."""

    async def close(self) -> None: ...


# done(outcome) of ``submit``: the attempt's Result, or the exception that broke the executor
# (a bug: the runner stops the run and leaves the job to its lease).
Answered = Callable[["Result | BaseException"], None]


def submit(executor: Any, job: Job, attempt: Attempt, done: Answered) -> None:
    """Start one attempt; ``done`` is called once, from a callback of the running loop, never
    from inside this call. An executor with a ``submit`` of its own (http: no task per
    callback) is asked directly; any other runs its ``run`` in a task."""
    own = getattr(executor, "submit", None)
    if own is not None:
        own(job, attempt, done)
        return
    task = asyncio.ensure_future(executor.run(job, attempt))

    def finished(t: asyncio.Future[Result]) -> None:
        if t.cancelled():
            done(asyncio.CancelledError())
        else:
            e = t.exception()
            done(e if e is not None else t.result())

    task.add_done_callback(finished)


def recheck_from(data: Any, now: datetime) -> datetime | None:
    """A "check again later" request in a job's answer: ``{"recheck_at": ISO|epoch}`` or
    ``{"recheck_in": "2h"|seconds}``. None when the answer asks for nothing.
    Raises ValueError when the answer asks for a re-check in a form that cannot be read."""
    if not isinstance(data, dict):
        return None
    if data.get("recheck_at") is not None:
        return parse_epoch_or_iso(data["recheck_at"])
    if data.get("recheck_in") is not None:
        return now + timedelta(seconds=parse_duration(data["recheck_in"]))
    return None


def recheck_from_text(text: str | bytes, now: datetime) -> datetime | None:
    """``recheck_from`` over a JSON document; text that is not JSON asks for nothing."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):  # too deep is not JSON to us
        return None
    try:
        return recheck_from(data, now)
    except (TypeError, OverflowError, OSError) as e:  # e.g. recheck_in 1e308, recheck_at 1e20
        raise ValueError(str(e) or type(e).__name__) from None


def truncate(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more chars]"
