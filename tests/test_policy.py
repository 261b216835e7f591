"""Unit tables for the pure core: ``policy.decide`` at its boundaries, ``quick_retry_delay``,
``misfired`` and ``limits`` (no I/O, no clock: ``now`` is an argument)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awty.config import Settings
from awty.model import (
    Answer, End, Job, Kind, MisfirePolicy, Outcome, Reslot, Result, millis,
)
from awty.policy import Limits, decide, limits, misfired, quick_retry_delay, settled
from helpers import make_job

NOW = datetime(2026, 11, 22, 10, 15, 3, tzinfo=UTC)
S = Settings(resolution=15, max_checks=3, horizon=3600.0, max_attempts=3,
             backoff=(10.0, 600.0), quick_retries=1, quick_retry_max_delay=5.0)
SEC = timedelta(seconds=1)


def job(**kw) -> Job:
    return make_job(id="01JD4X0000000000000000000A", first=NOW, at=NOW.replace(second=0), **kw)


def at(delta: timedelta) -> datetime:
    return NOW + delta


@pytest.mark.parametrize("j, result, want", [
    # done and gone end the job, reason from the status
    (job(), Result(Answer.DONE, status=200), ("end", Outcome.DONE, "http 200")),
    (job(kind=Kind.EXEC), Result(Answer.DONE, status=0), ("end", Outcome.DONE, "exit 0")),
    (job(), Result(Answer.DONE), ("end", Outcome.DONE, "ok")),
    (job(), Result(Answer.GONE, status=410), ("end", Outcome.GONE, "http 410")),
    # recheck: a time not after now (the boundary included) is in the past
    (job(), Result(Answer.RECHECK, recheck_at=NOW), ("end", Outcome.EXPIRED, "recheck_in_past")),
    (job(), Result(Answer.RECHECK, recheck_at=None), ("end", Outcome.EXPIRED, "recheck_in_past")),
    (job(), Result(Answer.RECHECK, recheck_at=at(SEC)), ("reslot", 1, 0, NOW.replace(
        minute=30, second=0))),
    # the horizon: exactly at it still rechecks, a second past it expires
    (job(), Result(Answer.RECHECK, recheck_at=at(timedelta(hours=1))),
     ("reslot", 1, 0, NOW.replace(hour=11, minute=30, second=0))),
    (job(), Result(Answer.RECHECK, recheck_at=at(timedelta(hours=1) + SEC)),
     ("end", Outcome.EXPIRED, "horizon")),
    # max_checks: the third check may not ask for a fourth
    (job(check_count=2), Result(Answer.RECHECK, recheck_at=at(SEC)), ("reslot", 3, 0, None)),
    (job(check_count=3), Result(Answer.RECHECK, recheck_at=at(SEC)),
     ("end", Outcome.EXPIRED, "max_checks")),
    (job(check_count=3, max_checks=10), Result(Answer.RECHECK, recheck_at=at(SEC)),
     ("reslot", 4, 0, None)),
    # retry: backoff, then the last attempt fails
    (job(), Result(Answer.RETRY, status=503), ("reslot", 0, 1, NOW.replace(minute=30, second=0))),
    (job(attempt=1), Result(Answer.RETRY, status=503),
     ("reslot", 0, 2, NOW.replace(minute=30, second=0))),
    (job(attempt=2), Result(Answer.RETRY, status=503, error="http 503"),
     ("end", Outcome.FAILED, "http 503")),
    # Retry-After beyond the horizon fails now rather than wait past it
    (job(), Result(Answer.RETRY, retry_after=3600.0), ("reslot", 0, 1, None)),
    (job(), Result(Answer.RETRY, retry_after=3601.0),
     ("end", Outcome.FAILED, "retry_after_beyond_horizon")),
    (job(), Result(Answer.FAIL, status=404, error="http 404"), ("end", Outcome.FAILED, "http 404")),
    # a deferral (circuit open) moves to the next slot and counts nothing
    (job(check_count=1, attempt=1), Result(Answer.RETRY, deferred=True, error="breaker"),
     ("reslot", 1, 1, NOW.replace(minute=30, second=0))),
])
def test_decide(j, result, want):
    d = decide(j, result, NOW, S, lateness=3.0)
    if want[0] == "end":
        assert isinstance(d, End)
        assert (d.outcome, d.reason) == want[1:]
        assert d.lateness == 3.0 and d.result is result
    else:
        assert isinstance(d, Reslot)
        assert (d.check_count, d.attempt) == want[1:3]
        if want[3] is not None:
            assert d.next_check_at == want[3]
        assert d.next_check_at > NOW and d.next_check_at.minute % 15 == 0


@pytest.mark.parametrize("j, result, s, want", [
    (job(), Result(Answer.RETRY), S, 0.2),  # a check's first failure
    (job(attempt=1), Result(Answer.RETRY), S, None),  # quick_retries = 1: later ones back off
    (job(check_count=1, attempt=1), Result(Answer.RETRY), S, None),
    (job(check_count=1), Result(Answer.RETRY), S, 0.2),  # a new check: its first failure
    (job(attempt=1), Result(Answer.RETRY), S.replace(quick_retries=2, max_attempts=6), 0.4),
    (job(), Result(Answer.RETRY), S.replace(quick_retries=0), None),
    (job(), Result(Answer.RETRY, retry_after=4.0), S, 4.0),
    (job(), Result(Answer.RETRY, retry_after=6.0), S, None),  # beyond quick_retry_max_delay
    (job(), Result(Answer.RETRY), S.replace(max_attempts=1), None),  # the last attempt
    (job(), Result(Answer.RETRY, deferred=True), S, None),
    (job(), Result(Answer.FAIL), S, None),
    (job(), Result(Answer.DONE), S, None),
])
def test_quick_retry_delay(j, result, s, want):
    assert quick_retry_delay(j, result, s) == want


@pytest.mark.parametrize("late, policy, job_grace, grace, want", [
    (timedelta(minutes=20), None, None, None, False),  # fire is the default
    (timedelta(minutes=15), MisfirePolicy.SKIP, None, None, False),  # grace: one resolution
    (timedelta(minutes=15, seconds=1), MisfirePolicy.SKIP, None, None, True),
    (timedelta(minutes=15, seconds=1), MisfirePolicy.FIRE, None, None, False),
    (timedelta(seconds=61), MisfirePolicy.SKIP, None, 60.0, True),
    (timedelta(seconds=61), MisfirePolicy.SKIP, 120.0, 60.0, False),  # the job's own wins
])
def test_misfired(late, policy, job_grace, grace, want):
    j = job(misfire_grace=job_grace)
    assert misfired(j, j.next_check_at + late, S, grace, policy) is want


def test_limits_is_a_record_of_the_jobs_own_else_the_settings():
    assert limits(job(), S) == Limits(max_checks=3, horizon=3600.0, timeout=30.0, max_attempts=3)
    mine = limits(job(max_checks=9, horizon=60.0, timeout=2.0, max_attempts=1), S)
    assert mine == Limits(9, 60.0, 2.0, 1)
    with pytest.raises(AttributeError):
        mine.timeout = 5.0  # frozen


@given(kind=st.sampled_from(list(Kind)), answer=st.sampled_from(list(Answer)),
       status=st.none() | st.integers(0, 999), deferred=st.booleans(),
       error=st.none() | st.text(max_size=5), attempt=st.integers(0, 3),
       recheck=st.none() | st.integers(-7200, 7200), lateness=st.none() | st.floats(0, 1e4))
@settings(max_examples=300, deadline=None)
def test_settled_is_decides_answer_where_it_answers(kind, answer, status, deferred, error,
                                                    attempt, recheck, lateness):
    """The run asks ``settled`` before reading its clock: for a job that answered done it
    gives exactly what ``decide`` gives (reason from the kind and status), else nothing."""
    j = job(kind=kind, attempt=attempt)
    r = Result(answer, status=status, deferred=deferred, error=error,
               recheck_at=None if recheck is None else NOW + timedelta(seconds=recheck))
    got = settled(j, r, lateness)
    if answer is not Answer.DONE or deferred:
        assert got is None
        return
    assert got == decide(j, r, NOW, S, lateness)
    want = ("returned" if kind is Kind.PYTHON else "ok" if status is None
            else f"exit {status}" if kind is Kind.EXEC else f"http {status}")
    assert (got.outcome, got.reason, got.result, got.lateness) == (
        Outcome.DONE, want, r, lateness)


@given(st.floats() | st.floats(-1e7, 1e7)
       | st.integers(-10**13, 10**13).map(lambda us: us / 1e6)
       | st.integers(-10**13, 10**13).map(lambda us: (us + 0.5) / 1e6)
       | st.integers(-10**7, 10**7).map(lambda k: k / 2e6))
@settings(max_examples=2000, deadline=None)
def test_millis_is_round_to_the_microsecond(seconds):
    """An execution's milliseconds: bit for bit (sign, NaN, ties) what round gives."""
    assert repr(millis(seconds)) == repr(round(seconds * 1000, 3))
