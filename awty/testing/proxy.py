"""A small forward HTTP proxy on 127.0.0.1 for tests: CONNECT tunnels (https) and
absolute-form requests (http), as corporate proxies take them. Run it as its own process:

    python -m awty.testing.proxy --log proxy.jsonl [--user u:p] [--deny HOST]
        [--resolve NAME=IP] [--lifetime 120]

It prints ``listening PORT`` on stdout once ready, appends one JSON line per request to the
log (``{"method", "target", "auth"}``: what a test asserts went through it), and stops by
itself after ``--lifetime`` seconds or when its parent process is gone. ``--user`` requires
that Basic ``Proxy-Authorization`` (407 otherwise); ``--deny HOST`` answers 403 to requests
for that host without connecting to it; ``--resolve NAME=IP`` makes the proxy's own DNS
answer IP for NAME (split-horizon DNS: the proxy's view of a name is not the client's). Bounded: request heads of at most 64 KiB, at most
256 connections at once."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import time
from urllib.parse import urlsplit

HEAD_LIMIT = 64 * 1024
MAX_CONNECTIONS = 256
HOP_BY_HOP = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}


class Proxy:
    def __init__(self, log: str, user: str | None, deny: set[str],
                 resolve: dict[str, str] | None = None):
        self.log = log
        self.resolve = resolve or {}
        self.auth = "Basic " + base64.b64encode(user.encode()).decode() if user else None
        self.deny = deny
        self.open = 0

    def record(self, method: str, target: str, auth: str | None) -> None:
        with open(self.log, "a") as f:
            f.write(json.dumps({"method": method, "target": target, "auth": auth}) + "\n")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        upstream: tuple[str, asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            if self.open > MAX_CONNECTIONS:
                return
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = [tuple(x.strip() for x in h.split(":", 1)) for h in lines[1:] if h]
                named = {k.lower(): v for k, v in headers}
                auth = named.get("proxy-authorization")
                self.record(method, target, auth)
                if self.auth is not None and auth != self.auth:
                    writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                 b"Proxy-Authenticate: Basic realm=\"test\"\r\n"
                                 b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                    await writer.drain()
                    return
                if method == "CONNECT":
                    await self._tunnel(target, reader, writer)
                    return
                upstream = await self._forward(method, target, version, headers, named,
                                               reader, writer, upstream)
                if upstream is None:
                    return
        finally:
            self.open -= 1
            if upstream is not None:
                upstream[2].close()
            writer.close()

    async def _tunnel(self, target: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        if host in self.deny or not port.isdigit():
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        try:
            ur, uw = await asyncio.open_connection(self.resolve.get(host, host), int(port))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, uw), _pipe(ur, writer))
        finally:
            uw.close()

    async def _forward(self, method: str, target: str, version: str,
                       headers: list[tuple[str, ...]], named: dict[str, str],
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       upstream: tuple[str, asyncio.StreamReader, asyncio.StreamWriter] | None,
                       ) -> tuple[str, asyncio.StreamReader, asyncio.StreamWriter] | None:
        """One absolute-form request, sent on in origin-form; its answer relayed back.
        Returns the upstream connection to reuse, or None to close the client's."""
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return None
        if parts.hostname in self.deny:
            await reader.readexactly(int(named.get("content-length", "0") or 0))
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return upstream
        authority = f"{parts.hostname}:{parts.port or 80}"
        if upstream is None or upstream[0] != authority:
            if upstream is not None:
                upstream[2].close()
            try:
                ur, uw = await asyncio.open_connection(
                    self.resolve.get(parts.hostname, parts.hostname), parts.port or 80)
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return None
            upstream = (authority, ur, uw)
        _, ur, uw = upstream
        body = await reader.readexactly(int(named.get("content-length", "0") or 0))
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        kept = "".join(f"{k}: {v}\r\n" for k, v in headers if k.lower() not in HOP_BY_HOP)
        uw.write(f"{method} {path} {version}\r\n{kept}\r\n".encode("latin-1") + body)
        await uw.drain()
        try:
            answer = await ur.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        writer.write(answer)
        status = answer.split(b" ", 2)[1]
        length = None
        for line in answer.decode("latin-1").split("\r\n")[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        if length is not None:
            writer.write(await ur.readexactly(length))
        elif status not in (b"204", b"304"):
            writer.write(await ur.read())  # delimited by the close
            await writer.drain()
            return None
        await writer.drain()
        return upstream


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            dst.write_eof()
        except (OSError, RuntimeError):
            pass


async def serve(proxy: Proxy, lifetime: float, parent: int) -> None:
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0, limit=HEAD_LIMIT)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    deadline = time.monotonic() + lifetime
    async with server:
        while time.monotonic() < deadline and os.getppid() == parent:
            await asyncio.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m awty.testing.proxy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log", required=True, help="append one JSON line per request here")
    p.add_argument("--user", help="require this user:password (Basic Proxy-Authorization)")
    p.add_argument("--deny", action="append", default=[], help="answer 403 for this host")
    p.add_argument("--resolve", action="append", default=[], metavar="NAME=IP",
                   help="the proxy's own DNS answer for NAME")
    p.add_argument("--lifetime", type=float, default=120.0, help="seconds before it stops")
    args = p.parse_args(argv)
    try:
        resolve = dict(r.split("=", 1) for r in args.resolve)
        asyncio.run(serve(Proxy(args.log, args.user, set(args.deny), resolve), args.lifetime,
                          os.getppid()))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
