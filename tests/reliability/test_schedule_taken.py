"""Issue 32: the (schedule, occurrence) key met by real ``awty`` processes, on each store
(``backend``), the clock pinned per process (``AWTY_NOW``), callbacks to a real receiver. A job
the store already holds for an occurrence is that occurrence's job: the command goes on, never a
traceback, and each occurrence is delivered once.

- a home moved while its runner claimed: the export read the schedule before the claim and its
  jobs after it (the next occurrence's job is there); ``catchup`` or ``run-slot`` in the new home;
- a schedule removed and added again while a job of a later occurrence is pending (an occurrence
  run early by ``awty run``, cancelled by the remove, re-armed by ``awty retry``): the claim of
  the occurrence before it re-arms onto that job;
- ``awty retry`` of an occurrence cancelled by ``schedule pause`` after ``resume`` made it anew:
  refused in one line, nothing changed; ``schedule run`` beside it is no occurrence;
- ``awty retry`` of an occurrence cancelled by ``schedule pause`` while still paused: it fires
  once, ``resume`` goes on after it; with ``doctor --repair``, a retry after ``resume`` and
  ``remove`` + ``add`` again around it;
- a dropped-in envelope naming a held occurrence: set aside, the occurrence fires once.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import iso
from awty.testing.receiver import Receiver
from relkit import cli_env, run_cli

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)
SETTINGS = {"resolution": 1, "timeout": 5}
CRON = ["--cron", "*/5 * * * *", "--tz", "UTC"]


def _awty(home, backend, now, *args, rc: int = 0):
    env = {**cli_env(home, now, **SETTINGS), **(backend.env if backend else {})}
    res = run_cli(list(args), env)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == rc, res.stderr
    return res


def _delivered(rx) -> Counter:
    return Counter(r.headers.get("x-awty-occurrence") for r in rx.requests("/s"))


def _at(minutes: int) -> str:
    return iso(T0 + minutes * MIN)


def _state(home, backend, now):
    """(the schedule's next_at, its jobs as (occurrence, status)), read as any process would."""
    with Awty(home, clock=FixedClock(now), env={}, **backend.kw) as a:
        assert a.store.unarmed_schedules() == []
        return a.get_schedule("tick").next_at, [
            (j.occurrence, j.status.value) for j in a.store.schedule_jobs("tick")]


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("command", ["catchup", "run-slot"])
def test_a_home_moved_while_its_runner_claimed(home, backend, tmp_path, command):
    old = tmp_path / "old"
    before, after, moved = (tmp_path / f"{n}.jsonl" for n in ("before", "after", "moved"))
    with Receiver() as rx:
        _awty(old, None, T0 - 30 * SEC, "schedule", "add", "tick", rx.url("/s"), *CRON)
        _awty(old, None, T0 - 20 * SEC, "export", "--output", str(before))
        _awty(old, None, T0 + SEC, "run-slot")  # claims 10:00, makes 10:05, sends 10:00
        _awty(old, None, T0 + 20 * SEC, "export", "--output", str(after))
        # What one export reads when that claim comes between its read of the schedules and
        # its read of the jobs: the schedule at 10:00, the jobs of 10:00 and 10:05.
        first, schedule, job, _ = _lines(before)
        jobs = [d for d in _lines(after) if "job" in d]
        assert [d["job"]["occurrence"] for d in jobs] == [_at(5)]
        moved.write_text("".join(json.dumps(d) + "\n" for d in [
            first, schedule, job, *jobs, {"end": {"jobs": 2, "history": 0, "schedules": 1}}]))
        assert _delivered(rx) == Counter({_at(0): 1})
        _awty(home, backend, T0 + 30 * SEC, "import", str(moved))
        # 10:00 is sent again by the new home (the old one claimed it after the export read
        # it: "stop the runners before moving a home"); 10:05 is made once, not twice.
        _awty(home, backend, T0 + 5 * MIN + SEC, command)
        _awty(home, backend, T0 + 10 * MIN + SEC, "run-slot")
        assert _delivered(rx) == Counter({_at(0): 2, _at(5): 1, _at(10): 1})
    assert _state(home, backend, T0 + 11 * MIN) == (T0 + 15 * MIN, [(T0 + 15 * MIN, "pending")])


def test_a_claim_re_arms_onto_a_job_its_next_occurrence_has(home, backend):
    t = T0 + 2 * MIN
    with Receiver() as rx:
        _awty(home, backend, t, "schedule", "add", "tick", rx.url("/s"), *CRON)
        with Awty(home, clock=FixedClock(t), env={}, **backend.kw) as a:
            (early,) = a.store.schedule_jobs("tick")
        _awty(home, backend, t + 10 * SEC, "run", early.id)  # 10:05 now; makes 10:10
        _, jobs = _state(home, backend, t + 10 * SEC)
        with Awty(home, clock=FixedClock(t), env={}, **backend.kw) as a:
            (ten,) = [j.id for j in a.store.schedule_jobs("tick")]
        _awty(home, backend, t + 20 * SEC, "schedule", "remove", "tick")  # cancels 10:10
        _awty(home, backend, t + 30 * SEC, "schedule", "add", "tick", rx.url("/s"), *CRON)
        _awty(home, backend, t + 40 * SEC, "retry", ten)  # 10:10 pending again, in 10:03
        assert _state(home, backend, t + 40 * SEC) == (T0 + 5 * MIN, [
            (T0 + 10 * MIN, "pending"), (T0 + 5 * MIN, "pending")])
        # run-slot runs its slot (10:05) first: that claim re-arms 10:10, whose job is there;
        # then the late slot 10:03 sends 10:10, and its claim re-arms 10:15.
        _awty(home, backend, T0 + 5 * MIN + SEC, "run-slot")
        assert _state(home, backend, T0 + 5 * MIN + SEC) == (
            T0 + 15 * MIN, [(T0 + 15 * MIN, "pending")])
        for m in (10, 15):
            _awty(home, backend, T0 + m * MIN + SEC, "run-slot")
        # 10:05 twice: once run early, once by the schedule added again
        assert _delivered(rx) == Counter({_at(5): 2, _at(10): 1, _at(15): 1})


def test_retry_of_an_occurrence_made_anew_is_refused_in_one_line(home, backend):
    with Receiver() as rx:
        _awty(home, backend, T0 - 30 * SEC, "schedule", "add", "tick", rx.url("/s"), *CRON)
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            (cancelled,) = a.store.schedule_jobs("tick")
        _awty(home, backend, T0 - 25 * SEC, "schedule", "pause", "tick")
        _awty(home, backend, T0 - 20 * SEC, "schedule", "resume", "tick")
        _, jobs = _state(home, backend, T0 - 20 * SEC)
        assert jobs == [(T0, "pending")]
        res = _awty(home, backend, T0 - 10 * SEC, "retry", cancelled.id, rc=1)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert f"the {_at(0)} occurrence of schedule tick" in res.stderr
        assert _state(home, backend, T0 - 10 * SEC) == (T0, jobs)
        _awty(home, backend, T0 + SEC, "run-slot")
        _awty(home, backend, T0 + 30 * SEC, "schedule", "run", "tick")  # beside: no occurrence
        assert _delivered(rx) == Counter({_at(0): 1, None: 1})
    assert _state(home, backend, T0 + MIN) == (T0 + 5 * MIN, [(T0 + 5 * MIN, "pending")])


def test_an_occurrence_retried_while_paused_fires_once(home, backend):
    """``schedule pause`` cancels the pending occurrence (10:00); ``retry`` of it while paused
    is the user's ask, so it fires, and ``resume`` does not make it again. Its neighbours:
    ``doctor --repair`` while paused makes nothing; a retry after ``resume`` (of the fired
    job, or of one cancelled again), and ``remove`` + ``add`` again, send 10:00 no more."""
    with Receiver() as rx:
        _awty(home, backend, T0 - 30 * SEC, "schedule", "add", "tick", rx.url("/s"), *CRON)
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            (ten,) = a.store.schedule_jobs("tick")
        _awty(home, backend, T0 - 25 * SEC, "schedule", "pause", "tick")
        _awty(home, backend, T0 - 20 * SEC, "retry", ten.id)
        _awty(home, backend, T0 - 15 * SEC, "doctor", "--repair")
        assert _state(home, backend, T0 - 15 * SEC) == (T0, [(T0, "pending")])
        _awty(home, backend, T0 + SEC, "run-slot")  # 10:00 fires, the schedule paused
        assert _delivered(rx) == Counter({_at(0): 1})
        # the schedule moved past 10:00 (making nothing: it is paused)
        assert _state(home, backend, T0 + 10 * SEC) == (T0 + 5 * MIN, [])
        _awty(home, backend, T0 + 20 * SEC, "doctor", "--repair")
        assert _state(home, backend, T0 + 20 * SEC) == (T0 + 5 * MIN, [])
        _awty(home, backend, T0 + 30 * SEC, "schedule", "resume", "tick")
        assert _state(home, backend, T0 + 30 * SEC) == (T0 + 5 * MIN, [(T0 + 5 * MIN, "pending")])
        _awty(home, backend, T0 + 40 * SEC, "retry", ten.id, rc=1)  # it ended done
        _awty(home, backend, T0 + 5 * MIN + SEC, "run-slot")
        assert _delivered(rx) == Counter({_at(0): 1, _at(5): 1})
        # 10:10 cancelled by a pause, made again by resume and fired: its cancelled job is
        # refused after that, whichever job fired it
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            (tenten,) = a.store.schedule_jobs("tick")
        _awty(home, backend, T0 + 6 * MIN, "schedule", "pause", "tick")
        _awty(home, backend, T0 + 6 * MIN + SEC, "schedule", "resume", "tick")
        _awty(home, backend, T0 + 10 * MIN + SEC, "run-slot")
        assert _delivered(rx) == Counter({_at(0): 1, _at(5): 1, _at(10): 1})
        res = _awty(home, backend, T0 + 11 * MIN, "retry", tenten.id, rc=1)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert f"the {_at(10)} occurrence of schedule tick" in res.stderr, res.stderr
        # remove + add again: a new schedule from now on; the old occurrences stay sent
        _awty(home, backend, T0 + 12 * MIN, "schedule", "remove", "tick")
        _awty(home, backend, T0 + 12 * MIN + SEC, "schedule", "add", "tick", rx.url("/s"),
              *CRON)
        _awty(home, backend, T0 + 12 * MIN + 2 * SEC, "retry", tenten.id, rc=1)
        _awty(home, backend, T0 + 12 * MIN + 3 * SEC, "retry", ten.id, rc=1)
        _awty(home, backend, T0 + 15 * MIN + SEC, "run-slot")
        assert _delivered(rx) == Counter({_at(0): 1, _at(5): 1, _at(10): 1, _at(15): 1})
    assert _state(home, backend, T0 + 16 * MIN) == (T0 + 20 * MIN, [(T0 + 20 * MIN, "pending")])




def test_a_dropped_in_envelope_of_a_held_occurrence_is_set_aside(home):
    """An envelope naming a schedule's pending occurrence is no second job of it: the envelope
    format has no ``schedule`` or ``occurrence`` (only awty makes occurrences), so it is set
    aside naming those fields, and the occurrence fires once. SQLite only: a PostgreSQL home
    has no slot tree to drop files in. (The store's own refusal of a second job of an
    occurrence names it: tests/store/test_contract_schedules.py.)"""
    from awty.slots import slot_id
    from awty.slottree.tree import SlotTree

    with Receiver() as rx:
        _awty(home, None, T0 - 30 * SEC, "schedule", "add", "tick", rx.url("/s"), *CRON)
        sd = home / "slots" / slot_id(T0)
        sd.mkdir(parents=True, exist_ok=True)
        (sd / "twin.json").write_text(json.dumps(
            {"target": rx.url("/s"), "schedule": "tick", "occurrence": _at(0)}))
        _awty(home, None, T0 + SEC, "run-slot")
        assert len(rx.requests("/s")) == 1
        assert _delivered(rx) == Counter({_at(0): 1})
    (r,) = SlotTree(home).rejected_files()
    assert (r.path.name, r.reason) == ("twin.json", "unknown field(s): 'occurrence', 'schedule'")
