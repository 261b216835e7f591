"""The ``exec`` kind: ``/bin/sh -c target`` in the job's directory, payload on stdin.

Exit 0 is done, or a re-check when the last non-empty stdout line is JSON with
``recheck_at``/``recheck_in``; a non-zero exit, a signal or the timeout is a retryable failure.
The deadline, the process-group kill and the output cap live in ``_proc``.
"""

from __future__ import annotations

from typing import Any

from ..clock import Clock
from ..config import Settings
from ..model import Answer, Attempt, Job, Result
from . import _proc
from .base import recheck_from_text, truncate

SHELL = "/bin/sh"


class ExecExecutor:
    def __init__(self, settings: Settings, clock: Clock,
                 tokens: _proc.TokenLookup | None = None):
        self._settings = settings
        self._clock = clock
        self._tokens = tokens  # where the environment of a job added over HTTP is read
        self._limit = _proc.limiter(settings.concurrency)

    async def run(self, job: Job, attempt: Attempt) -> Result:
        proc = await _proc.attempt_process(
            [SHELL, "-c", job.target], SHELL, job, attempt,
            stdin=job.payload_json.encode("utf-8"), tokens=self._tokens, limit=self._limit,
            keep=self._settings.history_output_bytes)
        if isinstance(proc, Result):
            return proc
        return self._result(proc, attempt)

    def _result(self, proc: _proc.ProcOutcome, attempt: Attempt) -> Result:
        output = _proc.render_outputs(proc.stdout, proc.stderr,
                                      self._settings.history_output_bytes)
        rc = proc.returncode

        def done(answer: Answer, **kw: Any) -> Result:
            return Result(answer, status=rc, output=output, duration=proc.duration, **kw)

        if proc.timed_out:
            return Result(Answer.RETRY, error=_proc.timeout_error(attempt.timeout),
                          output=output, duration=proc.duration)
        if rc is None:
            return done(Answer.RETRY, error="the process could not be reaped")
        if rc < 0:
            return done(Answer.RETRY, error=_proc.signal_error(rc))
        if rc > 0:
            return done(Answer.RETRY, error=f"exit {rc}")
        line = proc.stdout.last_line()
        try:
            at = recheck_from_text(line, self._clock.now()) if line else None
        except ValueError as e:
            return done(Answer.FAIL, error=truncate(f"bad re-check in the last output line: {e}",
                                                    _proc.ERROR_LIMIT))
        if at is not None:
            return done(Answer.RECHECK, recheck_at=at)
        return done(Answer.DONE)

    def new_run(self) -> None:
        """Nothing learned in a run."""

    async def close(self) -> None:
        """Nothing pooled: every process is reaped (or its group killed) within its run."""
