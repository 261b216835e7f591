"""Job ids (``ids.new_id``): ULIDs of a job's first due time, whose text order is the firing
order in a slot; the ids one process makes for one moment go up in the order it makes them."""

from datetime import UTC, datetime, timedelta

import pytest

from awty import ids
from awty.ids import is_id, new_id

T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LOW80 = (1 << 80) - 1


def _int(job_id: str) -> int:
    n = 0
    for ch in job_id:
        n = n * 32 + ids._CROCKFORD.index(ch)
    return n


def test_ids_of_one_moment_go_up_in_the_order_they_are_made():
    a, b = T, T + timedelta(milliseconds=1)
    made = [new_id(b if i % 3 == 0 else a) for i in range(3000)]
    of_a = [x for i, x in enumerate(made) if i % 3]
    of_b = [x for i, x in enumerate(made) if i % 3 == 0]
    assert of_a == sorted(of_a) and of_b == sorted(of_b)
    assert len(set(made)) == len(made) and all(is_id(x) for x in made)
    assert max(of_a) < min(of_b)  # the time comes first
    assert {_int(x) >> 80 for x in of_a} == {int(a.timestamp() * 1000)}


def test_the_step_is_random_so_the_next_id_is_not_the_last_plus_one():
    parts = [_int(new_id(T + timedelta(milliseconds=7))) & LOW80 for _ in range(50)]
    steps = [q - p for p, q in zip(parts, parts[1:])]
    assert all(1 <= s <= 2 ** ids._STEP_BITS for s in steps)
    assert len(set(steps)) > 45


def test_a_random_part_near_the_top_starts_afresh():
    at = T + timedelta(milliseconds=9)
    ids._last[int(at.timestamp() * 1000)] = LOW80 - 3
    part = _int(new_id(at)) & LOW80
    assert part < 1 << ids._FRESH_BITS


def test_a_forked_child_makes_ids_of_its_own():
    import os

    at = T + timedelta(milliseconds=11)
    new_id(at)  # the parent has a last part for this moment and unused random bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its id for the same moment, to the parent
        try:
            os.write(write, new_id(at).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert is_id(child) and child != new_id(at)


@pytest.mark.slow
def test_threads_making_ids_at_once_never_make_the_same_one():
    import sys
    import threading

    at = T + timedelta(milliseconds=13)
    made: list[list[str]] = []
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=lambda: made.append([new_id(at) for _ in range(20000)]))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    every = [x for ids in made for x in ids]
    assert len(every) == 160000 and len(set(every)) == len(every)
    assert all(ids == sorted(ids) for ids in made)  # each thread's own, in the order made


def test_new_ids_are_the_ids_new_id_would_make_in_turn():
    """``new_ids`` (a claim's next occurrences): the same ids as as many ``new_id`` calls,
    going up among those made before and after it, with random steps."""
    at = T + timedelta(milliseconds=11)
    made = [new_id(at), *ids.new_ids(at, 500), new_id(at)]
    assert made == sorted(made) and len(set(made)) == 502 and all(is_id(x) for x in made)
    assert {_int(x) >> 80 for x in made} == {int(at.timestamp() * 1000)}
    parts = [_int(x) & LOW80 for x in made]
    steps = [q - p for p, q in zip(parts, parts[1:])]
    assert all(1 <= s <= 2 ** ids._STEP_BITS for s in steps) and len(set(steps)) > 450
    assert ids.new_ids(at, 0) == []
    near = T + timedelta(milliseconds=13)
    ids._last[int(near.timestamp() * 1000)] = LOW80 - 3
    fresh = ids.new_ids(near, 2)  # near the top: starts afresh, as new_id does
    assert all(_int(x) & LOW80 < LOW80 - 3 for x in fresh)


def test_new_ids_spell_each_part_as_new_id_does_across_their_shared_characters():
    """``new_ids`` spells the characters of bits 40-79 once while they stay the same: ids
    made across a change of them (and across the steps drawn at once) are each the ULID of
    their own part, as ``new_id`` spells it."""
    at = T + timedelta(milliseconds=17)
    ms = int(at.timestamp() * 1000)
    for below in (1, 3 << 32, 100 << 32):  # the change first, after a few, after ~200
        ids._last[ms] = (5 << 40) - below
        made = ids.new_ids(at, 600)
        parts = [_int(x) & LOW80 for x in made]
        assert made == [ids._head(ms) + "".join(ids._PAIRS[(p >> s) & 1023] for s in ids._LOW)
                        for p in parts]
        before = [(5 << 40) - below, *parts]
        assert {p >> 40 for p in before} >= {4, 5}  # across a change of bits 40-79
        steps = [q - p for p, q in zip(before, parts)]
        assert all(1 <= s <= 2 ** ids._STEP_BITS for s in steps) and len(set(steps)) > 590
        assert made == sorted(made) and all(is_id(x) for x in made)


def test_a_moment_in_use_keeps_its_order_past_the_moments_kept(monkeypatch):
    # A batch at many moments that comes back to one (4,200 jobs `in` 1..4199 s, then `in` 1):
    # its ids went below the ones made before for that moment when all were forgotten at once.
    monkeypatch.setattr(ids, "_MOMENTS", 64)
    ids._last.clear()
    first = T + timedelta(hours=3)
    made = [new_id(first)]
    for i in range(1, 1000):
        new_id(first + timedelta(seconds=i))
        if i % 20 == 0:  # the moment stays in use: never among the older half forgotten
            made.append(new_id(first))
            made.extend(ids.new_ids(first, 2))
    assert made == sorted(made) and len(set(made)) == len(made)
    assert len(ids._last) <= 64


def test_the_moments_kept_are_bounded_and_the_older_half_goes(monkeypatch):
    monkeypatch.setattr(ids, "_MOMENTS", 8)
    ids._last.clear()
    moments = [T + timedelta(days=2, milliseconds=i) for i in range(9)]
    for at in moments:
        new_id(at)
    kept = {datetime.fromtimestamp(ms / 1000, UTC) for ms in ids._last}
    assert kept == set(moments[4:])  # 8 kept, then the 9th: the 4 used longest ago go


def test_a_batch_at_many_moments_that_comes_back_to_one_keeps_its_order():
    ids._last.clear()
    first = T + timedelta(days=5)
    for _ in range(20):  # a fresh part is below the last one about half the time
        before = new_id(first)
        for i in range(1, 4200):
            new_id(first + timedelta(seconds=i))
        assert new_id(first) > before
