"""SPEC 5 and 9's security promises, each with the fault injected for real (issue #6,
scenario 10).

- Callback URLs outside ``allowed_callbacks`` are refused at add AND at fire: jobs added while
  the list was open, fired after it was tightened in awty.toml, fail without a single TCP
  connection reaching the receiver. ``..`` tricks do not climb out of an allowed prefix.
- Schemes other than http(s) are refused at add, and at fire for a row that got in anyway.
- Link-local targets are refused at add (every spelling), and at connect: a host name that
  resolves to 169.254.169.254 (an injected resolver) or, with deny_private_networks, to
  loopback (a real name from /etc/hosts) gets no connection.
- The signing secret (AWTY_SIGNING_SECRET, or signing_secret_file) appears in no output of
  list/show/history/stats/slots, no error message, no log and no file in home (database
  included), after runs against failing receivers and an exec job that dumps its environment.
- Credentials in custom headers (Authorization…) are sent but shown as *** by list/show/retry,
  in text and --json.
- Home 0700, database 0600, log 0600 (also after rotation), and nothing in home open to group
  or others, under umask 0, for a home made by ``awty add`` and by ``awty init``.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awty import signing
from awty.api import Awty
from awty.cli import app
from awty.slots import iso
from helpers import T0, db_rows, tree_files
from awty.testing.receiver import Receiver, free_port

pytestmark = pytest.mark.reliability

NOW = iso(T0)
cli = CliRunner()


def invoke(home, *args, env=None, input=None):
    res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW, **(env or {})},
                     input=input)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.stdout + res.stderr
    return res


def clean_env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def awty_proc(home, *args, env=None, umask=None, timeout=60):
    res = subprocess.run([sys.executable, "-m", "awty", *args, "--home", str(home)],
                         env=env or clean_env(AWTY_NOW=NOW), capture_output=True, text=True,
                         timeout=timeout, umask=-1 if umask is None else umask)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    return res


def write_config(home: Path, text: str) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "awty.toml").write_text(text)


def history(home) -> dict[str, dict]:
    return {h["id"]: h for h in db_rows(home, "job_history")}


def added_id(res) -> str:
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)["id"]


SLOT = "202611221015"  # where "--in 1m" from NOW lands
AFTER = iso(T0 + timedelta(minutes=10))  # a moment after that slot's boundary


# --- 1. the allow-list, at add and at fire --------------------------------------------------------
@pytest.mark.slow
def test_allow_list_tightened_after_add_is_enforced_at_fire(home, rx):
    ids = [added_id(invoke(home, "add", rx.url(f"/hook/{i}"), "--in", "1m", "--json"))
           for i in range(3)]
    write_config(home, 'allowed_callbacks = ["https://hooks.example.com/"]\n')
    res = awty_proc(home, "run-slot", SLOT, "--json", env=clean_env(AWTY_NOW=AFTER))
    assert res.returncode == 0, res.stderr  # a refused callback is data, not a runner error
    assert json.loads(res.stdout)["outcomes"] == {"failed": 3}
    assert rx.requests() == [] and rx.connections == 0
    h = history(home)
    for i in ids:
        assert h[i]["outcome"] == "failed"
        assert "outside the allowed callbacks" in h[i]["reason"], h[i]
    # Re-armed from the dead letter, it is refused again, still without a connection.
    invoke(home, "retry", ids[0], env={"AWTY_NOW": AFTER})
    later = iso(T0 + timedelta(minutes=40))
    res = awty_proc(home, "catchup", "--json", env=clean_env(AWTY_NOW=later))
    assert res.returncode == 0 and json.loads(res.stdout)["outcomes"] == {"failed": 1}
    assert rx.connections == 0
    # And at add, with the list as it is now: exit 2, one line, nothing stored.
    before = (db_rows(home, "future_job"), tree_files(home))
    res = invoke(home, "add", rx.url("/hook/new"), "--in", "1m")
    assert res.exit_code == 2 and "outside the allowed callbacks" in res.stderr
    assert res.stderr.count("\n") == 1
    assert (db_rows(home, "future_job"), tree_files(home)) == before


@pytest.mark.slow
def test_allow_list_prefixes_cannot_be_climbed_out_of(home, rx):
    port = rx.port
    allowed = rx.url("/hooks/")
    write_config(home, f'allowed_callbacks = ["{allowed}"]\n')
    refused = [
        rx.url("/hooks/../admin"),
        rx.url("/hooks/%2e%2e/admin"),
        rx.url("/hooks/%2E%2e/%2e%2E/admin"),
        rx.url("/hooks/a/..%2F..%2Fadmin"),
        rx.url("/hooks/..%5Cadmin"),
        rx.url("/hooks/..\\admin"),
        rx.url("/hooksevil"),
        rx.url("/Hooks/"),
        f"http://127.0.0.1:{port}@evil.example/hooks/",
        f"http://evil.example/hooks/?u=http://127.0.0.1:{port}/hooks/",
        f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/hooks/",
        f"https://127.0.0.1:{port}/hooks/",
        f"http://[::ffff:127.0.0.1]:{port}/hooks/",
        f"http://127.1:{port}/hooks/",
    ]
    for url in refused:
        res = invoke(home, "add", url, "--in", "1m")
        assert res.exit_code == 2, (url, res.stdout)
        assert res.stderr.count("\n") == 1
    assert db_rows(home, "future_job") == []
    for url in (rx.url("/hooks/"), rx.url("/hooks/a/b?x=1"), rx.url("/hooks/..x/y.."),
                f"HTTP://127.0.0.1:{port}/hooks/z"):
        assert invoke(home, "add", url, "--in", "1m").exit_code == 0, url
    a = Awty(home, env={"AWTY_NOW": AFTER})
    s = a.run_slot()
    assert s.outcomes == {"done": 4}
    assert sorted(r.path for r in rx.requests()) == ["/hooks/", "/hooks/..x/y..",
                                                      "/hooks/a/b?x=1", "/hooks/z"]


# --- 2. schemes -------------------------------------------------------------------------------
@pytest.mark.parametrize("target", [
    "ftp://example.com/x", "file:///etc/passwd", "gopher://example.com:70/_x",
    "javascript:alert(1)", "data:text/plain,hello", "ws://example.com/socket",
    "dict://127.0.0.1:11211/", "//example.com/hook", "example.com/hook", "http:/hook",
    "http://", "HTTP//example.com/", "mailto:ops@example.com", "ldap://127.0.0.1/",
])
def test_schemes_other_than_http_are_refused_at_add(home, target):
    res = invoke(home, "add", target, "--in", "1m")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, (target, res.stderr)
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


def test_a_non_http_target_that_got_into_the_store_is_refused_at_fire(home, rx):
    ids = [added_id(invoke(home, "add", rx.url(f"/x{i}"), "--in", "1m", "--json"))
           for i in range(3)]
    conn = sqlite3.connect(home / "awty.db")
    for i, target in zip(ids, ("file:///etc/passwd", f"ftp://127.0.0.1:{rx.port}/x",
                               f"gopher://127.0.0.1:{rx.port}/_x"), strict=True):
        conn.execute("UPDATE future_job SET target = ? WHERE id = ?", (target, i))
    conn.commit()
    conn.close()
    res = awty_proc(home, "run-slot", SLOT, "--json", env=clean_env(AWTY_NOW=AFTER))
    assert json.loads(res.stdout)["outcomes"] == {"failed": 3}
    assert rx.connections == 0
    for row in history(home).values():
        assert "only http:// and https:// URLs are allowed" in row["reason"]


# --- 3. link-local and private addresses, at add and at connect -----------------------------------
@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/", "http://169.254.169.254./",
    "http://[fe80::1]/", "http://[fe80::a9fe:a9fe%25eth0]/", "http://0xa9fea9fe/",
    "http://2852039166/", "http://0251.0376.0251.0376/", "http://169.254.43518/",
    "http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a9fe:a9fe]/", "http://metadata.google.internal/computeMetadata/v1/",
    "https://169.254.170.2/v2/credentials",
])
def test_link_local_targets_are_refused_at_add_even_with_private_networks_allowed(home, target):
    res = invoke(home, "add", target, "--in", "1m")
    assert res.exit_code == 2, (target, res.stdout)
    assert "link-local" in res.stderr or "metadata" in res.stderr, res.stderr
    assert db_rows(home, "future_job") == []


def test_a_name_resolving_to_link_local_gets_no_connection(home, clock, rx, monkeypatch):
    """DNS says 169.254.169.254 (and 127.0.0.1, where the receiver listens): the guard checks
    every resolved address before connecting to any, so not even the loopback one is tried.
    The resolver is injected at socket.getaddrinfo, under the stdlib event loop."""
    real = socket.getaddrinfo
    answers = {
        "metadata.test": [("169.254.169.254",), ("127.0.0.1",)],
        "mapped.test": [("::ffff:169.254.169.254", 0, 0, 0)],
        "fine.test": [("127.0.0.1",)],
    }

    def fake(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host  # the executor's: bytes
        if host in answers:
            out = []
            for addr in answers[host]:
                fam = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
                sockaddr = (addr[0], int(port), *addr[2:]) if fam == socket.AF_INET6 \
                    else (addr[0], int(port))
                out.append((fam, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
            return out
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # the stdlib loop resolves via socket
    a = Awty(home, clock=clock, env={}, quick_retries=0)
    bad = [a.add(f"http://{name}:{rx.port}/meta", in_="1m").job for name in
           ("metadata.test", "mapped.test")]
    good = a.add(f"http://fine.test:{rx.port}/ok", in_="1m").job
    clock.set(good.next_check_at)
    s = a.run_slot(good.next_check_at)
    assert s.outcomes == {"done": 1, "failed": 2}
    assert [r.path for r in rx.requests()] == ["/ok"] and rx.connections == 1
    h = history(home)
    for j in bad:
        assert "resolves to a refused address" in h[j.id]["reason"]
        assert "link-local" in h[j.id]["reason"]


def _names_resolving_to_loopback() -> list[str]:
    out = []
    for name in dict.fromkeys([socket.gethostname(), "localhost.localdomain", "ip6-localhost",
                               "ip6-loopback"]):
        if not name or name == "localhost" or name.endswith(".localhost"):
            continue
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        import ipaddress

        addrs = {ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos}
        if addrs and all(a.is_loopback for a in addrs) and any(a.version == 4 for a in addrs):
            out.append(name)
    return out


@pytest.mark.slow
def test_deny_private_networks_refuses_at_fire_and_at_connect(home, rx):
    loopback_names = _names_resolving_to_loopback()
    targets = [rx.url("/literal"), f"http://localhost:{rx.port}/name"]
    targets += [f"http://{n}:{rx.port}/resolved" for n in loopback_names[:1]]
    ids = [added_id(invoke(home, "add", t, "--in", "1m", "--json")) for t in targets]
    write_config(home, "deny_private_networks = true\n")
    res = awty_proc(home, "run-slot", SLOT, "--json", env=clean_env(AWTY_NOW=AFTER,
                                                                     AWTY_QUICK_RETRIES=0))
    assert json.loads(res.stdout)["outcomes"] == {"failed": len(targets)}
    assert rx.requests() == [] and rx.connections == 0
    h = history(home)
    assert "loopback" in h[ids[0]]["reason"] and "deny_private_networks" in h[ids[1]]["reason"]
    if loopback_names:  # checked on the address the name resolved to, at connect time
        assert "resolves to a refused address" in h[ids[2]]["reason"], h[ids[2]]
        assert "loopback" in h[ids[2]]["reason"]
    for t in targets[:2]:  # and refused at add now that the setting is on
        assert invoke(home, "add", t, "--in", "1m").exit_code == 2


# --- 4. the signing secret goes nowhere -----------------------------------------------------------
def _needles(secret_text: str) -> list[bytes]:
    key = signing.parse_secret(secret_text)
    b64 = base64.b64encode(key).decode()
    return [secret_text.encode(), b64.encode(), b64.rstrip("=").encode(),
            base64.urlsafe_b64encode(key).rstrip(b"="), key, key.hex().encode(),
            key.hex().upper().encode()]


def _leaks(needles: list[bytes], where: dict[str, bytes]) -> list[str]:
    return [f"{name} holds {n[:12]!r}…" for name, blob in where.items() for n in needles
            if n in blob]


def _home_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.is_symlink()}


@pytest.mark.slow
@pytest.mark.parametrize("source", ["env", "file"])
def test_the_signing_secret_never_leaves_memory(home, tmp_path, source):
    secret = signing.new_secret()
    needles = _needles(secret)
    extra = {"AWTY_TIMEOUT": "1s", "AWTY_QUICK_RETRIES": "0"}
    if source == "env":
        extra["AWTY_SIGNING_SECRET"] = secret
    else:
        path = tmp_path / "secret"
        path.write_text(secret + "\n")
        os.chmod(path, 0o600)
        write_config(home, f'signing_secret_file = "{path}"\n')
    outputs: dict[str, bytes] = {}
    with Receiver() as rx:
        rx.script("/500", status=500, body="upstream exploded")
        rx.script("/401", status=401, body="bad signature, you sent something else")
        rx.script("/hang", hang=True)
        rx.script("/302", status=302, headers={"Location": "http://example.com/"})
        rx.script("/echo", status=400)  # reflects nothing secret: the signature is not the key
        rx.script("/ok", status=204)
        targets = [rx.url(p) for p in ("/500", "/401", "/hang", "/302", "/echo", "/ok")]
        targets.append(f"http://127.0.0.1:{free_port()}/refused")
        ids = [added_id(invoke(home, "add", t, "--in", "1m", "--json", env=extra))
               for t in targets]
        for cmd in ('env; echo "secret=$AWTY_SIGNING_SECRET"; exit 3',
                    'cat /proc/self/environ | tr "\\0" "\\n"; exit 0'):
            ids.append(added_id(invoke(home, "add", cmd, "--exec", "--in", "1m", "--json",
                                       env=extra)))
        for i, at in enumerate((AFTER, iso(T0 + timedelta(minutes=40)),
                                iso(T0 + timedelta(hours=3)))):
            res = awty_proc(home, "catchup", "--json", env=clean_env(AWTY_NOW=at, **extra))
            assert res.returncode == 0, res.stderr
            outputs[f"catchup {i}"] = (res.stdout + res.stderr).encode()
        signed = [r for r in rx.requests() if r.path == "/ok"]
        assert signed and "webhook-signature" in signed[0].headers  # the secret was in use
        assert rx.requests("/echo")
    assert history(home)  # failures recorded, with their errors and outputs
    for args in (["list"], ["list", "--json"], ["history"], ["history", "--json"], ["slots"],
                 ["slots", "--json"], ["stats"], ["stats", "--json"],
                 *[["show", i] for i in ids], *[["show", i, "--json"] for i in ids]):
        res = invoke(home, *args, env={**extra, "AWTY_NOW": AFTER})
        assert res.exit_code == 0, (args, res.stderr)
        outputs[" ".join(args)] = (res.stdout + res.stderr).encode()
    # A malformed secret is reported without being echoed.
    bad = "whsec_" + secret[6:-4] + "!!!!"
    res = awty_proc(home, "run-slot", "--json",
                    env=clean_env(AWTY_NOW=iso(T0 + timedelta(days=1)), AWTY_SIGNING_SECRET=bad))
    outputs["bad secret"] = (res.stdout + res.stderr).encode()
    bad_needles = needles + [bad.encode(), bad[6:].encode()]
    files = _home_files(home)
    assert "awty.db" in files and "awty.log" in files
    assert _leaks(bad_needles, {**outputs, **files}) == []
    log = files["awty.log"].decode()
    assert "failed" in log or "set aside" in log  # the log was written, and is clean


# --- 5. credentials in custom headers are shown as *** --------------------------------------------
CREDS = {
    "Authorization": "Bearer tok-AAAA-1111",
    "proxy-authorization": "Basic cHJveHk6c2VjcmV0LUJCQkI=",
    "Cookie": "session=CCCC-2222",
    "X-Api-Key": "key-DDDD-3333",
    "X-Auth-Token": "tok-EEEE-4444",
    "X-Client-Secret": "sec-FFFF-5555",
    "AUTHORIZATION-2": "not-a-credential-name",  # not a credential header: shown
}


@pytest.mark.slow
def test_credential_headers_are_redacted_in_list_and_show(home, rx):
    rx.script("/creds", status=[503, 401])
    hdrs = [f"{k}: {v}" for k, v in CREDS.items()] + ["X-Tenant: visible-7"]
    args = ["add", rx.url("/creds"), "--in", "1m", "--json"]
    for h in hdrs:
        args += ["--header", h]
    job_id = added_id(invoke(home, *args))
    secrets = [v for k, v in CREDS.items() if k != "AUTHORIZATION-2"]
    secrets += [v.split(" ", 1)[-1] for v in secrets]
    seen: dict[str, str] = {}

    def look(*args, at=NOW):
        res = invoke(home, *args, env={"AWTY_NOW": at, "COLUMNS": "400"})
        assert res.exit_code == 0, (args, res.stderr)
        seen[" ".join(args)] = res.stdout + res.stderr
        return res.stdout

    for fmt in ([], ["--json"]):
        look("list", *fmt)
        look("list", "--entity", "x", *fmt)
        look("show", job_id, *fmt)
    doc = json.loads(look("show", job_id, "--json"))
    assert doc["headers"]["X-Tenant"] == "visible-7"
    assert doc["headers"]["AUTHORIZATION-2"] == "not-a-credential-name"
    for k in CREDS:
        if k != "AUTHORIZATION-2":
            assert doc["headers"][k] == "***", k
    assert "visible-7" in look("show", job_id)
    # Fire: 503 (re-slotted), then 401 (failed); retry re-arms it; every view stays redacted.
    a = Awty(home, env={"AWTY_NOW": AFTER, "AWTY_QUICK_RETRIES": "0"})
    a.run_slot()
    look("list", "--json", at=AFTER)
    look("show", job_id, at=AFTER)
    later = iso(T0 + timedelta(hours=2))
    Awty(home, env={"AWTY_NOW": later, "AWTY_QUICK_RETRIES": "0"}).catchup()
    assert history(home)[job_id]["outcome"] == "failed"
    look("show", job_id, at=later)
    look("show", job_id, "--json", at=later)
    look("history", "--json", at=later)
    look("retry", job_id, "--json", at=later)
    look("show", job_id, "--json", at=later)
    # The receiver got the real values: they are stored to be sent, only never shown.
    got = rx.requests("/creds")[0].headers
    assert got["authorization"] == CREDS["Authorization"] and got["cookie"] == CREDS["Cookie"]
    leaks = [(cmd, s) for cmd, out in seen.items() for s in secrets if s in out]
    assert leaks == []


# --- 6. permissions under a permissive umask ------------------------------------------------------
def _open_to_others(home: Path) -> list[str]:
    bad = []
    for p in [home, *home.rglob("*")]:
        mode = os.lstat(p).st_mode
        if stat.S_ISLNK(mode):
            continue
        if mode & 0o077:
            bad.append(f"{p.relative_to(home.parent)} {stat.S_IMODE(mode):04o}")
    return bad


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.mark.parametrize("first", ["add", "init"])
@pytest.mark.slow
def test_a_fresh_home_is_private_under_umask_0(tmp_path, first):
    home = tmp_path / "deep" / "er" / "home"
    old = os.umask(0)
    try:
        if first == "add":
            res = invoke(home, "add", "https://example.com/hook", "--in", "1m")
        else:
            res = invoke(home, "init")
        assert res.exit_code == 0, res.stderr
        assert _mode(home) == 0o700 and _mode(home / "awty.db") == 0o600
        if first == "init":
            assert _mode(home / "awty.toml") == 0o600 and _mode(home / "slots") == 0o700
        # Then a run with a tiny log limit (rotation), a set-aside file, and a second add.
        with Receiver() as rx:
            invoke(home, "add", rx.url("/x"), "--in", "1m")
            (home / "slots").mkdir(exist_ok=True)
            (home / "slots" / SLOT).mkdir(exist_ok=True)
            fd = os.open(home / "slots" / SLOT / "junk.json", os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, b"junk")  # (another program's file: its mode is its own business)
            os.close(fd)
            for i in range(3):
                invoke(home, "add", rx.url("/x"), "--in", "1m")
                res = invoke(home, "run-slot", SLOT,
                             env={"AWTY_NOW": AFTER, "AWTY_LOG_MAX_BYTES": "150"})
                assert res.exit_code == 0, res.stderr
        res = awty_proc(home, "add", "https://example.com/hook", "--in", "1m", umask=0)
        assert res.returncode == 0, res.stderr
    finally:
        os.umask(old)
    assert (home / "awty.log.1").exists()  # rotated at least once
    assert _mode(home / "awty.log") == 0o600
    assert (home / "rejected" / SLOT / "junk.json").exists()
    loose = _open_to_others(home)
    assert loose == [], loose


def test_a_loose_home_and_database_are_tightened(home):
    invoke(home, "add", "https://example.com/hook", "--in", "1m")
    os.chmod(home, 0o755)
    os.chmod(home / "awty.db", 0o644)
    res = awty_proc(home, "list", env=clean_env(AWTY_NOW=NOW), umask=0)
    assert res.returncode == 0
    assert _mode(home) == 0o700 and _mode(home / "awty.db") == 0o600
