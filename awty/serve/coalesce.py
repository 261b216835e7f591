"""One write a response: uvicorn writes a response's head and its body to the socket apart,
two system calls and two wake-ups of the client for every answer (``POST /v1/jobs``' is a few
hundred bytes). ``HeldHead`` stands for the connection's transport in uvicorn's protocol and
holds a response's head until its body's first write, then writes both at once (``writelines``:
one ``writev``, the body not copied).

Only the first write of each response is held, and only until the next write, the response's
end or the connection's close, whichever comes first: an interim ``100 Continue`` goes out at
once, and so does everything after the head."""

from __future__ import annotations

import asyncio
from typing import Any


class HeldHead:
    __slots__ = ("transport", "head", "expecting")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.head: bytes | None = None
        self.expecting = True  # the next write begins a response

    def write(self, data: bytes) -> None:
        if self.head is not None:
            head, self.head = self.head, None
            self.transport.writelines((head, data))
        elif self.expecting and not data.startswith(b"HTTP/1.1 1"):
            self.head, self.expecting = data, False
        else:
            self.transport.write(data)

    def response_done(self) -> None:
        """The response is whole (the protocol's ``on_response_complete``)."""
        self.flush()
        self.expecting = True

    def flush(self) -> None:
        if self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading…
        return getattr(self.transport, name)
