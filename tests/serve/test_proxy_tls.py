"""TLS at a reverse proxy, or in serve itself: the console's login cookie is Secure when the
request came over HTTPS: X-Forwarded-Proto believed only from the addresses given to
--forwarded-allow-ips, never from anyone else; --certfile/--keyfile directly."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import time
import ssl
from pathlib import Path
from urllib.parse import urlencode

import pytest

import servekit
from awty.serve.options import DEFAULT_HOST, DEFAULT_PORT


def _home(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    res = servekit.awty(home, "token", "new", "reader", "--scope", "jobs:read")
    assert res.returncode == 0, res.stderr
    return home, res.stdout.strip()


def _login_cookie(conn: http.client.HTTPConnection, token: str, **headers: str) -> str:
    conn.request("POST", "/login", body=urlencode({"token": token, "next": "/"}),
                 headers={"Content-Type": "application/x-www-form-urlencoded", **headers})
    r = conn.getresponse()
    r.read()
    assert r.status == 303, r.status
    return r.getheader("set-cookie") or ""


@pytest.mark.slow
def test_forwarded_proto_is_believed_from_the_proxy_only(tmp_path):
    home, token = _home(tmp_path)
    # serve on every loopback address: the test reaches it from 127.0.0.1 (the proxy) and
    # from 127.0.0.2 (anyone else)
    port = servekit.free_port()
    server = servekit.start(home, {}, "--host", "0.0.0.0", "--forwarded-allow-ips",
                            "127.0.0.1,10.0.0.0/8", port=port)
    try:
        def conn(source: str) -> http.client.HTTPConnection:
            return http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                              source_address=(source, 0))

        proxy_https = _login_cookie(conn("127.0.0.1"), token, **{"X-Forwarded-Proto": "https"})
        assert "awty_token=" in proxy_https and "Secure" in proxy_https, proxy_https
        assert "HttpOnly" in proxy_https and "samesite=strict" in proxy_https.lower()
        proxy_http = _login_cookie(conn("127.0.0.1"), token)
        assert "awty_token=" in proxy_http and "Secure" not in proxy_http
        # the same header from an address that is not the proxy: not believed
        other = _login_cookie(conn("127.0.0.2"), token, **{"X-Forwarded-Proto": "https"})
        assert "awty_token=" in other and "Secure" not in other, other
    finally:
        server.stop()

    # no --forwarded-allow-ips: nobody is believed, not even loopback
    plain = servekit.start(home, {})
    try:
        port = int(plain.url.rsplit(":", 1)[1])
        cookie = _login_cookie(http.client.HTTPConnection("127.0.0.1", port, timeout=30), token,
                               **{"X-Forwarded-Proto": "https"})
        assert "awty_token=" in cookie and "Secure" not in cookie, cookie
    finally:
        plain.stop()


@pytest.mark.slow
def test_tls_in_serve_itself_gives_a_secure_cookie(tmp_path):
    trustme = pytest.importorskip("trustme")
    home, token = _home(tmp_path)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    server = servekit.start(home, {}, "--certfile", str(tmp_path / "cert.pem"),
                            "--keyfile", str(tmp_path / "key.pem"))
    try:
        port = int(server.url.rsplit(":", 1)[1])
        context = ssl.create_default_context()
        ca.configure_trust(context)
        cookie = _login_cookie(http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                                           context=context), token)
        assert "awty_token=" in cookie and "Secure" in cookie, cookie
    finally:
        server.stop()


@pytest.mark.slow
def test_a_bad_proxy_address_is_refused_before_listening(tmp_path):
    home, _ = _home(tmp_path)
    for bad in ("proxy.internal", "10.0.0.1/8", "*", "127.0.0.1,nope"):
        res = servekit.awty(home, "serve", "--forwarded-allow-ips", bad, timeout=30)
        assert res.returncode == 2, (bad, res.stderr)
        assert "--forwarded-allow-ips" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_the_documented_proxies_send_what_serve_believes():
    """docs/http-api.md's nginx and Caddy blocks (not runnable here) proxy to serve's default
    address and pass the scheme in X-Forwarded-Proto, as the serve line beside them expects."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    (nginx,) = re.findall(r"^```nginx\n(.*?)^```", doc, flags=re.S | re.M)
    (caddy,) = re.findall(r"^```caddyfile\n(.*?)^```", doc, flags=re.S | re.M)
    upstream = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
    assert f"proxy_pass http://{upstream};" in nginx
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in nginx
    assert f"reverse_proxy {upstream}" in caddy  # Caddy sets X-Forwarded-Proto itself
    assert f"awty serve --forwarded-allow-ips {DEFAULT_HOST}" in doc


def _nginx() -> str:
    """nginx's path, installed from the system's packages when missing (as debpkg does
    PgBouncer); the test skips loudly where it cannot be."""
    import debpkg

    path = f"{os.environ.get('PATH', '')}:/usr/sbin"
    if not shutil.which("nginx", path=path):
        try:
            debpkg.install("nginx")
        except debpkg.NotInstalled as e:
            pytest.skip(f"NGINX TEST NOT RUN: {e}")
    found = shutil.which("nginx", path=path)
    if not found:
        pytest.skip("NGINX TEST NOT RUN: nginx is still not on PATH after the install")
    return found


@pytest.mark.slow
def test_the_documented_nginx_recipe_end_to_end(tmp_path):
    """docs/http-api.md's nginx block, as written but for its ports and certificate paths, in
    front of `awty serve --forwarded-allow-ips 127.0.0.1`: over HTTPS through nginx the API
    answers and the login cookie is Secure."""
    trustme = pytest.importorskip("trustme")
    nginx = _nginx()
    home, token = _home(tmp_path)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    serve_port, tls_port = servekit.free_port(), servekit.free_port()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    (block,) = re.findall(r"^```nginx\n(.*?)^```", doc, flags=re.S | re.M)
    block = block.replace("listen 443 ssl;", f"listen 127.0.0.1:{tls_port} ssl;")
    block = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {tmp_path}/cert.pem;", block)
    block = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {tmp_path}/key.pem;",
                   block)
    block = block.replace(f"127.0.0.1:{DEFAULT_PORT}", f"127.0.0.1:{serve_port}")
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    root = "user root;\n" if os.geteuid() == 0 else ""
    (prefix / "nginx.conf").write_text(
        f"{root}daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
        f"error_log {prefix}/error.log;\nevents {{}}\nhttp {{\naccess_log off;\n"
        f"client_body_temp_path {prefix}/body;\nproxy_temp_path {prefix}/proxy;\n"
        f"{block}}}\n")
    server = servekit.start(home, {}, "--forwarded-allow-ips", "127.0.0.1", port=serve_port)
    proxy = subprocess.Popen([nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        deadline = time.monotonic() + 20
        while True:
            assert proxy.poll() is None, proxy.stderr.read().decode() if proxy.stderr else ""
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", tls_port, timeout=30,
                                                   context=context)
                conn.request("GET", "/healthz")
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "nginx did not answer"
            time.sleep(0.1)
        cookie = _login_cookie(http.client.HTTPSConnection("127.0.0.1", tls_port, timeout=30,
                                                           context=context), token)
        assert "awty_token=" in cookie and "Secure" in cookie, cookie
        # the same server reached directly over plain HTTP: no Secure cookie
        direct = _login_cookie(http.client.HTTPConnection("127.0.0.1", serve_port, timeout=30),
                               token)
        assert "awty_token=" in direct and "Secure" not in direct, direct
    finally:
        proxy.terminate()
        proxy.wait(15)
        server.stop()
