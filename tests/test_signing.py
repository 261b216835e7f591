"""Standard Webhooks signing: our signatures verify with the reference library, and back."""

from __future__ import annotations

import base64
import os
import stat
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from typer.testing import CliRunner

from awty import signing
from awty.api import Awty
from awty.cli import app
from awty.config import Settings
from awty.errors import InvalidInput

KEY = bytes(range(32))
SECRET_TEXT = "whsec_" + base64.b64encode(KEY).decode()
BODY = b'{"id":"01JX","payload":{"a":1}}'


def headers(msg_id: str, ts: int, sig: str) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}


# --- secrets -----------------------------------------------------------------------------------
def test_parse_secret_forms():
    assert signing.parse_secret(SECRET_TEXT) == KEY
    assert signing.parse_secret(SECRET_TEXT[len("whsec_"):]) == KEY  # bare base64
    assert signing.parse_secret("  " + SECRET_TEXT + "\n") == KEY  # as read from a file
    unpadded = "whsec_" + base64.b64encode(b"abcd").decode().rstrip("=")
    assert signing.parse_secret(unpadded) == b"abcd"


@pytest.mark.parametrize("bad", ["", "whsec_", "whsec_!!!not-base64!!!", "   ", "whsec_a b"])
def test_parse_secret_refuses_malformed_without_echoing(bad):
    with pytest.raises(InvalidInput) as e:
        signing.parse_secret(bad)
    msg = str(e.value)
    assert "whsec_" in msg  # says what is expected
    if bad.strip() and bad.strip() != "whsec_":
        assert bad.strip()[len("whsec_"):] not in msg


def test_new_secret_is_fresh_and_parses():
    a, b = signing.new_secret(), signing.new_secret()
    assert a != b and a.startswith("whsec_")
    assert 24 <= len(signing.parse_secret(a)) <= 32
    Webhook(a)  # the reference library accepts it


# --- sign / verify -------------------------------------------------------------------------------
def test_sign_format_and_round_trip():
    now = datetime.now(UTC)
    ts = int(now.timestamp())
    sig = signing.sign(KEY, "msg_1", ts, BODY)
    assert sig.startswith("v1,")
    assert len(base64.b64decode(sig[3:])) == 32
    assert signing.sign(KEY, "msg_1", ts, BODY) == sig  # deterministic
    signing.verify(KEY, headers("msg_1", ts, sig), BODY, now)


def test_signature_verifies_with_standardwebhooks():
    ts = int(datetime.now(UTC).timestamp())
    sig = signing.sign(KEY, "msg_2", ts, BODY)
    assert Webhook(SECRET_TEXT).verify(BODY, headers("msg_2", ts, sig)) == {
        "id": "01JX", "payload": {"a": 1}}


@pytest.mark.parametrize("size", [1, 24, 32, 63, 64, 65, 200])
def test_sign_is_hmac_sha256_for_any_key_length(size):
    """The HMAC is built from SHA-256 (its padded keys computed once a secret): the same bytes
    as hmac.new for keys shorter, as long as and longer than SHA-256's block, and accepted by
    the reference library."""
    import hashlib
    import hmac

    key = os.urandom(size)
    for body in (b"{}", BODY, b'{"x":"%s"}' % os.urandom(500).hex().encode()):
        ts = int(datetime.now(UTC).timestamp())
        mac = hmac.new(key, f"msg_{size}.{ts}.".encode() + body, hashlib.sha256).digest()
        sig = signing.sign(key, f"msg_{size}", ts, body)
        assert sig == "v1," + base64.b64encode(mac).decode()
        Webhook("whsec_" + base64.b64encode(key).decode()).verify(
            body, headers(f"msg_{size}", ts, sig))
    assert signing.signatures((key, KEY), "m", 1, BODY) == (
        f"{signing.sign(key, 'm', 1, BODY)} {signing.sign(KEY, 'm', 1, BODY)}")


def test_standardwebhooks_signature_verifies_with_ours():
    now = datetime.now(UTC).replace(microsecond=0)
    sig = Webhook(SECRET_TEXT).sign("msg_3", now, BODY.decode())
    signing.verify(KEY, headers("msg_3", int(now.timestamp()), sig), BODY, now)


