"""`awty serve` starts only as it should: the extra, a token or --no-auth on loopback, its
defaults; `awty token` keeps only a hash and shows the token once."""

from __future__ import annotations

import sqlite3

import pytest

import servekit


def test_a_missing_extra_is_one_line_naming_the_install(tmp_path):
    shim = tmp_path / "no-extra"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import sys\nsys.modules['starlette'] = None\n")
    for args in (["serve", "--no-auth"], ["metrics"]):
        res = servekit.awty(tmp_path / "home", *args, env={"PYTHONPATH": str(shim)})
        assert (res.returncode, res.stdout) == (1, ""), res.stderr
        assert res.stderr == ("awty: awty serve needs starlette: pip install "
                              "'awty[serve]'\n")


@pytest.mark.slow
def test_without_a_token_serve_refuses_to_start(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    res = servekit.awty(home, "serve", "--port", str(servekit.free_port()))
    assert res.returncode == 2 and res.stderr.startswith("awty: no token exists: ")
    assert len(res.stderr.splitlines()) == 1
    res = servekit.awty(home, "serve", "--no-auth", "--host", "0.0.0.0")
    assert res.returncode == 2 and "--no-auth listens on loopback only" in res.stderr
    res = servekit.awty(home, "serve", "--certfile", "c.pem")
    assert res.returncode == 2 and "--certfile and --keyfile go together" in res.stderr


def test_no_auth_on_loopback_reads_and_writes_but_never_exec(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    s = servekit.start(home, {}, "--no-auth")
    try:
        a = s.call("POST", "/v1/jobs", {"target": "http://127.0.0.1:9/", "in": "2h"})
        assert a.status == 201
        a = s.call("POST", "/v1/jobs", {"target": "true", "kind": "exec", "in": "2h"})
        assert a.status == 403 and "jobs:exec" in a.body["detail"]
    finally:
        s.stop()


def test_serve_binds_127_0_0_1_8421_by_default():
    from awty.serve.options import ServeOptions

    assert (ServeOptions().host, ServeOptions().port) == ("127.0.0.1", 8421)


@pytest.mark.slow
def test_a_token_is_shown_once_and_only_its_hash_is_kept(tmp_path):
    home = tmp_path / "home"
    res = servekit.awty(home, "token", "new", "svc", "--scope", "jobs:write,jobs:read")
    assert res.returncode == 0 and res.stdout.startswith("awty_")
    token = res.stdout.strip()
    import hashlib

    rows = sqlite3.connect(home / "awty.db").execute(
        "SELECT name, hash, scopes FROM api_token").fetchall()
    assert rows == [("svc", hashlib.sha256(token.encode()).hexdigest(),
                     '["jobs:read", "jobs:write"]')]
    assert token not in (home / "awty.db").read_bytes().decode("latin-1")
    listed = servekit.awty(home, "token", "list")
    assert "svc" in listed.stdout and token not in listed.stdout
    again = servekit.awty(home, "token", "new", "svc", "--scope", "admin")
    assert again.returncode == 1 and "a token named 'svc' exists" in again.stderr
    bad = servekit.awty(home, "token", "new", "x", "--scope", "jobs:everything")
    assert bad.returncode == 2 and "jobs:everything is not a scope" in bad.stderr
    assert servekit.awty(home, "token", "revoke", "svc").returncode == 0
    gone = servekit.awty(home, "token", "revoke", "svc")
    assert gone.returncode == 1 and "no token named 'svc'" in gone.stderr
