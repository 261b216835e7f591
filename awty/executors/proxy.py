"""HTTP(S) proxies for callbacks, from the environment as curl reads it.

- ``https_proxy`` / ``HTTPS_PROXY`` for https targets (a CONNECT tunnel, TLS to the target
  inside it), ``http_proxy`` / ``HTTP_PROXY`` for http targets (absolute-form requests);
  ``all_proxy`` / ``ALL_PROXY`` for either when its own is unset. Lower case wins.
- ``no_proxy`` / ``NO_PROXY``: comma- or space-separated; ``*`` alone matches every host; a
  name matches itself and its subdomains (``example.com`` and ``.example.com`` both match
  ``api.example.com``); an IP address or CIDR block matches addresses written in the URL;
  ``name:port`` matches that port only.
- A proxy is ``http://[user:password@]host[:port]`` (port 1080 by default, as curl). Its
  credentials are sent as ``Proxy-Authorization: Basic``.

The SSRF guard is not the proxy's business: the target's own name is still resolved and
checked here before anything is sent; the proxy's address is the operator's choice and is not
checked (it may well be private)."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from ..record import Record, _draft, _seal

MAX_CONNECT_REPLY = 16 * 1024  # bytes of a CONNECT answer's head


class ProxyError(Exception):
    """The proxy could not be used (refused the tunnel, answered nonsense, bad setting)."""


class Proxy(Record):
    __slots__ = ("host", "port", "auth", "error")
    host: str
    port: int
    auth: str | None  # the Proxy-Authorization value
    error: str | None  # a setting awty cannot use: every job through it says so

    def __new__(cls, host: str, port: int, auth: str | None,
                error: str | None = None) -> Proxy:
        s = _draft(cls)
        s.host = host
        s.port = port
        s.auth = auth
        s.error = error
        return _seal(s, cls)

    @property
    def auth_line(self) -> str:
        return f"Proxy-Authorization: {self.auth}\r\n" if self.auth else ""


class Proxies(Record):
    __slots__ = ("http", "https", "no_proxy")
    http: Proxy | None
    https: Proxy | None
    no_proxy: tuple[str, ...]

    def __new__(cls, http: Proxy | None, https: Proxy | None,
                no_proxy: tuple[str, ...]) -> Proxies:
        s = _draft(cls)
        s.http = http
        s.https = https
        s.no_proxy = no_proxy
        return _seal(s, cls)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Proxies:
        def get(name: str) -> str:
            return (env.get(name.lower()) or env.get(name.upper()) or "").strip()

        every = get("all_proxy")
        no = get("no_proxy").replace(" ", ",")
        return cls(http=parse_proxy(get("http_proxy") or every),
                   https=parse_proxy(get("https_proxy") or every),
                   no_proxy=tuple(e.strip().lower() for e in no.split(",") if e.strip()))

    def for_target(self, scheme: str, host: str, port: int) -> Proxy | None:
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or bypass(host, port, self.no_proxy):
            return None
        return proxy


def parse_proxy(value: str) -> Proxy | None:
    if not value:
        return None
    if "://" not in value:
        value = "http://" + value  # curl's default scheme for a proxy
    try:
        parts = urlsplit(value)
        port = parts.port or 1080
    except ValueError as e:
        return Proxy("", 0, None, error=f"proxy {_shown(value)!r}: {e}")
    if parts.scheme.lower() != "http":
        return Proxy("", 0, None, error=f"proxy {_shown(value)!r}: only http:// proxies are "
                                        "supported")
    if not parts.hostname:
        return Proxy("", 0, None, error=f"proxy {_shown(value)!r}: no host")
    auth = None
    if parts.username is not None:
        cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(cred.encode()).decode()
    return Proxy(parts.hostname, port, auth)


def bypass(host: str, port: int, entries: tuple[str, ...]) -> bool:
    """Whether ``no_proxy`` sends this target direct (curl's matching, plus CIDR blocks)."""
    host = host.lower().rstrip(".").strip("[]")
    ip = _ip(host)
    for entry in entries:
        if entry == "*":
            return True
        name, want_port = _split_port(entry)
        if want_port is not None and want_port != port:
            continue
        name = name.lstrip(".").rstrip(".")
        if not name:
            continue
        if ip is not None:
            try:
                if ip in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


async def open_tunnel(loop: asyncio.AbstractEventLoop, sock: socket.socket, proxy: Proxy,
                      authority: str) -> None:
    """CONNECT ``authority`` (host:port) through the proxy on the connected ``sock``; returns
    once the proxy says 2xx, the socket then carrying bytes to the target. Raises ProxyError."""
    await loop.sock_sendall(sock, (f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
                                   f"{proxy.auth_line}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        if len(head) > MAX_CONNECT_REPLY:
            raise ProxyError(f"proxy {proxy.host}: CONNECT answer over {MAX_CONNECT_REPLY} "
                             "bytes")
        # One byte at a time past the head would be slow; the head is small and the target
        # says nothing before our TLS hello, so reading what is there cannot eat its bytes.
        chunk = await loop.sock_recv(sock, 4096)
        if not chunk:
            raise ProxyError(f"proxy {proxy.host} closed the connection during CONNECT")
        head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProxyError(f"proxy {proxy.host}: not an HTTP answer to CONNECT ({line[:60]!r})")
    if not 200 <= int(parts[1]) < 300:
        raise ProxyError(f"proxy {proxy.host} refused the tunnel to {authority}: "
                         f"{line[9:][:80]}")
    if head.index(b"\r\n\r\n") + 4 != len(head):
        raise ProxyError(f"proxy {proxy.host} sent bytes before the tunnel was used")


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port or [v6]
        end = entry.find("]")
        rest = entry[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
        return entry[1:end], port
    if entry.count(":") == 1:
        name, _, p = entry.partition(":")
        return (name, int(p)) if p.isdigit() else (entry, None)
    return entry, None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _shown(value: str) -> str:
    """The proxy URL without its password (it goes into error texts and history)."""
    try:
        parts = urlsplit(value)
        if parts.password is not None:
            return value.replace(":" + parts.password + "@", ":***@", 1)
    except ValueError:
        pass
    return value
