"""SSRF through a proxy (issue 28, item 6): the proxy is sent the address awty checked, never
the name, which it would resolve by itself.

Split-horizon DNS, for real on 127.0.0.1: the runner resolves ``localhost`` to 127.0.0.1, where
the callback's receiver listens; the forward proxy (awty.testing.proxy, its own process) is
told ``--resolve localhost=127.0.0.2``, where a stand-in for a metadata service listens on the
same port and hands out "credentials". Before, the request line (http) or the CONNECT (https)
named ``localhost`` and the proxy delivered the callback to the stand-in. Now the proxy is asked
for 127.0.0.1:PORT, the name still in ``Host`` (and in SNI and the certificate check over
https): the receiver gets the callback, the stand-in no connection. Real ``awty add`` and
``awty run-slot`` processes."""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import pytest

from awty.slots import slot_id
from awty.testing.receiver import Receiver
from helpers import T0, db_rows
from relkit import cli_env, run_cli
from test_proxy import ProxyProcess

pytestmark = pytest.mark.reliability


class StandIn:
    """A "metadata service" on 127.0.0.2:``port``: counts connections, answers any request."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.2", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 22\r\n"
                                 b"Connection: close\r\n\r\n{\"AccessKeyId\": \"AK\"}\n")
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    import trustme

    d = tmp_path_factory.mktemp("ca")
    authority = trustme.CA()
    leaf = authority.issue_cert("localhost")
    authority.cert_pem.write_to_path(str(d / "ca.pem"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(d / "leaf.pem"))
    return d / "ca.pem", (str(d / "leaf.pem"), str(d / "leaf.pem"))


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.slow
def test_the_proxy_is_sent_the_checked_address_not_the_name(home, tmp_path, ca, scheme):
    ca_pem, leaf = ca
    proxy = ProxyProcess(tmp_path, "--resolve", "localhost=127.0.0.2")
    try:
        with Receiver(tls=leaf if scheme == "https" else None) as rx:
            stand_in = StandIn(rx.port)
            try:
                env = cli_env(home, T0, ca_file=ca_pem)
                add = run_cli(["add", f"{scheme}://localhost:{rx.port}/hook", "--in", "1m"],
                              env)
                assert add.returncode == 0, add.stderr
                slot = db_rows(home, "future_job")[0]["next_check_at"]
                from datetime import datetime

                at = datetime.fromisoformat(slot.replace("Z", "+00:00"))
                run_env = {**cli_env(home, at + timedelta(seconds=1), ca_file=ca_pem),
                           "http_proxy": proxy.url, "https_proxy": proxy.url}
                run = run_cli(["run-slot", slot_id(at)], run_env)
            finally:
                stand_in.close()
            assert stand_in.connections == 0, "the proxy reached the metadata stand-in"
            assert run.returncode == 0, run.stderr
            (req,) = rx.requests("/hook")
            assert req.headers["host"] == f"localhost:{rx.port}"
        seen = proxy.seen()
    finally:
        proxy.stop()
    want = (f"http://127.0.0.1:{rx.port}/hook" if scheme == "http"
            else f"127.0.0.1:{rx.port}")
    assert [s["target"] for s in seen] == [want]
    assert [h["outcome"] for h in db_rows(home, "job_history")] == ["done"]