def test_verify_headers_any_case_and_several_signatures():
    now = datetime.now(UTC)
    ts = int(now.timestamp())
    good = signing.sign(KEY, "m", ts, BODY)
    other = signing.sign(b"another key", "m", ts, BODY)
    hs = {"Webhook-Id": "m", "WEBHOOK-TIMESTAMP": str(ts),
          "webhook-Signature": f"v2,zzzz {other} {good}"}
    signing.verify(KEY, hs, BODY, now)


@pytest.mark.parametrize("change", ["body", "id", "timestamp", "key"])
def test_tampering_is_refused(change):
    now = datetime.now(UTC)
    ts = int(now.timestamp())
    sig = signing.sign(KEY, "m", ts, BODY)
    body, msg_id, key, hts = BODY, "m", KEY, ts
    if change == "body":
        body = BODY.replace(b"1", b"2")
    elif change == "id":
        msg_id = "m2"
    elif change == "timestamp":
        hts = ts - 1
    else:
        key = b"x" * 32
    with pytest.raises(InvalidInput, match="signature mismatch"):
        signing.verify(key, headers(msg_id, hts, sig), body, now)


def test_old_and_future_timestamps_are_refused():
    now = datetime.now(UTC)
    old = int((now - timedelta(minutes=6)).timestamp())
    new = int((now + timedelta(minutes=6)).timestamp())
    with pytest.raises(InvalidInput, match="timestamp too old"):
        signing.verify(KEY, headers("m", old, signing.sign(KEY, "m", old, BODY)), BODY, now)
    with pytest.raises(InvalidInput, match="timestamp too new"):
        signing.verify(KEY, headers("m", new, signing.sign(KEY, "m", new, BODY)), BODY, now)
    # the tolerance is a parameter
    signing.verify(KEY, headers("m", old, signing.sign(KEY, "m", old, BODY)), BODY, now,
                   tolerance=3600)
    # and the reference library agrees about old ones
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET_TEXT).verify(BODY, headers("m", old, signing.sign(KEY, "m", old, BODY)))


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_header(missing):
    now = datetime.now(UTC)
    ts = int(now.timestamp())
    hs = headers("m", ts, signing.sign(KEY, "m", ts, BODY))
    del hs[missing]
    with pytest.raises(InvalidInput, match=f"missing header {missing}"):
        signing.verify(KEY, hs, BODY, now)


def test_bad_timestamp_header():
    hs = {"webhook-id": "m", "webhook-timestamp": "soon", "webhook-signature": "v1,abc"}
    with pytest.raises(InvalidInput, match="bad webhook-timestamp"):
        signing.verify(KEY, hs, BODY, datetime.now(UTC))


# --- load_secret ------------------------------------------------------------------------------
def test_load_secret_env_wins(tmp_path):
    f = tmp_path / "secret"
    f.write_text(signing.new_secret())
    f.chmod(0o600)
    got = signing.load_secrets(Settings(signing_secret_file=str(f)),
                               {"AWTY_SIGNING_SECRET": SECRET_TEXT})
    assert got == (KEY,)


def test_load_secret_from_file(tmp_path):
    f = tmp_path / "secret"
    f.write_text(SECRET_TEXT + "\n")
    f.chmod(0o600)
    assert signing.load_secrets(Settings(signing_secret_file=str(f)), {}) == (KEY,)


def test_load_secret_none_when_unconfigured():
    assert signing.load_secrets(Settings(), {}) == ()
    assert signing.load_secrets(Settings(), {"AWTY_SIGNING_SECRET": ""}) == ()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_load_secret_refuses_group_or_other_readable_file(tmp_path, mode):
    f = tmp_path / "secret"
    f.write_text(SECRET_TEXT)
    f.chmod(mode)
    with pytest.raises(InvalidInput) as e:
        signing.load_secrets(Settings(signing_secret_file=str(f)), {})
    assert "chmod 600" in str(e.value)
    assert SECRET_TEXT not in str(e.value) and SECRET_TEXT[6:] not in str(e.value)


