"""The ``python`` kind: ``package.module:function`` called with a read-only ``Call`` (the
fields of the HTTP body, by the same names).

The call runs in a worker process (``pyworker``), one per call, under the same deadline and
process-group kill as ``exec``: a hung function never stalls the slot nor outlives the runner,
and the event loop is never blocked. The function answers None (done), a datetime (re-check
at it; naive is UTC) or a timedelta (re-check at now + delta); an exception is a retryable
failure; a target that cannot be imported or called is a failure not worth retrying.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from ..clock import Clock
from ..config import Settings
from ..model import Answer, Attempt, Job, Result
from ..storable import text_of
from . import _proc
from .base import truncate
from .pyworker import TARGET, bootstrap, request

_AWTY_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PythonExecutor:
    def __init__(self, settings: Settings, clock: Clock,
                 tokens: _proc.TokenLookup | None = None):
        self._settings = settings
        self._clock = clock
        self._tokens = tokens  # where the environment of a job added over HTTP is read
        self._limit = _proc.limiter(settings.concurrency)
        self._argv = [sys.executable, "-P", "-c", bootstrap(_AWTY_PARENT)]

    async def run(self, job: Job, attempt: Attempt) -> Result:
        if not TARGET.match(job.target):
            return Result(Answer.FAIL, error=truncate(
                f"bad python target {job.target!r}: expected package.module:function",
                _proc.ERROR_LIMIT))
        proc = await _proc.attempt_process(
            self._argv, "python", job, attempt, stdin=request(job.target, job, attempt),
            tokens=self._tokens, limit=self._limit, keep=self._settings.history_output_bytes)
        if isinstance(proc, Result):
            return proc
        return self._result(proc, attempt)

    def _result(self, proc: _proc.ProcOutcome, attempt: Attempt) -> Result:
        # The worker's stdout carries only the answer; the function's prints are on stderr.
        output = proc.stderr.render(self._settings.history_output_bytes)
        rc = proc.returncode

        def result(answer: Answer, error: str | None = None, **kw: Any) -> Result:
            return Result(answer, status=rc, error=truncate(error, _proc.ERROR_LIMIT),
                          output=output, duration=proc.duration, **kw)

        if proc.timed_out:
            return result(Answer.RETRY, _proc.timeout_error(attempt.timeout))
        answer = _answer(proc.stdout.last_line())
        if answer is None:
            if rc is not None and rc < 0:
                return result(Answer.RETRY, _proc.signal_error(rc))
            last = text_of(proc.stderr.last_line())
            why = f"worker exited {rc} without an answer" + (f": {last}" if last else "")
            return result(Answer.RETRY, why)
        if not answer.get("ok"):
            kind = Answer.RETRY if answer.get("retryable") else Answer.FAIL
            return result(kind, str(answer.get("error") or "failed"))
        try:
            at = self._recheck_at(answer)
        except (ValueError, TypeError, OverflowError) as e:
            return result(Answer.FAIL, f"unreadable answer from the worker: {e}")
        if at is None:
            return result(Answer.DONE)
        return result(Answer.RECHECK, recheck_at=at)

    def _recheck_at(self, answer: dict[str, Any]) -> datetime | None:
        kind = answer.get("kind")
        value: Any = answer.get("value")
        if kind == "none":
            return None
        if kind == "datetime":
            at = datetime.fromisoformat(value)
            return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
        if kind == "timedelta":
            return self._clock.now() + timedelta(seconds=float(value))
        raise ValueError(f"unknown kind {kind!r}")

    def new_run(self) -> None:
        """Nothing learned in a run."""

    async def close(self) -> None:
        """Nothing pooled: one worker per call, reaped (or its group killed) within the run."""


def _answer(line: bytes) -> dict[str, Any] | None:
    if not line:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "ok" in data else None
