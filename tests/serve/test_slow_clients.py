"""A slow client (slowloris) cannot hold a connection for ever: a request's head and body must
arrive within --read-timeout, from its first byte (uvicorn's keep-alive timeout covers only
the wait between requests). Real sockets against a real serve process, every wait bounded."""

from __future__ import annotations

import socket
import time

import pytest

import servekit

TIMEOUT = 1.0  # serve's --read-timeout here


@pytest.fixture
def slow_served(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    server = servekit.start(home, {}, "--no-auth", "--read-timeout", str(TIMEOUT))
    server.extra["port"] = int(server.url.rsplit(":", 1)[1])
    try:
        yield server
    finally:
        server.stop()


def _closed_after(s: socket.socket, trickle: bytes, every: float = 0.1,
                  bound: float = 10.0) -> float:
    """Send ``trickle`` a byte every ``every`` seconds (the head or body of a request that never
    completes) until the server closes the connection; the seconds that took."""
    started = time.monotonic()
    s.settimeout(every)
    for b in trickle:
        assert time.monotonic() - started < bound, "still open: the slow client holds it"
        try:
            s.sendall(bytes([b]))
            if s.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:  # reset: closed too
            return time.monotonic() - started
    raise AssertionError("the trickle ended before the server closed the connection")


@pytest.mark.slow
def test_a_head_or_body_trickled_byte_by_byte_is_cut_off_at_the_deadline(slow_served):
    port = slow_served.extra["port"]
    head = b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 10_000
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        took = _closed_after(s, head)
    assert TIMEOUT - 0.2 <= took < TIMEOUT + 3, took

    body_head = (b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 b"\r\nContent-Length: 1000\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(body_head)  # the deadline runs from here: the trickle takes the rest of it
        took = _closed_after(s, b" " * 1000)
    assert TIMEOUT - 0.3 <= took < TIMEOUT + 3, took

    # a connection that never sends a byte is closed too
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT + 5) as s:
        started = time.monotonic()
        assert s.recv(1024) == b""
        assert time.monotonic() - started < TIMEOUT + 3

    # and serve answers as before
    assert slow_served.call("GET", "/healthz").status == 200
    assert slow_served.proc.poll() is None


@pytest.mark.slow
def test_the_deadline_is_per_request_not_per_connection(slow_served):
    """A keep-alive connection idle between requests longer than the read timeout (but within
    keep-alive) still works: each request's own arrival is timed, not the connection's age."""
    port = slow_served.extra["port"]
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for _ in range(3):
            s.sendall(request)
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got
            time.sleep(TIMEOUT * 1.5)  # idle: governed by keep-alive (5 s), not the deadline
        # a request sent in two halves within the deadline is answered
        s.sendall(request[:10])
        time.sleep(TIMEOUT / 2)
        s.sendall(request[10:])
        assert s.recv(4096).startswith(b"HTTP/1.1 200")


@pytest.mark.slow
def test_a_bad_read_timeout_is_refused_before_listening(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    for bad in ("0", "-1", "nan", "100000"):
        res = servekit.awty(home, "serve", "--no-auth", "--read-timeout", bad, timeout=30)
        assert res.returncode == 2, (bad, res.stderr)
        assert "--read-timeout" in res.stderr and len(res.stderr.strip().splitlines()) == 1
