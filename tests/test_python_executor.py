"""The python executor: package.module:function called in a worker process with the job."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from awty.clock import FixedClock
from awty.config import Settings
from awty.executors.python import PythonExecutor
from awty.executors.pyworker import job_from_dict, job_to_dict
from awty.model import Answer, Attempt, Job, Kind, Result
import helpers

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

CHECKS = '''
import json, os, time
from datetime import datetime, timedelta, timezone, date

def done(job):
    return None

def later(job):
    return timedelta(minutes=90)

def at_aware(job):
    return datetime(2030, 1, 3, 10, 0, tzinfo=timezone(timedelta(hours=2)))

def at_naive(job):
    return datetime(2030, 1, 3, 10, 0)

def boom(job):
    raise RuntimeError("the service said no")

def exits(job):
    raise SystemExit(4)

def wrong(job):
    return 42

def a_date(job):
    return date(2030, 1, 3)

def noisy(job):
    print("hello from the function")
    print(json.dumps({"ok": True, "kind": "none", "value": None}))
    raise ValueError("still failing")

def echo(job):
    with open("seen.json", "w") as f:
        json.dump({"id": job.id, "kind": str(job.kind), "entity": job.entity_name,
                   "key": job.entity_key, "payload": job.payload,
                   "first_check_at": job.first_check_at.isoformat(),
                   "env_attempt": os.environ.get("AWTY_ATTEMPT"),
                   "secret": os.environ.get("AWTY_SIGNING_SECRET"),
                   "cwd": os.getcwd()}, f)
    try:
        job.entity_name = "changed"
    except Exception as e:
        return timedelta(seconds=1) if "frozen" in type(e).__name__.lower() + str(e) else None
    return None

def fields(job):
    with open("fields.json", "w") as f:
        json.dump({"body": {"id": job.id, "entity": job.entity, "key": job.key,
                            "payload": job.payload, "check": job.check, "attempt": job.attempt,
                            "slot": job.slot, "first_check_at": job.first_check_at.isoformat(),
                            "schedule": job.schedule,
                            "occurrence": job.occurrence and job.occurrence.isoformat()},
                   "aliases": [job.entity_name, job.entity_key, str(job.kind), job.target,
                               job.check_count, job.payload_json, job.job.id],
                   "type": type(job).__name__}, f)

def hang(job):
    with open("pid", "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)

async def coro(job):
    return timedelta(seconds=30)

class Checker:
    @staticmethod
    def check(job):
        return timedelta(hours=1)

not_callable = 3
'''


def make_job(target: str, cwd: Path | None, **kw: Any) -> Job:
    return helpers.make_job(target, id="01JOBPY", kind=Kind.PYTHON, at=NOW,
                            payload=kw.pop("payload", {"order": 7}), entity="order", key="7",
                            cwd=str(cwd) if cwd else None, **kw)


def run(target: str, cwd: Path | None, *, timeout: float = 20.0, **kw: object) -> Result:
    ex = PythonExecutor(Settings(), FixedClock(NOW))

    async def go() -> Result:
        try:
            return await ex.run(make_job(target, cwd, **kw),
                                Attempt("203001011200", 1, 2, timeout))
        finally:
            await ex.close()

    return asyncio.run(go())


def alive(pid: int) -> bool:
    """A zombie (reparented to a pid 1 that does not reap) counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def project(tmp_path: Path) -> Path:
    (tmp_path / "mychecks.py").write_text(CHECKS)
    return tmp_path


def test_none_is_done(tmp_path):
    r = run("mychecks:done", project(tmp_path))
    assert r.answer is Answer.DONE
    assert r.error is None


def test_timedelta_is_recheck_at_now_plus_delta(tmp_path):
    r = run("mychecks:later", project(tmp_path))
    assert r.answer is Answer.RECHECK
    assert r.recheck_at == NOW + timedelta(minutes=90)


def test_datetime_is_recheck(tmp_path):
    r = run("mychecks:at_aware", project(tmp_path))
    assert r.answer is Answer.RECHECK
    assert r.recheck_at == datetime(2030, 1, 3, 8, 0, tzinfo=UTC)
    r = run("mychecks:at_naive", project(tmp_path))  # naive is UTC
    assert r.recheck_at == datetime(2030, 1, 3, 10, 0, tzinfo=UTC)


def test_exception_is_retry_with_message(tmp_path):
    r = run("mychecks:boom", project(tmp_path))
    assert r.answer is Answer.RETRY
    assert r.error == "RuntimeError: the service said no"
    assert "Traceback" in r.output


def test_system_exit_is_retry(tmp_path):
    r = run("mychecks:exits", project(tmp_path))
    assert r.answer is Answer.RETRY
    assert r.error == "SystemExit: 4"


def test_prints_cannot_forge_the_answer(tmp_path):
    r = run("mychecks:noisy", project(tmp_path))
    assert r.answer is Answer.RETRY
    assert r.error == "ValueError: still failing"
    assert "hello from the function" in r.output


