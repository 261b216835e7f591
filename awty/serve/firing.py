"""``awty serve --run-slots``: where there is no cron, serve fires the slots itself: a catch-up
at start, then each slot at its boundary, each run as ``run-slot`` does it, through the same
slot locks and leases, so serve processes and cron runners on any number of hosts never fire a
job twice. Each run opens its own ``Awty`` in a thread of its own: the API's store thread is
never held by a run."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..errors import AwtyError, Busy
from ..slots import next_slot_after
from .backend import fresh

if TYPE_CHECKING:
    from ..api import Awty

IDLE = 60.0  # seconds between looks when the clock stands still (AWTY_NOW)


def _run(a: Awty, catchup: bool) -> None:
    run = fresh(a)
    try:
        if catchup:
            run.catchup()
        else:
            run.run_slot()
    except Busy:
        pass  # another runner (cron's, another serve) holds the slot: it fires it
    except AwtyError as e:
        run.logger().warning(f"serve --run-slots: {e}")
    finally:
        run.close()


async def fire_slots(a: Awty, stop: asyncio.Event) -> None:
    """Catch up, then run each slot once its boundary has passed, until ``stop`` is set."""
    await asyncio.to_thread(_run, a, True)
    boundary = next_slot_after(a.clock.now(), a.settings.resolution)
    while not stop.is_set():
        wait = (boundary - a.clock.now()).total_seconds()
        if wait > 0:
            try:
                await asyncio.wait_for(stop.wait(), min(wait, IDLE))
                return
            except TimeoutError:
                continue
        await asyncio.to_thread(_run, a, False)
        boundary = next_slot_after(max(boundary, a.clock.now()), a.settings.resolution)
