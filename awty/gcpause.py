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