def test_other_return_values_fail(tmp_path):
    r = run("mychecks:wrong", project(tmp_path))
    assert r.answer is Answer.FAIL
    assert "returned int" in r.error
    r = run("mychecks:a_date", project(tmp_path))
    assert r.answer is Answer.FAIL
    assert "date without a time" in r.error


def test_bad_targets_fail(tmp_path):
    cwd = project(tmp_path)
    for target, words in [("not a target", "expected package.module:function"),
                          ("mychecks", "expected package.module:function"),
                          ("no_such_module_xyz:f", "No module named"),
                          ("mychecks:missing", "no attribute"),
                          ("mychecks:not_callable", "not callable")]:
        r = run(target, cwd)
        assert r.answer is Answer.FAIL, target
        assert words in r.error, (target, r.error)


def test_import_time_syntax_error_fails(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    r = run("broken:f", tmp_path)
    assert r.answer is Answer.FAIL
    assert "SyntaxError" in r.error


def test_missing_cwd_fails(tmp_path):
    r = run("mychecks:done", tmp_path / "gone")
    assert r.answer is Answer.FAIL
    assert "no longer exists" in r.error


def test_function_receives_the_job(tmp_path, monkeypatch):
    monkeypatch.setenv("AWTY_SIGNING_SECRET", "whsec_topsecret")
    cwd = project(tmp_path)
    r = run("mychecks:echo", cwd)
    assert r.answer is Answer.RECHECK  # the job was read-only (frozen)
    seen = json.loads((cwd / "seen.json").read_text())
    assert seen == {"id": "01JOBPY", "kind": "python", "entity": "order", "key": "7",
                    "payload": {"order": 7}, "first_check_at": NOW.isoformat(),
                    "env_attempt": "2", "secret": None, "cwd": str(cwd)}


@pytest.mark.parametrize("occurrence", [None, NOW - timedelta(minutes=5)])
def test_the_function_gets_the_fields_of_the_http_body(tmp_path, occurrence):
    """The same names, and values, as the JSON an http job POSTs for the same attempt: a
    ``--call`` function and a webhook handler read one shape."""
    from awty.executors.http import callback_body

    cwd = project(tmp_path)
    extra = {"schedule": "nightly", "occurrence": occurrence} if occurrence else {}
    attempt = Attempt("203001011200", 1, 2, 20.0)
    r = run("mychecks:fields", cwd, **extra)
    assert r.answer is Answer.DONE, r.error
    seen = json.loads((cwd / "fields.json").read_text())
    body = json.loads(callback_body(make_job("mychecks:fields", cwd, **extra), attempt))
    assert seen["type"] == "Call"
    for name, value in body.items():
        got = seen["body"][name]
        if name in ("first_check_at", "occurrence"):
            got = datetime.fromisoformat(got).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert got == value, name
    assert set(seen["body"]) == {"id", "entity", "key", "payload", "check", "attempt", "slot",
                                 "first_check_at", "schedule", "occurrence"}
    assert set(body) <= set(seen["body"])
    # today's names stay as aliases (the Job's fields); .job is the whole record
    assert seen["aliases"] == ["order", "7", "python", "mychecks:fields", 0, '{"order": 7}',
                               "01JOBPY"]


@pytest.mark.slow
def test_hung_function_is_killed_at_the_timeout(tmp_path):
    cwd = project(tmp_path)
    t0 = time.monotonic()
    r = run("mychecks:hang", cwd, timeout=1.5)
    elapsed = time.monotonic() - t0
    assert r.answer is Answer.RETRY
    assert r.error == "timeout after 1.5s"
    assert elapsed < 1.5 + 2.0
    pid = int((cwd / "pid").read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_async_function_and_class_attribute(tmp_path):
    cwd = project(tmp_path)
    r = run("mychecks:coro", cwd)
    assert r.answer is Answer.RECHECK and r.recheck_at == NOW + timedelta(seconds=30)
    r = run("mychecks:Checker.check", cwd)
    assert r.answer is Answer.RECHECK and r.recheck_at == NOW + timedelta(hours=1)


def test_stdlib_target_without_cwd():
    # json.dumps(job) raises TypeError: a retryable failure with the message
    r = run("json:dumps", None)
    assert r.answer is Answer.RETRY
    assert r.error.startswith("TypeError:")


def test_job_round_trips_through_json():
    job = make_job("m:f", Path("/tmp"), check_count=2, attempt=1, timeout=3.5,
                   created_at=NOW, last_error="x")
    assert job_from_dict(json.loads(json.dumps(job_to_dict(job)))) == job


def test_worker_imports_stay_lean():
    code = ("import sys, awty.executors.pyworker; "
            "print(sorted(m for m in ('typer', 'rich', 'sqlite_utils', 'click', 'requests', "
            "'dateutil', 'filelock') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
