"""awty's test receiver itself (awty/testing/receiver.py): what the other tests do not already
lean on — the command line the demo runs, the load mode the bench runs, hooks that fail,
the bounds (lifetime, max_requests) and volume mode. The scripted behaviours (hang, trickle,
close, 50 MB bodies, TLS...) are exercised by the http executor and reliability tests."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from awty.signing import new_secret, parse_secret, sign
from awty.testing.receiver import Receiver, Reply, free_port

BODY = json.dumps({"id": "01JRECEIVERTEST000000000001", "entity": None, "key": None,
                   "payload": {"n": 1}, "check": 1, "attempt": 2, "slot": "203001010000",
                   "first_check_at": "2030-01-01T00:00:00Z"}, separators=(",", ":")).encode()


def post(port: int, path: str, body: bytes = BODY, headers: dict | None = None
         ) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


def signed(secret: str, body: bytes = BODY, ts: int = 1_893_456_000) -> dict[str, str]:
    job_id = json.loads(body)["id"]
    msg_id = f"{job_id}_1"  # as awty sends it: one webhook-id per check
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": sign(parse_secret(secret), msg_id, ts, body),
            "X-Awty-Job-Id": job_id, "X-Awty-Attempt": "2", "X-Awty-Check": "1"}


def wait_for_file(path, proc, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(path) and (text := open(path).read()):
            return text
        time.sleep(0.02)
    raise AssertionError(f"no port file; stderr: {proc.stderr.read() if proc.stderr else ''}")


def test_command_line_scripts_answers_and_checks_signatures(tmp_path):
    secret = new_secret()
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "awty.testing.receiver", "--port-file", str(port_file),
         "--secret", secret, "--lifetime", "60", "--answer", "/flaky=500",
         "--answer", '/flaky=200 {"recheck_in": "15m"}'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(wait_for_file(port_file, proc))
        assert post(port, "/flaky", headers=signed(secret)) == (500, b"")
        assert post(port, "/flaky", headers=signed(secret)) == (200, b'{"recheck_in": "15m"}')
        assert post(port, "/flaky", headers=signed(secret))[0] == 200  # the last one repeats
        assert post(port, "/other", headers=signed(new_secret())) == (200, b"")
        assert post(port, "/plain", body=b"hello")[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == ("  receiver <- /flaky    job 01JRECEIVE… check 1 attempt 2 payload "
                        '{"n": 1} [signed ok] -> 500')
    assert lines[1].endswith("[signed ok] -> 200") and lines[2].endswith("-> 200")
    assert lines[3].endswith("[BAD SIG: signature mismatch] -> 200")
    assert lines[4].startswith("  receiver <- /plain") and "POST 5 bytes" in lines[4]
    assert len(lines) == 5


def test_command_line_refuses_a_malformed_answer():
    p = subprocess.run([sys.executable, "-m", "awty.testing.receiver", "--answer", "flaky=500"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "expected /PATH=STATUS" in p.stderr


@pytest.mark.slow
def test_constant_mode_answers_everything_and_stops_with_its_parent():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "awty.testing.receiver", "--constant", "204",
                             "--port", str(port), "--parent", str(os.getpid()),
                             "--lifetime", "60"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert post(port, "/anything") == (204, b"")
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        assert post(port, "/else", body=b"x" * 10_000) == (204, b"")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    # given a parent that is not its parent (no process has pid 0), it stops at once
    orphan = subprocess.run([sys.executable, "-m", "awty.testing.receiver", "--constant", "204",
                             "--port", str(free_port()), "--parent", "0", "--lifetime", "60"],
                            timeout=30)
    assert orphan.returncode == 0


def test_a_failing_hook_is_answered_500_and_kept():
    def reply(req):
        raise ValueError("boom")

    with Receiver(reply=reply) as rx:
        rx.script("/scripted", status=201)
        status, body = post(rx.port, "/x")
        assert status == 500 and b"boom" in body
        assert post(rx.port, "/scripted")[0] == 201  # a script needs no hook
    assert [str(e) for e in rx.errors] == ["boom"]


def test_hooks_see_each_request_and_its_answer():
    seen = []
    with Receiver(on_request=lambda r: seen.append(("request", r.n, r.job_id, r.attempt)),
                  on_reply=lambda r, a: seen.append(("reply", r.n, a.status)),
                  reply=lambda r: (202, {"Retry-After": "5"}, "later")) as rx:
        conn = http.client.HTTPConnection("127.0.0.1", rx.port, timeout=10)
        conn.request("POST", "/a?q=1", body=BODY, headers=signed(new_secret()))
        res = conn.getresponse()
        assert (res.status, res.getheader("Retry-After"), res.read()) == (202, "5", b"later")
        conn.close()
    assert seen == [("request", 1, "01JRECEIVERTEST000000000001", 2), ("reply", 1, 202)]
    (req,) = rx.requests("/a")
    assert req.path == "/a?q=1" and req.check == 1 and req.json()["payload"] == {"n": 1}
    assert req.message_id == "01JRECEIVERTEST000000000001_1"  # webhook-id: the job's check
    assert rx.log() == [("/a", "01JRECEIVERTEST000000000001", 2, "203001010000")]


def test_volume_mode_keeps_only_counts_and_the_log():
    with Receiver(keep=False, max_requests=3) as rx:
        for _ in range(3):
            assert post(rx.port, "/v", headers=signed(new_secret()))[0] == 200
        assert post(rx.port, "/v", headers=signed(new_secret()))[0] == 503  # past the bound
        assert rx.wait_total(3, timeout=5) == 3
    assert rx.requests() == [] and rx.total == 3
    assert rx.counts() == {"01JRECEIVERTEST000000000001": 3}


def test_it_stops_by_itself_after_its_lifetime():
    rx = Receiver(lifetime=0.3).start()
    port = rx.port
    assert post(port, "/alive") == (200, b"")
    deadline = time.monotonic() + 10
    while rx.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not rx.running
    with pytest.raises(ConnectionRefusedError):
        post(port, "/gone")
    rx.stop()  # stopping a stopped receiver is fine


def test_reply_objects_and_keywords_do_not_mix():
    with Receiver() as rx, pytest.raises(TypeError):
        rx.script("/p", Reply(status=500), status=404)


def test_a_protocol_switch_is_refused_and_not_recorded():
    import socket

    with Receiver() as rx:
        with socket.create_connection(("127.0.0.1", rx.port), timeout=10) as s:
            s.sendall(b"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                      b"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\nhi")
            assert s.recv(1000) == b""  # closed, unanswered
        assert post(rx.port, "/after")[0] == 200  # the receiver itself is fine
    assert [r.path for r in rx.requests()] == ["/after"]


# --- `awty receiver`: the same receiver from the awty command (a pipx install has only it) ----
AWTY = str(__import__("pathlib").Path(sys.executable).parent / "awty")


def first_stderr_line(proc, timeout: float = 30) -> str:
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise AssertionError("the receiver said nothing")
    return proc.stderr.readline()


def start_receiver(stdin) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([AWTY, "receiver", "--answer", "/gone=410"], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, first_stderr_line(proc)


def test_awty_receiver_from_a_terminal_runs_until_stopped():
    import pty

    main, tty = pty.openpty()
    try:
        proc, said = start_receiver(tty)
        try:
            assert said.startswith("listening on http://127.0.0.1:")
            assert said.endswith(": until Ctrl-C\n"), said
            port = int(said.split(":")[2].split("/")[0])
            assert post(port, "/gone")[0] == 410
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
    finally:
        os.close(main)
        os.close(tty)
    assert proc.returncode == 0, err
    assert out.startswith("  receiver <- /gone") and out.rstrip().endswith("-> 410")


@pytest.mark.slow
def test_awty_receiver_from_a_script_stops_by_itself():
    proc, said = start_receiver(subprocess.DEVNULL)
    try:
        assert said.endswith(": stops by itself after 600s (--lifetime)\n"), said
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert proc.returncode == 0
    p = subprocess.run([AWTY, "receiver", "--lifetime", "1", "--quiet"], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stderr.endswith(": stops by itself after 1s (--lifetime)\n")


@pytest.mark.slow
def test_awty_receiver_help_and_bad_options():
    p = subprocess.run([AWTY, "receiver", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("Usage: awty receiver")
    assert "--answer" in p.stdout and "until Ctrl-C" in p.stdout
    p = subprocess.run([AWTY, "receiver", "--answer", "gone=410"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr == ("awty receiver: --answer 'gone=410': expected /PATH=STATUS or "
                        "/PATH=STATUS BODY  (see --help)\n")
