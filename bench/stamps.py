"""The timing receiver: answers 204 to every POST and stamps each one with its own clock
(``time.time()`` when the request's bytes were read), keyed by its ``webhook-id`` header, so that
due→first, due→last, duplicates and missing are measured where the callbacks land rather than
from what the sender says about itself.

A process of its own (``python bench _stamps PORT``; uvloop when installed), its parser kept
minimal (find the blank line, read Content-Length, find ``webhook-id``) so that it costs far less
per request than any sender it measures. ``GET /_stats`` answers the counts since the last
``POST /_reset``; ``StampReceiver`` is the bench's side of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

_NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"


class _Tally:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seen: set[bytes] = set()
        self.posts = 0
        self.dups = 0
        self.signed = 0
        self.unkeyed = 0
        self.first = 0.0
        self.last = 0.0

    def add(self, at: float, key: bytes | None, signed: bool) -> None:
        if not self.posts:
            self.first = at
        self.last = at
        self.posts += 1
        self.signed += signed
        if key is None:
            self.unkeyed += 1
        elif key in self.seen:
            self.dups += 1
        else:
            self.seen.add(key)

    def stats(self) -> bytes:
        return json.dumps({"posts": self.posts, "distinct": len(self.seen), "dups": self.dups,
                           "signed": self.signed, "unkeyed": self.unkeyed,
                           "first": self.first, "last": self.last}).encode()


def _header(lower: bytes, head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (b"\\nname:", lower case), found in the lower-cased head
    and read from the head as sent (job ids are case-sensitive)."""
    i = lower.find(name)
    if i < 0:
        return None
    e = lower.find(b"\r", i + 1)
    return head[i + len(name):e if e > 0 else None].strip()


class _Conn(asyncio.Protocol):
    def __init__(self, tally: _Tally):
        self.tally = tally
        self.buf = b""
        self.t: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.t = transport

    def data_received(self, data: bytes) -> None:
        at = time.time()
        buf = self.buf + data if self.buf else data
        out = []
        while (end := buf.find(b"\r\n\r\n")) >= 0:
            head = buf[:end]
            lower = head.lower()
            size = int(_header(lower, head, b"\ncontent-length:") or 0)
            if len(buf) < end + 4 + size:
                break
            if lower.startswith(b"get /_stats"):
                body = self.tally.stats()
                out.append(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            elif lower.startswith(b"post /_reset"):
                self.tally.reset()
                out.append(_NO_CONTENT)
            else:
                key = _header(lower, head, b"\nwebhook-id:")
                self.tally.add(at, key, lower.find(b"\nwebhook-signature:") >= 0)
                out.append(_NO_CONTENT)
            buf = buf[end + 4 + size:]
        self.buf = buf
        if out:
            self.t.write(b"".join(out))


def serve(port: int, parent: int | None) -> None:
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    tally = _Tally()

    async def main() -> None:
        server = await loop.create_server(lambda: _Conn(tally), "127.0.0.1", port,
                                          backlog=4096)
        async with server:
            while parent is None or os.getppid() == parent:
                await asyncio.sleep(1)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    loop.run_until_complete(main())


@dataclass
class Stats:
    posts: int
    distinct: int
    dups: int
    signed: int
    unkeyed: int
    first: float
    last: float


class StampReceiver:
    """The bench's handle on a timing receiver process on 127.0.0.1."""

    name = "bench timing receiver (uvloop, one process, 204, keep-alive, stamps each POST)"

    def __init__(self) -> None:
        from awty.testing.receiver import free_port

        from .common import BENCH_DIR, CHILDREN, die_with_parent, wait_port

        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(BENCH_DIR), "_stamps", str(self.port),
                                      str(os.getpid())], stdin=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent)
        CHILDREN.append(self.proc)
        wait_port(self.port)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _call(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(self.url(path), method=method,
                                     data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def stats(self) -> Stats:
        return Stats(**json.loads(self._call("GET", "/_stats")))

    def wait(self, n: int, timeout: float, quiet: float = 0.5) -> Stats:
        """Until ``n`` distinct keys have arrived and nothing more for ``quiet`` seconds
        (late duplicates are counted), or ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        s = self.stats()
        while time.monotonic() < deadline:
            if s.distinct + s.unkeyed >= n and time.time() - s.last >= quiet:
                return s
            time.sleep(0.05)
            s = self.stats()
        return s

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def stop(self) -> None:
        from .common import stop_proc

        stop_proc(self.proc, signal.SIGTERM)