def test_load_secret_missing_or_malformed_file(tmp_path):
    with pytest.raises(InvalidInput, match="cannot read"):
        signing.load_secrets(Settings(signing_secret_file=str(tmp_path / "nope")), {})
    f = tmp_path / "secret"
    f.write_text("whsec_%%%%")
    os.chmod(f, 0o600)
    with pytest.raises(InvalidInput, match="not valid base64") as e:
        signing.load_secrets(Settings(signing_secret_file=str(f)), {})
    assert "%%%%" not in str(e.value)
    with pytest.raises(InvalidInput, match="AWTY_SIGNING_SECRET"):
        signing.load_secrets(Settings(), {"AWTY_SIGNING_SECRET": "whsec_%%%%"})


# --- awty verify ------------------------------------------------------------------------------
def saved(req) -> bytes:
    """A received request as a receiver would save it: header lines, a blank line, the body."""
    head = "".join(f"{k}: {v}\r\n" for k, v in req.raw_headers)
    return f"POST {req.path} HTTP/1.1\r\n{head}\r\n".encode() + req.body


def fire_one(home, clock, rx, path: str, env: dict | None = None, backend=None):
    """Add a job for ``rx``'s ``path`` and run its slot: (the job, the request received)."""
    a = Awty(home, clock=clock, env=env or {}, **(backend.kw if backend else {}))
    try:
        job = a.add(rx.url(path), in_="1m").job
        clock.set(job.next_check_at)
        a.run_slot()
    finally:
        a.close()
    (req,) = rx.requests(path)
    return job, req


def receiver_accepts(secret_text: str, req) -> bool:
    """What a receiver using the reference library says, at the time the request was sent."""
    at = datetime.fromtimestamp(int(req.headers["webhook-timestamp"]), UTC)
    with freeze_time(at):
        try:
            Webhook(secret_text).verify(req.body, req.headers)
        except WebhookVerificationError:
            return False
    return True


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_verify_command_names_the_job_and_its_check(tmp_path, home, clock, rx):
    job, req = fire_one(home, clock, rx, "/v", {"AWTY_SIGNING_SECRET": SECRET_TEXT})
    dump = tmp_path / "request.http"
    dump.write_bytes(saved(req))
    with freeze_time(clock.now()):
        res = cli("verify", str(dump), env={"AWTY_SIGNING_SECRET": SECRET_TEXT})
    assert res.exit_code == 0, res.stderr
    assert res.stdout == f"signature ok (job {job.id}, check 1; webhook-id {job.id}_1)\n"


# --- signed by default ------------------------------------------------------------------------
def test_a_fresh_home_signs_its_callbacks(tmp_path, home, clock, rx):
    res = cli("init", "--home", str(home))
    assert res.exit_code == 0, res.stderr
    secret = home / "signing.secret"
    assert f"created {secret}\n" in res.stdout
    assert f"callbacks are signed with the secret in {secret}" in res.stdout
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    text = secret.read_text()
    assert text.startswith("whsec_") and len(text.splitlines()) == 1
    assert f'signing_secret_file = "{secret}"' in (home / "awty.toml").read_text()
    job, req = fire_one(home, clock, rx, "/s")  # no AWTY_SIGNING_SECRET: the home's file
    assert receiver_accepts(text.strip(), req)
    assert not receiver_accepts(signing.new_secret(), req)
    # awty verify reads the home's secret like every other command
    dump = tmp_path / "request.http"
    dump.write_bytes(saved(req))
    with freeze_time(clock.now()):
        res = cli("verify", str(dump), "--home", str(home))
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("signature ok (job ")
    again = cli("init", "--home", str(home))  # a home that has its secret keeps it
    assert again.exit_code == 0 and "created" not in again.stdout
    assert secret.read_text() == text


