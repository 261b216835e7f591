"""Issue 33's faults against a real ``awty serve`` process (SQLite and PostgreSQL):

- SIGTERM while clients are adding jobs as fast as they can: every job answered 201 is in
  the store (uvicorn finishes the requests under way; none is answered before it is stored),
  and serve exits cleanly.
- Bad JSON, bodies far over serve_max_body (sent whole, or announced and never finished) and
  slow clients (slowloris: headers a byte at a time, a body that trickles) neither hang nor
  crash it: other requests are answered at once meanwhile, and it still answers afterwards.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from awty.api import Awty

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
import servekit  # noqa: E402

pytestmark = pytest.mark.reliability
CLIENTS = 8


@pytest.fixture
def serve(tmp_path, backend):
    home = tmp_path / "home"
    env = dict(backend.env)
    assert servekit.awty(home, "init", env=env).returncode == 0
    res = servekit.awty(home, "token", "new", "svc", "--scope", "jobs:read,jobs:write",
                        env=env)
    server = servekit.start(home, env, token=res.stdout.strip())
    server.extra["backend"] = backend
    try:
        yield server
    finally:
        server.stop()


def _tracebacks(server) -> list[str]:
    """Tracebacks in serve's output or awty.log (an unexpected error is logged there)."""
    logs = [server.log, server.home / "awty.log"]
    return [p.name for p in logs if p.exists() and "Traceback" in p.read_text()]


def _post(conn, token, body):
    conn.request("POST", "/v1/jobs", body=json.dumps(body),
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


@pytest.mark.slow
def test_sigterm_under_load_loses_no_accepted_job(serve):
    port = int(serve.url.rsplit(":", 1)[1])
    accepted: list[str] = []
    refused: list[int] = []
    lock, stop = threading.Lock(), threading.Event()

    def client(n: int) -> None:
        conn, i = None, 0
        while not stop.is_set():
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=20)
                status, raw = _post(conn, serve.token, {"target": "http://127.0.0.1:9/h",
                                                        "in": "2h", "entity": "c",
                                                        "key": f"{n}-{i}"})
            except (OSError, http.client.HTTPException):
                conn = None  # closed by the shutdown: try again until it no longer listens
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                except OSError:
                    return
                continue
            i += 1
            with lock:
                if status == 201:
                    accepted.append(json.loads(raw)["id"])
                else:
                    refused.append(status)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(accepted) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    serve.proc.send_signal(signal.SIGTERM)
    try:
        code = serve.proc.wait(30)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    # uvicorn finishes the requests under way, then dies of the signal it caught (as systemd
    # expects of a stop)
    assert code in (0, -signal.SIGTERM), serve.log.read_text()
    assert len(accepted) >= 150 and set(refused) <= {503}, (len(accepted), refused)
    assert not _tracebacks(serve)
    with Awty(serve.home, env={}, **serve.extra["backend"].kw) as a:
        stored = {j.id for j in a.list()}
    lost = [i for i in accepted if i not in stored]
    assert not lost, f"{len(lost)} of {len(accepted)} jobs answered 201 are not in the store"


def _slow_headers(port: int, stop: threading.Event, sent: list[int]) -> None:
    """A slowloris connection: a request's head a byte at a time, never finished."""
    head = b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 10_000
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            for b in head:
                if stop.is_set():
                    return
                s.sendall(bytes([b]))
                sent[0] += 1
                time.sleep(0.05)
    except OSError:
        return  # closed by the server: as good as it gets


def _slow_body(port: int, token: str, stop: threading.Event) -> None:
    """A body announced at 1,000 bytes that trickles in a byte at a time."""
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(head)
            while not stop.is_set():
                s.sendall(b" ")
                time.sleep(0.05)
    except OSError:
        return


def _timed(server, *args, **kw):
    started = time.monotonic()
    answer = server.call(*args, **kw)
    return answer, time.monotonic() - started


@pytest.mark.slow
def test_bad_bodies_and_slow_clients_neither_hang_nor_crash_it(serve):
    port = int(serve.url.rsplit(":", 1)[1])
    stop, sent = threading.Event(), [0]
    slow = [threading.Thread(target=_slow_headers, args=(port, stop, sent)) for _ in range(40)]
    slow += [threading.Thread(target=_slow_body, args=(port, serve.token, stop))
             for _ in range(10)]
    for t in slow:
        t.start()
    try:
        time.sleep(1.0)
        assert sent[0] > 100  # the slow clients are connected and trickling
        # meanwhile: bad JSON, a huge body, a body announced huge and cut short
        for raw, status in ((b"{nope", 400), (b'{"target": "\xff"}', 400),
                            (b"[" * 200_000, 400),
                            (b'{"target": "' + b"a" * (20 * 1024 * 1024) + b'"}', 413)):
            answer, took = _timed(serve, "POST", "/v1/jobs", raw=raw, timeout=30)
            assert answer.status == status, (raw[:20], answer.status, answer.body)
            assert took < 5, f"{raw[:20]!r} took {took:.1f} s"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      f"{serve.token}\r\nContent-Length: 500000000\r\n\r\n".encode())
            s.sendall(b"x" * (5 * 1024 * 1024))
            s.settimeout(10)
            first = s.recv(200)
        assert first.startswith(b"HTTP/1.1 413"), first
        # ordinary requests are answered at once all along
        for _ in range(5):
            ok, took = _timed(serve, "POST", "/v1/jobs",
                              {"target": "http://127.0.0.1:9/h", "in": "1h"})
            assert ok.status == 201 and took < 1.0, (ok.status, took)
            health, took = _timed(serve, "GET", "/healthz", token=None)
            assert health.status == 200 and took < 1.0, took
    finally:
        stop.set()
        for t in slow:
            t.join(30)
    assert serve.proc.poll() is None, serve.log.read_text()
    assert len(serve.call("GET", "/v1/jobs").body["jobs"]) == 5
    assert not _tracebacks(serve)
