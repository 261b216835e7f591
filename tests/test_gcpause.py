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