@pytest.mark.slow
def test_init_keeps_the_secret_a_home_already_has(tmp_path, monkeypatch):
    # the environment's secret wins over any file: none is written beside it
    env_home = tmp_path / "env"
    assert cli("init", "--home", str(env_home),
               env={"AWTY_SIGNING_SECRET": SECRET_TEXT}).exit_code == 0
    assert not (env_home / "signing.secret").exists()
    # a configured file, wherever it is, stays the one
    own = tmp_path / "own.secret"
    own.write_text(SECRET_TEXT)
    own.chmod(0o600)
    cfg_home = tmp_path / "cfg"
    cfg_home.mkdir(mode=0o700)
    (cfg_home / "awty.toml").write_text(f'signing_secret_file = "{own}"\n')
    res = cli("init", "--home", str(cfg_home))
    assert res.exit_code == 0 and f"signed with the secret in {own}" in res.stdout
    assert not (cfg_home / "signing.secret").exists()
    # a signing.secret already in home (awty.toml lost its line) is kept and pointed at
    old_home = tmp_path / "old"
    old_home.mkdir(mode=0o700)
    (old_home / "signing.secret").write_text(SECRET_TEXT + "\n")
    (old_home / "signing.secret").chmod(0o600)
    res = cli("init", "--home", str(old_home))
    assert res.exit_code == 0 and "created" in res.stdout
    assert (old_home / "signing.secret").read_text() == SECRET_TEXT + "\n"
    assert "signing.secret" in (old_home / "awty.toml").read_text()


def test_two_secrets_while_rotating_either_verifies(tmp_path, home, clock, rx):
    old, new = signing.new_secret(), signing.new_secret()
    secrets = tmp_path / "secrets"
    secrets.write_text(f"# rotating: old first\n{old}\n\n{new}\n")
    secrets.chmod(0o600)
    home.mkdir(mode=0o700)
    (home / "awty.toml").write_text(f'signing_secret_file = "{secrets}"\n')
    job, req = fire_one(home, clock, rx, "/r")
    assert len(req.headers["webhook-signature"].split(" ")) == 2
    assert receiver_accepts(old, req) and receiver_accepts(new, req)
    assert not receiver_accepts(signing.new_secret(), req)
    at = datetime.fromtimestamp(int(req.headers["webhook-timestamp"]), UTC)
    signing.verify(signing.parse_secrets(new), req.headers, req.body, at)
    with pytest.raises(InvalidInput, match="signature mismatch"):
        signing.verify([signing.parse_secret(signing.new_secret())], req.headers, req.body, at)


def test_parse_secrets_one_a_line():
    assert signing.parse_secrets(f"{SECRET_TEXT}\n\n# next\n  {SECRET_TEXT}  \n") == (KEY, KEY)
    with pytest.raises(InvalidInput, match="line 2: signing secret is not valid base64") as e:
        signing.parse_secrets(f"{SECRET_TEXT}\nwhsec_%%%%\n")
    assert "%%%%" not in str(e.value)
    with pytest.raises(InvalidInput, match="empty"):
        signing.parse_secrets("# nothing but a comment\n\n")


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.slow
def test_on_postgres_only_the_first_init_writes_a_secret(tmp_path, backend, clock, rx):
    """Every host must sign with the same secret: the cluster's first init writes it, the
    others say to copy it (a secret of their own would not verify at the receiver)."""
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    first = cli("init", "--home", str(a), *backend.args, env=backend.env)
    assert first.exit_code == 0, first.stderr
    assert (a / "signing.secret").exists()
    other = cli("init", "--home", str(b), *backend.args, env=backend.env)
    assert other.exit_code == 0, other.stderr
    assert not (b / "signing.secret").exists()
    assert "callbacks from this host go unsigned: copy signing.secret from the host that " \
           "ran the first `awty init`" in other.stderr
    (b / "signing.secret").write_bytes((a / "signing.secret").read_bytes())
    (b / "signing.secret").chmod(0o600)
    assert cli("init", "--home", str(b), *backend.args, env=backend.env).stderr == ""
    job, req = fire_one(b, clock, rx, "/pg", env=backend.env, backend=backend)
    assert receiver_accepts((a / "signing.secret").read_text().strip(), req)
