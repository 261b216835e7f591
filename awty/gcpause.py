"""The cyclic garbage collector held off while a batch is made, and eased while a slot runs
(``running``, below).

A batch of N jobs makes several objects a job that live until it is stored (its spec, Job,
rows, ``Added`` and ``AddResult``), and every ~700 new objects the collector walks the young
ones; as they pile up, it walks all of them again and again (Python 3.11 runs a full pass each
time the survivors grow by a quarter). None of them is garbage, nor part of a cycle: for an
``add_many`` of 100,000 jobs those walks were ~6 of its ~20 µs CPU a job (BENCHMARKS.md,
``add_many``). The collector is process-wide: ``paused()`` counts the callers holding it off,
from any thread, and the last one out turns it back on, unless it was off before the first."""

from __future__ import annotations

import gc
import sys
import threading
from contextlib import contextmanager

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import Any


def _held(hold: Callable[[], Any], give_back: Callable[[Any], None]
          ) -> Callable[[], AbstractContextManager[None]]:
    """A process-wide setting held while any caller is inside, from any thread: the first in
    calls ``hold`` (what it returns is what the program had), the last one out ``give_back``
    with it. Counted, because batches overlap (threads of one process, nested calls) and the
    first one out must not give it back under the others."""
    lock = threading.Lock()
    state: list[Any] = [0, None]  # callers inside; what ``hold`` returned for the first

    @contextmanager
    def inside() -> Iterator[None]:
        with lock:
            if not state[0]:
                state[1] = hold()
            state[0] += 1
        try:
            yield
        finally:
            with lock:
                state[0] -= 1
                if not state[0]:
                    give_back(state[1])

    return inside


def _collector_off() -> bool:
    was = gc.isenabled()
    gc.disable()
    return was


paused = _held(_collector_off, lambda was: gc.enable() if was else None)


# A writer thread beside a batch's validation (PostgresStore.add_chunks, Awty._streamed) waits
# for the GIL up to the switch interval (5 ms) each time its block is sent: one 32 KB block of
# COPY data per 5 ms at worst, so the server was fed late: 0.4-0.6 s of 100,000 jobs' COPY
# still to go once their validation had ended (0.2-0.45 s at 0.5 ms). While a batch streams,
# the interval is 0.5 ms (the last one out puts back what the program had).
SWITCH = 0.0005


def _switch_quickly() -> float | None:
    """The program's interval, or None when it is no longer than ``SWITCH``: left as it is
    (set again, it would round down a microsecond)."""
    before = sys.getswitchinterval()
    if before <= SWITCH:
        return None
    sys.setswitchinterval(SWITCH)
    return before


quick_switches = _held(_switch_quickly,
                       lambda before: sys.setswitchinterval(before) if before else None)


# A run keeps each callback's Job, attempt, execution, result and decision alive a while
# (claimed in batches of 1,000, recorded a batch later), so the collector's young passes met
# them alive again and again, and its full passes walked everything the process had before
# the run besides (its imports, a library user's own objects): ~40-55 ms of a 10,000-job
# run's ~0.4 s of runner CPU on either store. A run is not run with the collector off: a
# callback can make cycles (an exception and its traceback, asyncio's), which must go.
RUN_GEN0 = 10_000


def _run_collector() -> tuple[tuple[int, int, int], bool]:
    """What exists as the run starts is left out of the collector's passes (``gc.freeze``:
    they are moved aside, not walked, and come back as they were) unless the program froze
    objects itself (``unfreeze`` would give back its own too), and a young pass comes after
    ``RUN_GEN0`` more objects than died, not 700: the program's thresholds and whether it
    froze, to give back."""
    thresholds, froze = gc.get_threshold(), not gc.get_freeze_count()
    if froze:
        gc.freeze()
    if thresholds[0]:  # 0: the program's collector runs only when asked
        gc.set_threshold(max(RUN_GEN0, thresholds[0]), *thresholds[1:])
    return thresholds, froze


def _collector_back(before: tuple[tuple[int, int, int], bool]) -> None:
    thresholds, froze = before
    gc.set_threshold(*thresholds)
    if froze:
        gc.unfreeze()


running = _held(_run_collector, _collector_back)
