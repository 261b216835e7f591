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

    def close(self) -> None:
        self.pool.submit(self.awty.close).result()
        self.pool.shutdown()
