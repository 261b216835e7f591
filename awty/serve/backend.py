"""The one ``Awty`` a serve process works on, used from one worker thread: the store's calls
never block the event loop, and never run two at once on its one connection (SQLite) or pool
(PostgreSQL). Every route calls the same ``Awty`` methods the CLI does."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..api import Awty

T = TypeVar("T")


class Backend:
    def __init__(self, awty: Awty) -> None:
        self.awty = awty
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="awty-store")

    async def run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``fn(awty, *args, **kw)`` in the store's thread."""
        call = functools.partial(fn, self.awty, *args, **kw)
        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    async def apart(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(awty, *args)`` on an ``Awty`` of its own, in a thread of its own: for what waits
        on the network (run now sends the callback), which must not hold the store's thread
        and every request queued behind it."""
        return await asyncio.to_thread(_apart, self.awty, fn, *args)

    def close(self) -> None:
        self.pool.submit(self.awty.close).result()
        self.pool.shutdown()


def fresh(a: Awty) -> Awty:
    """Another ``Awty`` on the same home and store, with its own connection."""
    from ..api import Awty

    url = a.settings.database_url
    if url:
        return Awty(a.home, a.clock, env=a.env, tz=a.tz, database_url=url)
    return Awty(a.home, a.clock, env=a.env, tz=a.tz)


def _apart(a: Awty, fn: Callable[..., T], *args: Any) -> T:
    own = fresh(a)
    try:
        return fn(own, *args)
    finally:
        own.close()
