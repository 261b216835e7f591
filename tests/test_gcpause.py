"""A batch is made with the cyclic collector held off (gcpause: its walks over the batch's live
objects were a quarter of add_many's CPU), and the process gets it back as it was: on after
the last caller leaves, from any thread, and off if it was off before."""

from __future__ import annotations

import gc
import threading

import pytest

from awty import gcpause
from awty.errors import InvalidInput
from helpers import URL


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


def test_paused_holds_the_collector_off_and_gives_it_back_after_an_error():
    with pytest.raises(RuntimeError):
        with gcpause.paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_off_before_stays_off():
    gc.disable()
    with gcpause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_last_caller_out_turns_it_back_on_whichever_thread_came_first():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with gcpause.paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with gcpause.paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_add_many_stores_with_the_collector_off_and_leaves_it_on(awty, monkeypatch):
    seen = []
    store_add = awty.store.add
    monkeypatch.setattr(awty.store, "add", lambda *a, **k: seen.append(gc.isenabled())
                        or store_add(*a, **k))
    specs = [{"target": URL, "in": "1h", "payload": {"n": i}} for i in range(5)]
    assert len(awty.add_many(specs)) == 5
    assert seen == [False]
    assert gc.isenabled()
    with pytest.raises(InvalidInput, match="line 2"):
        awty.add_many([specs[0], {"target": URL, "in": "soon"}])
    assert gc.isenabled()
    assert len(list(awty.list())) == 5


def test_quick_switches_last_one_out_puts_back_the_programs_interval():
    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.01)
    try:
        with gcpause.quick_switches():
            assert sys.getswitchinterval() == pytest.approx(gcpause.SWITCH)
            with gcpause.quick_switches():
                pass
            assert sys.getswitchinterval() == pytest.approx(gcpause.SWITCH)  # the outer batch still streams
        assert sys.getswitchinterval() == 0.01
        sys.setswitchinterval(0.0001)  # a program's own shorter interval is kept
        own = sys.getswitchinterval()  # (as the interpreter rounds it)
        with pytest.raises(RuntimeError), gcpause.quick_switches():
            assert sys.getswitchinterval() == own
            raise RuntimeError
        assert sys.getswitchinterval() == own
    finally:
        sys.setswitchinterval(before)


@pytest.fixture
def program_collector():
    """The collector as a program left it: default thresholds, nothing frozen."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_running_eases_the_collector_and_the_last_one_out_gives_it_back_after_an_error(
        program_collector):
    before_the_run: list[object] = []
    with pytest.raises(RuntimeError), gcpause.running():
        assert gc.get_threshold() == (gcpause.RUN_GEN0, 10, 10)
        frozen = gc.get_freeze_count()
        # what existed before the run is in none of the collector's generations
        assert frozen and all(o is not before_the_run for o in gc.get_objects())
        with gcpause.running():
            pass
        # the inner run's end leaves the outer one eased
        assert gc.get_threshold() == (gcpause.RUN_GEN0, 10, 10)
        assert gc.get_freeze_count() == frozen
        assert gc.isenabled()  # never off: a run's cycles still go
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    assert any(o is before_the_run for o in gc.get_objects())


def test_running_keeps_what_the_program_froze_and_its_own_settings(program_collector):
    programs: list[object] = []
    gc.freeze()
    with gcpause.running():
        assert gc.get_threshold()[0] == gcpause.RUN_GEN0
    # still frozen: not ours to give back
    assert gc.get_freeze_count() and all(o is not programs for o in gc.get_objects())
    gc.set_threshold(50_000, 20, 5)  # a program's own larger threshold is kept
    with gcpause.running():
        assert gc.get_threshold() == (50_000, 20, 5)
    gc.set_threshold(0, 10, 10)  # 0: automatic collection off stays off
    with gcpause.running():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_slot_runs_with_the_collector_eased_and_gives_it_back_after_a_failed_run(
        home, clock, rx, monkeypatch, program_collector):
    from datetime import timedelta

    from awty.api import Awty
    from awty.errors import StoreError
    from awty.slots import slot_for
    from helpers import T0

    seen = []
    with Awty(home, clock=clock, env={}) as a:
        claim = a.store.claim

        def watched(*args, **kw):
            seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0, gc.isenabled()))
            return claim(*args, **kw)

        monkeypatch.setattr(a.store, "claim", watched)
        a.add(rx.url("/j"), in_="5m")
        clock.set(slot_for(T0 + timedelta(minutes=5), 15) + timedelta(seconds=3))
        assert a.run_slot().outcomes == {"done": 1}
        assert seen and set(seen) == {(gcpause.RUN_GEN0, True, True)}
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0

        def broken(*args, **kw):
            raise StoreError("the store went away")

        monkeypatch.setattr(a.store, "claim", broken)
        a.add(rx.url("/j2"), in_="20m")
        clock.set(clock.now() + timedelta(minutes=30))
        with pytest.raises(StoreError):
            a.run_slot()
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
