"""HTTP(S) proxies from the environment (issue 13), through a real forward proxy process on
127.0.0.1 (awty.testing.proxy): absolute-form for http, a CONNECT tunnel for https (TLS to the
receiver inside it, with a test CA), NO_PROXY, proxy credentials, and the SSRF guard still
applied to the callback's target while the proxy's own (private) address is allowed."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import db_rows, make_job

from awty.api import Awty
from awty.clock import FixedClock
from awty.config import Settings
from awty.executors.http import HttpExecutor
from awty.executors.proxy import Proxies, bypass, parse_proxy
from awty.model import Answer, Attempt, Job, Result
from awty.testing.receiver import Receiver

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
ATTEMPT = Attempt(slot="203001011200", check=0, attempt=1, timeout=5.0)


class ProxyProcess:
    def __init__(self, tmp: Path, *args: str):
        self.log = tmp / f"proxy-{len(list(tmp.glob('proxy-*')))}.jsonl"
        self.log.touch()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "awty.testing.proxy", "--log", str(self.log),
             "--lifetime", "60", *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("listening "), line
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def seen(self) -> list[dict]:
        return [json.loads(x) for x in self.log.read_text().splitlines()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def proxy(tmp_path) -> Iterator[ProxyProcess]:
    p = ProxyProcess(tmp_path)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    import trustme

    d = tmp_path_factory.mktemp("ca")
    authority = trustme.CA()
    leaf = authority.issue_cert("127.0.0.1", "localhost")
    authority.cert_pem.write_to_path(str(d / "ca.pem"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(d / "leaf.pem"))
    return d / "ca.pem", (str(d / "leaf.pem"), str(d / "leaf.pem"))


def job(target: str) -> Job:
    return make_job(target, id="0123456789ABCDEFGHJKMNPQRS", payload_json='{"a":1}',
                    headers={"X-Tenant": "7"}, at=NOW)


class _FakeDNS(asyncio.SelectorEventLoop):
    """Names of the tests' own resolve to addresses chosen here (never connected: the proxy
    takes the connection); every other name as the system says."""
    names: dict[str, str] = {}

    async def getaddrinfo(self, host, port, *args, **kw):  # type: ignore[override]
        name = host.decode() if isinstance(host, bytes) else host  # the executor's: bytes
        if name in self.names:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (self.names[name], port))]
        return await super().getaddrinfo(host, port, *args, **kw)


def fire(target: str, env: dict[str, str], settings: Settings | None = None,
         names: dict[str, str] | None = None) -> Result:
    async def main() -> Result:
        ex = HttpExecutor(settings or Settings(), FixedClock(NOW), None, env=env)
        try:
            return await ex.run(job(target), ATTEMPT)
        finally:
            await ex.close()

    _FakeDNS.names = names or {}
    with asyncio.Runner(loop_factory=_FakeDNS) as runner:
        return runner.run(main())


# --- through the proxy ------------------------------------------------------------------------
def test_http_goes_through_the_proxy_in_absolute_form(proxy, rx):
    r = fire(rx.url("/via?x=1"), {"HTTP_PROXY": proxy.url})
    assert r.answer is Answer.DONE, r.error
    (req,) = rx.requests("/via")
    assert req.headers["x-tenant"] == "7" and json.loads(req.body)["payload"] == {"a": 1}
    assert "proxy-authorization" not in req.headers
    assert proxy.seen() == [{"method": "POST", "target": rx.url("/via?x=1"), "auth": None}]


def test_https_goes_through_a_connect_tunnel(proxy, ca):
    ca_pem, leaf = ca
    with Receiver(tls=leaf) as rx:
        r = fire(f"https://localhost:{rx.port}/secure", {"https_proxy": proxy.url},
                 Settings(ca_file=str(ca_pem)))
        assert r.answer is Answer.DONE, r.error
        assert len(rx.requests("/secure")) == 1
        assert rx.requests("/secure")[0].headers["host"] == f"localhost:{rx.port}"
    # the address localhost resolved to here, checked: the proxy never resolves the name
    assert proxy.seen() == [{"method": "CONNECT", "target": f"127.0.0.1:{rx.port}",
                             "auth": None}]


def test_a_bad_certificate_behind_the_tunnel_fails_at_once(proxy, ca):
    _, leaf = ca
    with Receiver(tls=leaf) as rx:
        r = fire(rx.url("/secure"), {"HTTPS_PROXY": proxy.url})  # the test CA not trusted
    assert r.answer is Answer.FAIL and "certificate verification failed" in r.error
    assert [s["method"] for s in proxy.seen()] == ["CONNECT"]


def test_proxy_credentials_come_from_the_proxy_url(tmp_path, rx):
    p = ProxyProcess(tmp_path, "--user", "me:s3cr@t")
    try:
        denied = fire(rx.url("/a"), {"http_proxy": p.url})
        assert denied.answer is Answer.FAIL and denied.status == 407
        r = fire(rx.url("/a"), {"http_proxy": f"http://me:s3cr%40t@127.0.0.1:{p.port}"})
        assert r.answer is Answer.DONE, r.error
        assert p.seen()[-1]["auth"] == "Basic bWU6czNjckB0"
        assert "proxy-authorization" not in rx.requests("/a")[0].headers
    finally:
        p.stop()


def test_a_refused_tunnel_is_retried_not_failed(tmp_path, ca):
    p = ProxyProcess(tmp_path, "--deny", "127.0.0.1")
    try:
        r = fire("https://127.0.0.1:9/x", {"https_proxy": p.url})
    finally:
        p.stop()
    assert r.answer is Answer.RETRY and "refused the tunnel to 127.0.0.1:9: 403" in r.error


def test_no_proxy_sends_direct(proxy, rx):
    for no in ("127.0.0.1", "*", f"127.0.0.1:{rx.port}", "127.0.0.0/8", "localhost,127.0.0.1"):
        assert fire(rx.url("/d"), {"http_proxy": proxy.url, "NO_PROXY": no}).answer \
            is Answer.DONE
    assert proxy.seen() == []
    fire(rx.url("/d"), {"http_proxy": proxy.url, "no_proxy": "127.0.0.1:1"})  # another port
    assert len(proxy.seen()) == 1


def test_a_proxy_setting_awty_cannot_use_is_retried_not_failed(rx):
    """An operator's typo (or a socks proxy) must not end the jobs: fixed, they go on."""
    r = fire(rx.url("/x"), {"http_proxy": "socks5://127.0.0.1:1080"})
    assert r.answer is Answer.RETRY and "only http:// proxies" in r.error
    assert rx.requests() == []


