"""The cyclic garbage collector held off while a batch is made.

A batch of N jobs makes several objects a job that live until it is stored (its spec, Job,
rows, ``Added`` and ``AddResult``), and every ~700 new objects the collector walks the young
ones; as they pile up, it walks all of them again and again (Python 3.11 runs a full pass each
time the survivors grow by a quarter). None of them is garbage, nor part of a cycle: for an
``add_many`` of 100,000 jobs those walks were ~6 of its ~20 µs CPU a job (BENCHMARKS.md,
``add_many``). The collector is process-wide: ``paused()`` counts the callers holding it off,
from any thread, and the last one out turns it back on, unless it was off before the first."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_held = [0, False]  # callers inside paused(); whether the collector was on when the first came


@contextmanager
def paused() -> Iterator[None]:
    with _lock:
        if not _held[0]:
            _held[1] = gc.isenabled()
            gc.disable()
        _held[0] += 1
    try:
        yield
    finally:
        with _lock:
            _held[0] -= 1
            if not _held[0] and _held[1]:
                gc.enable()


# A writer thread beside a batch's validation (PostgresStore.add_chunks, Awty._streamed) waits for the GIL up
# to the switch interval (5 ms) each time its block is sent: one 32 KB block of COPY data per
# 5 ms at worst, so the server was fed late: 0.4-0.6 s of 100,000 jobs' COPY still to go once
# their validation had ended (0.2-0.45 s at 0.5 ms). While a batch streams, the interval is
# 0.5 ms (the last one out puts back what the program had).
SWITCH = 0.0005
_switch_lock = threading.Lock()
# callers inside quick_switches(); the interval before the first, if it was changed (a
# program's shorter one is left as it is: set again, it would round down a microsecond)
_switching: list[int | float | None] = [0, None]


@contextmanager
def quick_switches() -> Iterator[None]:
    import sys

    with _switch_lock:
        if not _switching[0]:
            before = sys.getswitchinterval()
            _switching[1] = before if before > SWITCH else None
            if _switching[1] is not None:
                sys.setswitchinterval(SWITCH)
        _switching[0] += 1  # type: ignore[operator]
    try:
        yield
    finally:
        with _switch_lock:
            _switching[0] -= 1  # type: ignore[operator]
            if not _switching[0] and _switching[1] is not None:
                sys.setswitchinterval(_switching[1])
