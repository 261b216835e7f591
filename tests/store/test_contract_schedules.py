"""The store contract (awty/store/base.py), checked against every store. Recurring schedules:
add, pause, resume, remove, the occurrence a claim makes, missed occurrences, the (schedule,
occurrence) key, retry of an occurrence. Each test calls ``Store`` methods directly, on a fresh
store per test (see conftest.py); the suite's vocabulary is contractkit.py."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from awty.errors import Conflict
from awty.model import Job, Status
from awty.slots import iso
from contractkit import A, B, MIN, NOW, S1, S2, _next_id, add, claim, end, hold, ids, mk


def mk_schedule(name: str = "tick", *, cron: str = "*/5 * * * *", missed: str = "once",
                window: float = 86400.0, next_at: datetime = S1, **fields):
    from awty.model import Schedule

    template = mk(S1, headers={"X-Team": "ops"}, **fields)
    return Schedule(name, cron, None, None, "UTC", missed, window, 1, template, next_at,
                    None, NOW)


def test_import_of_a_schedule_name_taken_names_it_and_changes_nothing(store):
    """An imported schedule whose name the store holds: the refusal names the schedule (not
    a job id), the same on both stores, and nothing of the import is kept."""
    store.add_schedule(mk_schedule(), S1 - MIN)
    other = mk_schedule("other")
    with pytest.raises(Conflict) as e:
        store.import_home([mk(S2, schedule="other", occurrence=S2)], [None], [],
                          [other, mk_schedule(cron="0 * * * *", next_at=S2)])
    assert str(e.value) == "cannot import: schedule 'tick' already exists"
    assert [x.name for x in store.schedules()] == ["tick"]
    assert store.get_schedule("tick").cron == "*/5 * * * *"
    assert pending_of(store, "other") == []


def pending_of(store, name: str) -> list[Job]:
    return store.schedule_jobs(name)


def test_schedule_add_get_list(store):
    s = mk_schedule("b-tick")
    job = store.add_schedule(s, S1 - MIN)
    assert (job.schedule, job.occurrence, job.next_check_at) == ("b-tick", S1, S1)
    assert job.headers == {"X-Team": "ops"} and job.status is Status.PENDING
    got = store.get_schedule("b-tick")
    assert got.replace(template=s.template) == s
    t = got.template
    assert (t.kind, t.target, t.payload_json, t.headers) == (
        s.template.kind, s.template.target, s.template.payload_json, s.template.headers)
    store.add_schedule(mk_schedule("a-tick"), S1 - MIN)
    assert [x.name for x in store.schedules()] == ["a-tick", "b-tick"]
    assert store.get(job.id).occurrence == S1
    assert store.get_schedule("nope") is None


def test_schedule_name_taken_changes_nothing(store):
    store.add_schedule(mk_schedule(), S1 - MIN)
    with pytest.raises(Conflict, match="already exists"):
        store.add_schedule(mk_schedule(cron="0 * * * *", next_at=S2), S1 - MIN)
    assert store.get_schedule("tick").cron == "*/5 * * * *"
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1]


def test_one_job_per_occurrence_is_a_store_key(store):
    job = store.add_schedule(mk_schedule(), S1 - MIN)
    twin = job.replace(id=_next_id())
    # named as the occurrence it is (a dropped-in envelope of it), not as an id taken
    with pytest.raises(Conflict, match=f"^cannot add: job {twin.id} is the "
                       f"{iso(S1)} occurrence of schedule tick, which job {job.id} holds"):
        add(store, twin)
    # a batch naming one occurrence twice: the second job names the first
    one = twin.replace(id=_next_id(), occurrence=S2)
    other = one.replace(id=_next_id())
    with pytest.raises(Conflict, match=f"job {other.id} is the {iso(S2)} occurrence of "
                       f"schedule tick, which job {one.id} holds"):
        add(store, one, other)
    assert ids(pending_of(store, "tick")) == [job.id]


def test_a_claim_of_a_paused_schedules_occurrence_moves_it_past(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.retry(first.id, S1, S1 - MIN)  # the user's ask: it fires, paused or not
    (got,) = claim(store, S1, now=S1)
    assert got.id == first.id and pending_of(store, "tick") == [got]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    store.finish([end(got)], owner=A, now=S1)
    assert store.resume_schedule("tick", S1).next_at == S1 + 5 * MIN
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1 + 5 * MIN]


def test_retry_of_a_cancelled_occurrence_moved_past_is_refused(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.resume_schedule("tick", S1 - MIN)  # makes the occurrence anew
    (again,) = claim(store, S1, now=S1)
    store.finish([end(again)], owner=A, now=S1)  # fired: the schedule is at 10:05
    with pytest.raises(Conflict, match=f"job {first.id} is the {iso(S1)} occurrence of "
                       f"schedule tick, which has moved on to {iso(S1 + 5 * MIN)}"):
        store.retry(first.id, S2, S1)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1 + 5 * MIN]


def test_claim_makes_the_next_occurrence_in_its_transaction(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    got = claim(store, S1, now=S1)
    assert ids(got) == [first.id] and got[0].occurrence == S1
    after = pending_of(store, "tick")
    assert [(j.occurrence, j.next_check_at, j.status) for j in after] == [
        (S1, S1, Status.IN_FLIGHT), (S1 + 5 * MIN, S1 + 5 * MIN, Status.PENDING)]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    nxt = after[1]
    assert nxt.headers == {"X-Team": "ops"} and nxt.id != first.id
    # the occurrence's own end names the schedule in history
    store.finish([end(got[0])], owner=A, now=S1)
    (row,) = store.get_history(first.id)
    assert row.schedule == "tick"


def test_a_claim_of_many_schedules_makes_each_next_occurrence_as_it_would_alone(store):
    """A claim makes the next occurrences of schedules sharing a rule and a template from one
    job made once (``schedrules.plan``, ``ClaimPlan.alike``): each row is the job
    ``occurrence_job`` makes for its schedule on its own, but for a fresh id of its slot."""
    from awty.ids import is_id
    from awty.recurrence import next_occurrence
    from awty.store.schedrules import occurrence_job, rule_of

    ops = mk_schedule().template
    dev = ops.replace(id=_next_id(), headers={"X-Team": "dev"})
    kinds = {"a": (ops, "*/5 * * * *", None), "b": (dev, "*/5 * * * *", None),
             "c": (ops, "*/10 * * * *", None), "d": (ops, None, 420)}
    made = {}
    for i in range(14):
        template, cron, every = kinds["abcd"[i % 4]]
        s = mk_schedule(f"{'abcd'[i % 4]}{i:02d}", cron=cron).replace(
            template=template, every=every, start=S1 if every else None)
        store.add_schedule(s, S1 - MIN)
        made[s.name] = store.get_schedule(s.name)
    got = claim(store, S1, now=S1)
    assert sorted(j.schedule for j in got) == sorted(made)
    seen = set()
    for name, s in made.items():
        nxt = next_occurrence(rule_of(s), S1)
        assert store.get_schedule(name).next_at == nxt
        (job,) = [j for j in pending_of(store, name) if j.status is Status.PENDING]
        want = occurrence_job(s, nxt, S1)
        assert job.replace(id=want.id) == want, name
        assert is_id(job.id) and job.id[:10] == want.id[:10] and job.id not in seen
        seen.add(job.id)
    assert {j.occurrence for j in pending_of(store, "d03")} == {S1, S1 + 7 * MIN}
    assert {j.headers["X-Team"] for j in pending_of(store, "b01")} == {"dev"}


def test_a_claim_taken_over_makes_no_second_occurrence(store):
    store.add_schedule(mk_schedule(), S1 - MIN)
    (job,) = claim(store, S1, now=S1, owner=A, lease=MIN)
    # A vanished (never held a session): its lease runs out and B takes the claim over
    (again,) = claim(store, S1, now=S1 + 2 * MIN, owner=B)
    assert again.id == job.id
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN


def test_runners_stopped_3h_missed_once(store):
    store.add_schedule(mk_schedule(missed="once"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (job,) = claim(store, S1, now=late)
    assert job.occurrence == S1
    (row,) = store.history(outcome="skipped")
    assert row.schedule == "tick"
    assert row.reason.startswith("35 occurrences missed 2026-11-22 10:05–12:55 (UTC), "
                                 "policy once"), row.reason
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, late]


def test_runners_stopped_3h_missed_skip(store):
    store.add_schedule(mk_schedule(missed="skip"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    assert claim(store, S1, now=late) == []
    (row,) = store.history(outcome="skipped")
    assert row.reason.startswith("36 occurrences missed"), row.reason
    assert [j.occurrence for j in pending_of(store, "tick")] == [late]


def test_runners_stopped_3h_missed_all(store):
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (job,) = claim(store, S1, now=late)
    assert job.occurrence == S1
    assert list(store.history(outcome="skipped")) == []
    made = pending_of(store, "tick")
    assert [j.occurrence for j in made] == [S1 + i * 5 * MIN for i in range(37)]
    # the missed ones fire in the next slot, the one after in its own
    assert {j.next_check_at for j in made[1:]} == {late + MIN}


def test_retry_of_a_missed_occurrence_a_pause_cancelled(store):
    """`--missed all` made a job of a missed occurrence as the schedule moved past it; a
    pause cancels it: no other job of it can ever be made, so retry makes it again (once),
    and resume does not; the pending occurrence a pause cancelled stays refused once the
    schedule has fired it anew."""
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(hours=3)
    (first,) = claim(store, S1, now=late)
    store.finish([end(first)], owner=A, now=late)
    made = {j.occurrence: j for j in pending_of(store, "tick")}
    at = store.get_schedule("tick").next_at
    missed = made[S1 + 10 * MIN]
    store.pause_schedule("tick", late)
    (row,) = store.get_history(missed.id)
    assert row.reason == f"schedule tick paused (its missed {iso(S1 + 10 * MIN)} occurrence)"
    assert store.get_history(made[at].id)[0].reason == "schedule tick paused"
    again = store.retry(missed.id, late + MIN, late)
    assert (again.id, again.occurrence) == (missed.id, S1 + 10 * MIN)
    with pytest.raises(Conflict):  # pending already
        store.retry(missed.id, late + MIN, late)
    store.resume_schedule("tick", late)
    assert sorted(j.occurrence for j in pending_of(store, "tick")) == [S1 + 10 * MIN, at]
    (pending,) = [j for j in pending_of(store, "tick") if j.occurrence == at]
    # both fire: the retried missed one and the pending occurrence made anew at resume
    slot = pending.next_check_at
    got = claim(store, slot, now=max(slot, late + MIN))
    assert sorted(ids(got)) == sorted([missed.id, pending.id])
    store.finish([end(j) for j in got], owner=A, now=max(slot, late + MIN))
    assert store.get_schedule("tick").next_at > at
    assert [j.occurrence for j in pending_of(store, "tick")] == [store.get_schedule(
        "tick").next_at]
    # the pending occurrence the pause cancelled, fired by the job resume made: refused
    with pytest.raises(Conflict, match=f"job {made[at].id} is the {iso(at)} occurrence of "
                       "schedule tick, which has moved on"):
        store.retry(made[at].id, at + MIN, at)


def test_unarmed_schedules_are_the_live_ones_without_their_occurrence(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.add_schedule(mk_schedule("off"), S1 - MIN)
    store.pause_schedule("off", S1 - MIN)
    assert store.unarmed_schedules() == []
    store.cancel([first.id], S1 - MIN)
    assert store.unarmed_schedules() == ["tick"]
    store.resume_schedule("tick", S1 - MIN)
    assert store.unarmed_schedules() == []
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1]


def test_pause_resume_remove_schedule(store):
    from awty.errors import ScheduleNotFound

    first = store.add_schedule(mk_schedule(), S1 - MIN)
    paused = store.pause_schedule("tick", S1 - MIN)
    assert paused.paused_at is not None and pending_of(store, "tick") == []
    assert store.get_history(first.id)[0].reason == "schedule tick paused"
    assert claim(store, S1, now=S1) == []
    resumed = store.resume_schedule("tick", S1 + 12 * MIN)
    assert resumed.paused_at is None
    (again,) = pending_of(store, "tick")
    # the occurrence missed while paused is due at once; its claim applies the policy
    assert (again.occurrence, again.next_check_at) == (S1, S1 + 13 * MIN)
    assert store.resume_schedule("tick", S1 + 12 * MIN) and len(pending_of(store, "tick")) == 1
    (fired,) = claim(store, S1 + 13 * MIN, now=S1 + 13 * MIN)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 15 * MIN]
    store.finish([end(fired)], owner=A, now=S1 + 13 * MIN)
    result = store.remove_schedule("tick", S1 + 14 * MIN)
    assert [result.jobs[i].occurrence for i in result.cancelled] == [S1 + 15 * MIN]
    assert store.get_schedule("tick") is None and pending_of(store, "tick") == []
    with pytest.raises(ScheduleNotFound):
        store.pause_schedule("tick", S1)


# The (schedule, occurrence) key met by a claim, an arm, an add or a retry: a job the store holds
# for an occurrence is that occurrence's job (a home moved while its runner claimed, a retried
# occurrence, a job left in flight by a removed schedule of the same name).
def occurrence_job(name: str, at: datetime, slot: datetime = S1) -> Job:
    return mk(slot, schedule=name, occurrence=at)


def test_a_claim_whose_next_occurrence_has_a_pending_job_keeps_it(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    assert ids(claim(store, S1, now=S1)) == [first.id]
    assert [(j.id, j.occurrence) for j in pending_of(store, "tick")] == [
        (first.id, S1), (held.id, S1 + 5 * MIN)]
    assert store.get_schedule("tick").next_at == S1 + 5 * MIN
    # that job is the occurrence's: its claim moves the schedule on
    assert ids(claim(store, S2, now=S2)) == [held.id]
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN,
                                                                 S1 + 10 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 10 * MIN


def test_a_claim_whose_next_occurrence_is_in_flight_moves_past_it(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    # claimed while it was not the pending occurrence: no claim of it moves the schedule on
    assert ids(store.claim_ids([held.id], now=S1, owner=B, lease_until=S1 + MIN)) == [held.id]
    assert ids(claim(store, S1, now=S1)) == [first.id]
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN,
                                                                 S1 + 10 * MIN]
    assert store.get_schedule("tick").next_at == S1 + 10 * MIN
    assert store.unarmed_schedules() == []


def test_missed_all_makes_no_second_job_of_a_held_occurrence(store):
    store.add_schedule(mk_schedule(missed="all"), S1 - MIN)
    late = S1 + timedelta(minutes=30)
    (held,) = add(store, occurrence_job("tick", S1 + 10 * MIN, S2))
    claim(store, S1, now=late)
    made = [j.occurrence for j in pending_of(store, "tick")]
    assert sorted(made) == [S1 + i * 5 * MIN for i in range(7)], made
    assert store.get_schedule("tick").next_at == S1 + 30 * MIN


@pytest.mark.slow
def test_add_and_resume_take_a_held_occurrence_as_it_is(store, case, holders):
    hold(case, holders, B)
    job = store.add_schedule(mk_schedule(), S1 - MIN)
    store.claim_ids([job.id], now=S1 - MIN, owner=B, lease_until=S1 + MIN)
    store.start([job.id], owner=B, now=S1 - MIN)
    # removed while its occurrence is in flight, then added again: the job in flight is S1's
    store.remove_schedule("tick", S1 - MIN)
    again = store.add_schedule(mk_schedule(), S1 - MIN)
    assert (again.occurrence, store.get_schedule("tick").next_at) == (S1 + 5 * MIN,
                                                                       S1 + 5 * MIN)
    assert [j.occurrence for j in pending_of(store, "tick")] == [S1, S1 + 5 * MIN]
    # a pending one is the occurrence's job: resume (doctor --repair) makes none
    store.pause_schedule("tick", S1 - MIN)
    (held,) = add(store, occurrence_job("tick", S1 + 5 * MIN, S2))
    resumed = store.resume_schedule("tick", S1 - MIN)
    assert resumed.next_at == S1 + 5 * MIN
    assert [j.id for j in pending_of(store, "tick") if j.status is Status.PENDING] == [held.id]


def test_retry_of_an_occurrence_held_again_is_refused(store):
    first = store.add_schedule(mk_schedule(), S1 - MIN)
    store.pause_schedule("tick", S1 - MIN)  # cancels it
    store.resume_schedule("tick", S1 - MIN)  # makes the occurrence anew
    (again,) = pending_of(store, "tick")
    assert again.occurrence == S1 and again.id != first.id
    with pytest.raises(Conflict, match=f"occurrence of schedule tick, which job {again.id} "):
        store.retry(first.id, S2, S1 - MIN)
    assert ids(pending_of(store, "tick")) == [again.id]
