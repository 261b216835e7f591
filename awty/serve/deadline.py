"""A whole request must arrive within ``serve_read_timeout`` (``--read-timeout``): its head and
its body, from its first byte (or from the connection, for the first request). uvicorn bounds
only the idle wait between requests (``timeout_keep_alive``): a client trickling a head or a
body a byte at a time (slowloris) would hold its connection, and a task, for ever.

Past the deadline the connection is closed: a request whose head never completed was never
seen by the app; one whose body was trickling sees the client gone (``body.read_bytes``). The
cost is one timer a request, armed when it begins and cancelled when its body is in, the
same as uvicorn's own keep-alive timer."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .coalesce import HeldHead


class ReadDeadline(HttpToolsProtocol):
    read_timeout = 30.0  # set by ``protocol``

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a TCP server's transport (uvicorn's signature says so; asyncio's names the base class);
        # uvicorn writes through HeldHead: a response's head and body in one write
        super().connection_made(cast(asyncio.Transport, HeldHead(cast(asyncio.Transport,
                                                                      transport))))
        self._deadline: asyncio.TimerHandle | None = self.loop.call_later(
            self.read_timeout, self._too_slow)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the first request's began with the connection
            self._deadline = self.loop.call_later(self.read_timeout, self._too_slow)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def on_response_complete(self) -> None:
        cast(HeldHead, self.transport).response_done()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol(read_timeout: float) -> type[Any]:
    """The HTTP protocol class uvicorn is given, with this deadline."""
    return type("ReadDeadline", (ReadDeadline,), {"read_timeout": read_timeout})
