"""exec jobs run in the environment they were added in, as ``at`` does (issue 15, item 2):
recorded at add (PATH, exported variables; never secrets; capped), restored at run time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty import execenv, jobspec
from awty.clock import FixedClock
from awty.config import Settings
from awty.executors.exec import ExecExecutor
from awty.model import Answer, Attempt, Job, Kind, Result

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SPEC = {"kind": "exec", "target": "mytool", "in": "1h"}


# --- what is recorded ------------------------------------------------------------------------
@pytest.mark.parametrize("name, kept", [
    ("PATH", True), ("MYVAR", True), ("LANG", True), ("HOME", True), ("AWTY_HOME", True),
    ("AWTY_SIGNING_SECRET", False), ("AWTY_SIGNING_SECRET_FILE", False),
    ("GITHUB_TOKEN", False), ("AWS_SECRET_ACCESS_KEY", False), ("PGPASSWORD", False),
    ("MYSQL_PWD_PASSWD", False), ("api_key", False), ("GOOGLE_APPLICATION_CREDENTIALS", False),
    ("SSH_AUTH_SOCK", False), ("GPG_PASSPHRASE", False), ("SESSION_COOKIE", False),
    ("TLS_PRIVATE", False), ("MYSQL_PWD", False), ("DB_PASS", False), ("CI_JOB_JWT", False),
    ("SENTRY_DSN", False), ("SLACK_WEBHOOK_URL", False),
    ("_", False), ("SHLVL", False), ("PWD", False), ("OLDPWD", False), ("TERM", False),
])
def test_what_is_recorded(name, kept):
    assert (name in execenv.capture({name: "v"})) is kept


@pytest.mark.parametrize("value, secret", [
    ("postgresql://app:pw@db/app", True), ("redis://:pw@cache:6379/0", True),
    ("http://user:pass@proxy:3128", True), ("postgresql://app@db/app?password=pw", True),
    ("AccountName=a;AccountKey=bXlrZXk=;EndpointSuffix=core.windows.net", True),
    ("host=db user=app password=hunter2", True), ("--token=abc", True),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", True),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", True), ("Bearer abcdefgh12345", True),
    ("ghp_R8mQ2xV7kL9pT4nB6wZ1cY3dF5gH0jK2sA4e", True), ("xoxb-123456789-abcdefgh", True),
    ("sk_live_51HxQ2mK9vL3pR7tW", True), ("AKIAIOSFODNN7EXAMPLE", True),
    ("whsec_MfKQ9r8GKYqXnB7wQAg0", True),
    ("Zx8Qm2Lr7Vk4Tn9Wb3Pc6Hy1Jd5Gf0Ns", True),  # random base62
    ("4f1c2a9be07d4c3e8a15b6d9f0e2c7a1", True),  # 32 hex digits
    ("k3j9x2m7q8w1z5v4b6n0p2r8t7y3u9c1", True),  # random lower case and digits, 32
    ("https://hooks.slack.com/services/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", True),
    # what shells usually hold
    ("hello", False), ("/usr/lib/jvm/java-17-openjdk-amd64/bin", False), ("en_US.UTF-8", False),
    ("postgresql://awty@db.example.com/awty", False), ("https://hooks.example.com/ok", False),
    ("123e4567-e89b-12d3-a456-426614174000", False), ("MyApplicationServer2Config", False),
    ("SomeVeryLongCamelCaseIdentifier123", False), ("release-2024-06-01-build1234", False),
    ("-Xmx2g -Dfile.encoding=UTF-8", False), ("unix:path=/run/user/1000/bus", False),
    ("rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01", False),
    ("/home/user/.local/share/virtualenvs/awty-Abc12XyZ/bin", False),
    ("Mozilla/5.0 (X11; Linux x86_64)", False), ("ubuntu-22.04-x86_64-20240101", False),
])
def test_values_that_hold_a_credential(value, secret):
    assert execenv.looks_secret(value) is secret
    assert ("PLAIN" in execenv.capture({"PLAIN": value})) is not secret


def test_always_kept_and_allowed_names():
    env = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C", "TZ": "UTC",
           "MY_APP_KEY": "k", "GIT_COMMIT": "9fceb02d0ae598e95dc970b74767f19372d61af8",
           "OTHER_KEY": "k", "AWTY_SIGNING_SECRET": "whsec_x"}
    got = execenv.capture(env, allow=("MY_APP_KEY", "GIT_*", "AWTY_SIGNING_SECRET"))
    assert set(got) == {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "MY_APP_KEY", "GIT_COMMIT"}


def test_exec_env_allow_setting(tmp_path):
    from awty.config import load
    from awty.errors import InvalidInput

    assert load(tmp_path, env={"AWTY_EXEC_ENV_ALLOW": "A, GIT_*"}).exec_env_allow == (
        "A", "GIT_*")
    (tmp_path / "awty.toml").write_text('exec_env_allow = ["MY_APP_KEY"]\n')
    assert load(tmp_path, env={}).exec_env_allow == ("MY_APP_KEY",)
    with pytest.raises(InvalidInput, match="exec_env_allow: bad value .*not a variable name"):
        load(tmp_path, env={"AWTY_EXEC_ENV_ALLOW": "A B"})


@pytest.mark.slow
def test_over_the_cap_the_largest_go_and_are_named():
    env = {"PATH": "/bin:" + "p" * 40_000, "BIG": "x" * 15_000, "HUGE": "y" * 50_000,
           "SMALL": "s"}
    got = execenv.capture(env, limit=64 * 1024)
    assert got["PATH"] == env["PATH"] and got["SMALL"] == "s"  # PATH is never left out
    assert "HUGE" not in got and "BIG" in got
    assert got[execenv.DROPPED] == "HUGE"
    assert sum(len(k) + len(v) + 2 for k, v in got.items()) <= 64 * 1024
    assert execenv.DROPPED not in execenv.capture({"A": "1"})


def test_text_that_cannot_be_stored_is_left_out():
    assert execenv.capture({"A": "ok", "B": "\udcff", "C": "a\0b"}) == {"A": "ok"}


# --- at add (jobspec) --------------------------------------------------------------------------
def test_add_records_the_environment_of_an_exec_job():
    environ = {"PATH": "/opt/tools/bin:/usr/bin", "MYVAR": "hello", "API_TOKEN": "t0k"}
    job, _ = jobspec.build(SPEC, now=NOW, settings=Settings(), cwd="/srv", environ=environ)
    assert job.env == {"PATH": "/opt/tools/bin:/usr/bin", "MYVAR": "hello"}
    assert job.cwd == "/srv"


def test_add_defaults_to_this_process_environment(monkeypatch):
    monkeypatch.setenv("MYVAR", "from-os")
    job, _ = jobspec.build(SPEC, now=NOW, settings=Settings())
    assert job.env is not None and job.env["MYVAR"] == "from-os"


@pytest.mark.parametrize("spec, settings, due, environ", [
    # turned off: this process's environment is not recorded (one given explicitly is, as
    # `awty serve --exec-env` gives it: see the next test)
    (SPEC, Settings(exec_env=False), None, None),
    ({"target": "https://example.com/", "in": "1h"}, Settings(), None, {"MYVAR": "x"}),
    ({"kind": "python", "target": "json:loads", "in": "1h"}, Settings(), None, {"MYVAR": "x"}),
    ({"kind": "exec", "target": "true"}, Settings(dropin_kinds=("exec",)),
     NOW + timedelta(hours=1), {"MYVAR": "x"}),  # a drop-in was not added from a shell
])
def test_no_environment_recorded(spec, settings, due, environ, monkeypatch):
    monkeypatch.setenv("MYVAR", "from-os")
    job, _ = jobspec.build(spec, now=NOW, settings=settings, due=due, environ=environ)
    assert job.env is None


def test_an_environment_given_is_recorded_and_filtered_even_with_exec_env_off():
    environ = {"MYVAR": "x", "DATABASE_URL": "postgresql://app:pw@db/app"}
    job, _ = jobspec.build(SPEC, now=NOW, settings=Settings(exec_env=False), environ=environ)
    assert job.env == {"MYVAR": "x"}


def test_exec_env_setting():
    from awty.config import load

    assert load(Path("/nonexistent"), env={"AWTY_EXEC_ENV": "false"}).exec_env is False
    assert load(Path("/nonexistent"), env={}).exec_env is True


# --- at run time (a real subprocess) ---------------------------------------------------------
def tool_dir(tmp_path: Path) -> Path:
    bindir = tmp_path / "tools"
    bindir.mkdir()
    (bindir / "mytool").write_text("#!/bin/sh\necho \"mytool ran with MYVAR=$MYVAR\"\n")
    (bindir / "mytool").chmod(0o755)
    return bindir


def run(job: Job) -> Result:
    async def go() -> Result:
        ex = ExecExecutor(Settings(), FixedClock(NOW))
        try:
            return await ex.run(job, Attempt("203001011200", 0, 1, 10.0))
        finally:
            await ex.close()

    return asyncio.run(go())


def exec_job(target: str, env: dict[str, str] | None) -> Job:
    return Job(id="0123456789ABCDEFGHJKMNPQRS", kind=Kind.EXEC, target=target,
               payload_json="null", headers={}, entity_name=None, entity_key=None,
               first_check_at=NOW, next_check_at=NOW, env=env)


def test_the_recorded_environment_is_restored(tmp_path, monkeypatch):
    bindir = tool_dir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # cron's
    monkeypatch.delenv("MYVAR", raising=False)
    monkeypatch.setenv("RUNNER_ONLY", "runner")
    monkeypatch.setenv("AWTY_SIGNING_SECRET", "whsec_x")
    recorded = {"PATH": f"{bindir}:/usr/bin:/bin", "MYVAR": "hello",
                "AWTY_SIGNING_SECRET": "planted"}  # never passed on, even if recorded
    r = run(exec_job('mytool; echo "runner=${RUNNER_ONLY-unset} '
                     'secret=${AWTY_SIGNING_SECRET-unset} id=$AWTY_JOB_ID"', recorded))
    assert r.answer is Answer.DONE, r
    assert "mytool ran with MYVAR=hello" in r.output
    assert "runner=unset secret=unset id=0123456789ABCDEFGHJKMNPQRS" in r.output


def test_without_a_record_the_runner_environment_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("MYVAR", "runner's")
    r = run(exec_job('echo "MYVAR=$MYVAR"', None))
    assert "MYVAR=runner's" in r.output


# --- the whole path: add from a shell, run under cron's bare environment ----------------------
@pytest.mark.slow
def test_cli_add_then_run_under_a_bare_environment(home, tmp_path):
    bindir = tool_dir(tmp_path)
    out = tmp_path / "out.txt"
    now = datetime.now(UTC)
    shell = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "MYVAR": "hello",
             "AWTY_HOME": str(home), "AWTY_NOW": now.isoformat()}
    add = subprocess.run([sys.executable, "-m", "awty", "add", "--exec", f"mytool > {out}",
                          "--in", "1m"], env=shell, capture_output=True, text=True, timeout=60)
    assert add.returncode == 0, add.stderr
    cron = {"PATH": "/usr/bin:/bin", "AWTY_HOME": str(home),
            "AWTY_NOW": (now + timedelta(minutes=16)).isoformat()}
    res = subprocess.run([sys.executable, "-m", "awty", "catchup"], env=cron,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert out.read_text().strip() == "mytool ran with MYVAR=hello"


# --- a job added over HTTP: its token's environment, read when it runs -----------------------
def _with_tokens(executor: type, job: Job, lookup) -> Result:
    async def go() -> Result:
        ex = executor(Settings(), FixedClock(NOW), lookup)
        try:
            return await ex.run(job, Attempt("203001011200", 0, 1, 20.0))
        finally:
            await ex.close()

    return asyncio.run(go())


def test_a_token_reference_runs_with_the_tokens_environment_as_it_is_now(tmp_path,
                                                                          monkeypatch):
    from awty import tokens
    from awty.errors import StoreError
    from awty.executors.python import PythonExecutor

    monkeypatch.setenv("RUNNER_ONLY", "runner")
    token = tokens.make("ops", "jobs:exec", NOW, exec_env=[
        "PATH=/usr/bin:/bin", "DATABASE_URL=postgresql://u:pw@h/db", "AWTY_SIGNING_SECRET=x"])
    ref = execenv.token_ref("ops", token.ref)
    assert execenv.token_of(ref) == ("ops", token.ref)
    asked: list[str] = []

    def lookup(name: str):
        asked.append(name)
        return token

    job = exec_job('echo "db=$DATABASE_URL runner=${RUNNER_ONLY-unset} '
                   'secret=${AWTY_SIGNING_SECRET-unset} id=$AWTY_JOB_ID"', ref)
    r = _with_tokens(ExecExecutor, job, lookup)
    assert r.answer is Answer.DONE, r
    assert "db=postgresql://u:pw@h/db runner=unset secret=unset id=0123456789" in r.output
    assert asked == ["ops"]
    # changed since the job was added: the new value
    token = token.replace(exec_env={"DATABASE_URL": "rotated"})
    assert "db=rotated runner=unset" in _with_tokens(ExecExecutor, job, lookup).output
    # no environment given: the minimal one, HOME the job's directory
    token = token.replace(exec_env={})
    r = _with_tokens(ExecExecutor, job.replace(cwd=str(tmp_path)), lookup)
    assert r.answer is Answer.DONE and "db= runner=unset" in r.output

    # python jobs too
    (tmp_path / "envcheck.py").write_text(
        "import os\ndef show(call):\n    print(os.environ.get('DATABASE_URL'), "
        "os.environ.get('RUNNER_ONLY'), file=__import__('sys').stderr)\n")
    token = token.replace(exec_env={"DATABASE_URL": "py-db", "PATH": "/usr/bin:/bin"})
    pyjob = job.replace(kind=Kind.PYTHON, target="envcheck:show", cwd=str(tmp_path))
    r = _with_tokens(PythonExecutor, pyjob, lookup)
    assert r.answer is Answer.DONE and "py-db None" in r.output, r

    # revoked (none of that name, or another token of that name): failed, nothing ran
    marker = tmp_path / "ran"
    for now in (None, tokens.make("ops", "jobs:exec", NOW, exec_env=["A=1"])):
        r = _with_tokens(ExecExecutor, exec_job(f"touch {marker}", ref), lambda n, t=now: t)
        assert r.answer is Answer.FAIL and not marker.exists()
        assert r.error.startswith("token 'ops' was revoked: a job added with it does not run")
    r = _with_tokens(PythonExecutor, pyjob, lambda n: None)
    assert r.answer is Answer.FAIL and r.error.startswith("token 'ops' was revoked")
    # no store to ask (an executor made without one): failed, not run with ours
    r = _with_tokens(ExecExecutor, exec_job(f"touch {marker}", ref), None)
    assert r.answer is Answer.FAIL and not marker.exists()

    # the store cannot answer now: tried again later
    def down(name: str):
        raise StoreError("PostgreSQL at h: cannot read the token: connection refused")

    r = _with_tokens(ExecExecutor, exec_job(f"touch {marker}", ref), down)
    assert r.answer is Answer.RETRY and "connection refused" in r.error
    assert not marker.exists()


def test_a_token_reference_is_kept_as_it_is_and_never_made_from_an_environment():
    ref = execenv.token_ref("ops", "ab12")
    settings = Settings()
    for kind in ("exec", "python"):
        job, _ = jobspec.build({"target": "true" if kind == "exec" else "os:getcwd",
                                "kind": kind, "in": "1h"}, now=NOW, settings=settings,
                               cwd="/", environ=ref)
        assert job.env == {"=token": "ops#ab12"}
        # export and import keep it (the job fails on a home without that token)
        again, _ = jobspec.rebuild(job, now=NOW, settings=settings,
                                   kinds=("http", "exec", "python"), kind_refusal="{kind}")
        assert again.env == job.env
    http, _ = jobspec.build({"target": "https://example.com/", "in": "1h"}, now=NOW,
                            settings=settings, environ=ref)
    assert http.env is None
    # a shell's or a file's environment: a planted reference is not one, and no name with '='
    # is recorded (no process can be given it)
    assert execenv.token_of({"=token": "ops", "PATH": "/bin"}) is None
    assert execenv.capture({"=token": "ops#ab12", "A=B": "1", "PATH": "/bin"}) == {
        "PATH": "/bin"}
