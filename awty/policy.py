"""Pure decisions: what happens to a job after one execution, or before it (misfire).
No I/O and no clock: ``now`` is an argument. The runner applies what these return."""

from __future__ import annotations

from datetime import datetime, timedelta

from .config import Settings
from .model import Answer, Decision, End, Job, Kind, MisfirePolicy, Outcome, Reslot, Result
from .record import Record, _draft, _seal
from .slots import backoff_delay, next_slot_after, slot_for


class Limits(Record):
    """A job's guards: its own, else the settings'."""

    __slots__ = ("max_checks", "horizon", "timeout", "max_attempts")
    max_checks: int
    horizon: float  # seconds
    timeout: float  # seconds, per attempt
    max_attempts: int

    def __new__(cls, max_checks: int, horizon: float, timeout: float,
                max_attempts: int) -> Limits:
        s = _draft(cls)
        s.max_checks = max_checks
        s.horizon = horizon
        s.timeout = timeout
        s.max_attempts = max_attempts
        return _seal(s, cls)


def limits(job: Job, s: Settings) -> Limits:
    return Limits(
        max_checks=job.max_checks if job.max_checks is not None else s.max_checks,
        horizon=job.horizon if job.horizon is not None else s.horizon,
        timeout=job.timeout if job.timeout is not None else s.timeout,
        max_attempts=job.max_attempts if job.max_attempts is not None else s.max_attempts,
    )


def settled(job: Job, result: Result, lateness: float | None = None) -> End | None:
    """``decide``'s answer when it needs neither the clock nor the limits: the job answered
    done (nearly every callback), else None. A run asks this first, and reads its clock only
    for the other answers."""
    if result.answer is Answer.DONE and not result.deferred:
        return End(job, Outcome.DONE, _ok_reason(job, result), result, lateness)
    return None


def decide(job: Job, result: Result, now: datetime, s: Settings,
           lateness: float | None = None) -> Decision:
    done = settled(job, result, lateness)
    if done is not None:
        return done
    a = result.answer
    lim = limits(job, s)
    max_checks, horizon, max_attempts = lim.max_checks, lim.horizon, lim.max_attempts
    if result.deferred:
        return Reslot(job, next_slot_after(now, s.resolution), job.check_count, job.attempt,
                      result, result.error)
    if a is Answer.DONE:
        return End(job, Outcome.DONE, _ok_reason(job, result), result, lateness)
    if a is Answer.GONE:
        return End(job, Outcome.GONE, _ok_reason(job, result, "gone"), result, lateness)
    if a is Answer.RECHECK:
        at = result.recheck_at
        if at is None or at <= now:
            return End(job, Outcome.EXPIRED, "recheck_in_past", result, lateness)
        if at > now + timedelta(seconds=horizon):
            return End(job, Outcome.EXPIRED, "horizon", result, lateness)
        if job.check_count >= max_checks:
            return End(job, Outcome.EXPIRED, "max_checks", result, lateness)
        return Reslot(job, slot_for(at, s.resolution), job.check_count + 1, 0, result)
    if a is Answer.RETRY:
        used = job.attempt + 1
        if used >= max_attempts:
            return End(job, Outcome.FAILED, _fail_reason(result), result, lateness)
        delay = max(backoff_delay(used, s.backoff), result.retry_after or 0.0)
        if delay > horizon:
            return End(job, Outcome.FAILED, "retry_after_beyond_horizon", result, lateness)
        return Reslot(job, slot_for(now + timedelta(seconds=delay), s.resolution),
                      job.check_count, used, result)
    return End(job, Outcome.FAILED, _fail_reason(result), result, lateness)


def unstorable(d: Decision, why: str) -> End:
    """A decision the store refused to write for a value it holds (``Unstorable``: what the
    job answered, say): the job ends failed, saying so, with its answer's status and duration
    but none of its text. It was executed, and left pending its batch was re-sent each lease
    period, for ever."""
    r = d.result
    bare = None if r is None else Result(r.answer, status=r.status, duration=r.duration)
    return End(d.job, Outcome.FAILED, f"its result could not be stored: {why}", bare,
               d.lateness if isinstance(d, End) else None)


def quick_retry_delay(job: Job, result: Result, s: Settings) -> float | None:
    """Seconds to wait before retrying within this run, or None to leave it to a later slot.
    A fast retry absorbs a dropped connection without costing a slot; only a check's first
    failures get one (``quick_retries`` of them: ``job.attempt`` counts the attempts this check
    already used). A retry in every run would spend the attempts two a slot and never reach
    the long backoff steps."""
    used = job.attempt
    if result.answer is not Answer.RETRY or result.deferred or used >= s.quick_retries:
        return None
    if used + 1 >= limits(job, s).max_attempts:
        return None
    delay = max(0.2 * (used + 1), result.retry_after or 0.0)
    return delay if delay <= s.quick_retry_max_delay else None


def misfired(job: Job, now: datetime, s: Settings, grace_override: float | None = None,
             policy: MisfirePolicy | None = None) -> bool:
    """Under the ``skip`` misfire policy, a job whose slot passed more than the grace ago."""
    if (policy or s.misfire) != MisfirePolicy.SKIP:
        return False
    grace = job.misfire_grace if job.misfire_grace is not None else (
        grace_override if grace_override is not None else s.misfire_grace)
    if grace is None:
        grace = s.resolution * 60.0
    return (now - job.next_check_at).total_seconds() > grace


def _ok_reason(job: Job, result: Result, default: str = "ok") -> str:
    if job.kind is Kind.PYTHON:
        # the status is the worker's exit code, which says nothing: the function returned
        return "returned" if default == "ok" else f"returned {default}"
    if result.status is None:
        return default
    if job.kind is Kind.EXEC:
        return f"exit {result.status}"
    # an HTTP status is three digits: its reason is made once
    return _HTTP_REASONS.get(result.status) or _HTTP_REASONS.setdefault(
        result.status, f"http {result.status}")


_HTTP_REASONS: dict[int, str] = {}


def _fail_reason(result: Result) -> str:
    return (result.error or result.answer.value)[:200]
