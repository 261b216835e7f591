"""``coalesce.HeldHead``: a response's head goes out with its body's first write (one
``writev``); an interim ``100 Continue`` at once; nothing held past the response's end or the
connection's close. Then through a real serve: ``Expect: 100-continue`` and kept-alive
requests answered whole."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from awty.serve.coalesce import HeldHead

HEAD = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n"


class Recorded:
    """A transport that records each write call (``writelines``' parts together)."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def write(self, data: bytes) -> None:
        self.calls.append([data])

    def writelines(self, parts: Any) -> None:
        self.calls.append(list(parts))

    def close(self) -> None:
        self.calls.append("close")

    def is_closing(self) -> bool:
        return False


def held() -> tuple[HeldHead, Recorded]:
    t = Recorded()
    return HeldHead(t), t  # type: ignore[arg-type]


def test_the_head_waits_for_the_body_and_goes_with_it() -> None:
    h, t = held()
    h.write(HEAD)
    assert t.calls == []
    h.write(b"{}")
    assert t.calls == [[HEAD, b"{}"]]
    h.write(b"more")  # a streamed body's later chunks: at once
    assert t.calls[-1] == [b"more"]
    h.response_done()
    h.write(HEAD)  # the next response's head is held again
    assert len(t.calls) == 2
    assert not h.is_closing()  # the rest is the transport's


def test_an_interim_100_continue_is_not_held() -> None:
    h, t = held()
    h.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert t.calls == [[b"HTTP/1.1 100 Continue\r\n\r\n"]]
    h.write(HEAD)
    h.write(b"{}")
    assert t.calls[-1] == [HEAD, b"{}"]


def test_nothing_is_held_past_the_response_or_the_connection() -> None:
    h, t = held()
    h.write(HEAD)
    h.response_done()  # a response with no body write
    assert t.calls == [[HEAD]]
    h.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    h.close()
    assert t.calls[1:] == [[b"HTTP/1.1 400 Bad Request\r\n\r\n"], "close"]


def _response(s: socket.socket, buf: bytes) -> tuple[bytes, bytes, bytes]:
    """One response from ``s`` (after ``buf``): its head, body, and what came after."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, buf
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk, rest
        rest += chunk
    return head, rest[:length], rest[length:]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_continue_and_kept_alive_requests_through_serve(served) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    body = json.dumps({"target": "https://example.com/hook", "in": "2h"}).encode()
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            f"{served.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + b"Expect: 100-continue\r\n\r\n")
        got = s.recv(65536)  # the interim answer comes before the body is sent
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), got
        s.sendall(body)
        status, doc, buf = _response(s, got[len(b"HTTP/1.1 100 Continue\r\n\r\n"):])
        assert status.startswith(b"HTTP/1.1 201") and json.loads(doc)["state"] == "pending"
        for _ in range(3):  # the same connection, kept alive: each answer whole, in turn
            s.sendall(head + b"\r\n" + body)
            status, doc, buf = _response(s, buf)
            assert status.startswith(b"HTTP/1.1 201"), status
            assert json.loads(doc)["target"] == "https://example.com/hook"
        s.sendall(b"GET /v1/nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, doc, buf = _response(s, buf)
        assert status.startswith(b"HTTP/1.1 404") and buf == b""