def test_an_unreachable_proxy_is_a_retry_that_names_it(rx):
    from awty.testing.receiver import free_port

    port = free_port()
    r = fire(rx.url("/x"), {"http_proxy": f"http://127.0.0.1:{port}"})
    assert r.answer is Answer.RETRY
    assert r.error == f"proxy 127.0.0.1:{port}: connection refused"
    assert rx.requests() == []


# --- the SSRF guard and the proxy's own address ------------------------------------------------
def test_the_guard_checks_the_target_not_the_proxy(tmp_path):
    """deny_private_networks: the proxy at 127.0.0.1 is used (the operator's choice); a
    target whose name resolves to a refused address never reaches it."""
    # answers 403, connects nowhere: it is asked for the address checked, not the name
    p = ProxyProcess(tmp_path, "--deny", "1.1.1.1")
    strict = Settings(deny_private_networks=True)
    names = {"hooks.example": "1.1.1.1", "evil.example": "169.254.169.254",
             "inside.example": "10.0.0.5"}
    try:
        ok = fire("http://hooks.example/x", {"http_proxy": p.url}, strict, names)
        metadata = fire("http://evil.example/x", {"http_proxy": p.url}, strict, names)
        private = fire("http://inside.example/x", {"http_proxy": p.url}, strict, names)
        literal = fire("http://127.0.0.1:9/x", {"http_proxy": p.url}, strict, names)
        seen = p.seen()
    finally:
        p.stop()
    assert ok.status == 403  # it went through the proxy, whose address is private
    assert seen == [{"method": "POST", "target": "http://1.1.1.1:80/x", "auth": None}]
    for r in (metadata, private, literal):
        assert r.answer is Answer.FAIL and "address" in r.error, r


@pytest.mark.slow
def test_run_slot_delivers_through_a_proxy(home, tmp_path, ca, proxy):
    """The whole path: `awty run-slot` as a process, HTTPS_PROXY and ca_file (AWTY_CA_FILE)."""
    ca_pem, leaf = ca
    with Receiver(tls=leaf) as rx:
        a = Awty(home, env={})
        a.init()
        t0 = datetime.now(UTC)
        a.add(rx.url("/cli"), in_="1m", payload={"n": 1})
        a.close()
        slot = t0 + timedelta(minutes=16)
        env = {"PATH": "/usr/bin:/bin", "HTTPS_PROXY": proxy.url,
               "AWTY_CA_FILE": str(ca_pem), "AWTY_HOME": str(home),
               "AWTY_NOW": slot.isoformat()}
        res = subprocess.run([sys.executable, "-m", "awty", "catchup"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert len(rx.requests("/cli")) == 1
    assert [s["method"] for s in proxy.seen()] == ["CONNECT"]
    assert [h["outcome"] for h in db_rows(home, "job_history")] == ["done"]


# --- reading the environment ---------------------------------------------------------------------
@pytest.mark.parametrize("host, port, entries, direct", [
    ("example.com", 443, ("example.com",), True),
    ("api.example.com", 443, ("example.com",), True),
    ("api.example.com", 443, (".example.com",), True),
    ("badexample.com", 443, ("example.com",), False),
    ("example.com", 443, ("example.com:443",), True),
    ("example.com", 8443, ("example.com:443",), False),
    ("anything", 80, ("*",), True),
    ("10.1.2.3", 80, ("10.0.0.0/8",), True),
    ("11.1.2.3", 80, ("10.0.0.0/8",), False),
    ("::1", 80, ("::1",), True),
    ("::1", 80, ("[::1]:80",), True),
    ("EXAMPLE.COM.", 80, ("example.com",), True),
    ("example.com", 80, (), False),
])
def test_no_proxy_matching(host, port, entries, direct):
    assert bypass(host, port, entries) is direct


def test_environment_names_and_precedence():
    p = Proxies.from_env({"HTTPS_PROXY": "http://up:1", "https_proxy": "low:2",
                          "HTTP_PROXY": "http://h:3", "NO_PROXY": "a.com b.com"})
    assert (p.https.host, p.https.port) == ("low", 2)  # lower case wins, as curl
    assert (p.http.host, p.http.port) == ("h", 3)
    assert p.no_proxy == ("a.com", "b.com")
    every = Proxies.from_env({"ALL_PROXY": "http://all:4"})
    assert every.http == every.https and every.http.port == 4
    assert parse_proxy("proxy.corp").port == 1080
    bad = parse_proxy("socks5://u:pw@p:1")
    assert bad.error and "only http://" in bad.error and "pw" not in bad.error
    assert Proxies.from_env({}).for_target("https", "x", 443) is None
