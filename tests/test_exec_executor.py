"""The exec executor: /bin/sh -c target, payload on stdin, exit code and last line as answer."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty.clock import FixedClock
from awty.config import Settings
from awty.executors._proc import Capture
from awty.executors.exec import ExecExecutor
from awty.model import Answer, Attempt, Job, Kind, Result

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def make_job(target: str, *, cwd: str | None = None, payload: object = None,
             entity: str | None = "order", key: str | None = "42") -> Job:
    return Job(id="01JOBEXEC", kind=Kind.EXEC, target=target,
               payload_json=json.dumps(payload if payload is not None else {"n": 1}),
               headers={}, entity_name=entity, entity_key=key,
               first_check_at=NOW, next_check_at=NOW, cwd=cwd)


def run(target: str, *, timeout: float = 10.0, settings: Settings | None = None,
        **kw: object) -> Result:
    ex = ExecExecutor(settings or Settings(), FixedClock(NOW))

    async def go() -> Result:
        try:
            return await ex.run(make_job(target, **kw), Attempt("203001011200", 2, 3, timeout))
        finally:
            await ex.close()

    return asyncio.run(go())


def alive(pid: int) -> bool:
    """A zombie (reparented to a pid 1 that does not reap) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_exit_zero_is_done():
    r = run("echo hello")
    assert r.answer is Answer.DONE
    assert r.status == 0
    assert r.output == "hello\n"
    assert r.error is None
    assert r.duration > 0


def test_nonzero_exit_is_retry_with_status():
    r = run("echo oops >&2; exit 3")
    assert r.answer is Answer.RETRY
    assert r.status == 3
    assert r.error == "exit 3"
    assert "oops" in r.output


def test_killed_by_signal_is_retry_with_negative_status():
    r = run("kill -TERM $$")
    assert r.answer is Answer.RETRY
    assert r.status == -15
    assert "SIGTERM" in r.error


def test_payload_on_stdin():
    r = run("cat", payload={"order": 7, "note": "ünï"})
    assert r.answer is Answer.DONE
    assert json.loads(r.output) == {"order": 7, "note": "ünï"}


def test_command_that_ignores_stdin_still_finishes():
    r = run("true", payload={"x": "y" * 3000})
    assert r.answer is Answer.DONE


def test_env_has_job_context_and_no_secret(monkeypatch):
    monkeypatch.setenv("AWTY_SIGNING_SECRET", "whsec_topsecret")
    monkeypatch.setenv("AWTY_SIGNING_SECRET_FILE", "/etc/awty/secret")
    monkeypatch.setenv("SOME_OTHER_VAR", "kept")
    r = run("env", key=None)
    env = dict(line.split("=", 1) for line in r.output.splitlines() if "=" in line)
    assert env["AWTY_JOB_ID"] == "01JOBEXEC"
    assert env["AWTY_ENTITY"] == "order"
    assert env["AWTY_KEY"] == ""  # None -> empty string
    assert env["AWTY_CHECK"] == "2"
    assert env["AWTY_ATTEMPT"] == "3"
    assert env["AWTY_SLOT"] == "203001011200"
    assert env["SOME_OTHER_VAR"] == "kept"
    assert "AWTY_SIGNING_SECRET" not in env
    assert "AWTY_SIGNING_SECRET_FILE" not in env
    assert "topsecret" not in r.output


def test_cwd_is_honoured(tmp_path):
    (tmp_path / "marker.txt").write_text("here")
    r = run("pwd; cat marker.txt", cwd=str(tmp_path))
    assert r.answer is Answer.DONE
    assert r.output.splitlines() == [str(tmp_path), "here"]


def test_missing_cwd_fails(tmp_path):
    gone = tmp_path / "gone"
    r = run("true", cwd=str(gone))
    assert r.answer is Answer.FAIL
    assert "no longer exists" in r.error and str(gone) in r.error


def test_recheck_in_from_last_stdout_line():
    r = run("""echo working; echo '{"recheck_in": "2h"}'; echo""")
    assert r.answer is Answer.RECHECK
    assert r.recheck_at == NOW + timedelta(hours=2)


def test_recheck_at_from_last_stdout_line():
    r = run("""echo '{"recheck_at": "2030-01-02T08:30:00Z"}'""")
    assert r.answer is Answer.RECHECK
    assert r.recheck_at == datetime(2030, 1, 2, 8, 30, tzinfo=UTC)


def test_recheck_only_read_from_the_last_line_and_stdout():
    assert run("""echo '{"recheck_in": 60}'; echo finished""").answer is Answer.DONE
    assert run("""echo '{"recheck_in": 60}' >&2""").answer is Answer.DONE


def test_recheck_ignored_on_nonzero_exit():
    r = run("""echo '{"recheck_in": 60}'; exit 1""")
    assert r.answer is Answer.RETRY


def test_malformed_recheck_fails():
    r = run("""echo '{"recheck_in": "soon"}'""")
    assert r.answer is Answer.FAIL
    assert "re-check" in r.error and "soon" in r.error
    r = run("""echo '{"recheck_at": "next tuesday"}'""")
    assert r.answer is Answer.FAIL


def test_json_without_recheck_is_done():
    assert run("""echo '{"status": "ok"}'""").answer is Answer.DONE


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    r = run(f"sh -c 'sleep 30' & echo $! > {pidfile}; wait", timeout=1.0)
    elapsed = time.monotonic() - t0
    assert r.answer is Answer.RETRY
    assert r.error == "timeout after 1s"
    assert r.status is None
    assert elapsed < 1.0 + 2.0
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_background_leftovers_do_not_stall_nor_survive(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    r = run(f"sleep 30 & echo $! > {pidfile}; echo started", timeout=10.0)
    assert r.answer is Answer.DONE
    assert r.output == "started\n"
    assert time.monotonic() - t0 < 3
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_huge_output_is_truncated_but_drained():
    settings = Settings(history_output_bytes=1000)
    r = run("head -c 20000000 /dev/zero | tr '\\0' x; echo; echo the-end", settings=settings)
    assert r.answer is Answer.DONE
    assert len(r.output) < 1200
    assert r.output.startswith("xxx")
    assert "bytes skipped" in r.output
    assert r.output.endswith("the-end\n")


def test_recheck_after_huge_output_still_read():
    r = run("""head -c 5000000 /dev/zero | tr '\\0' x; echo; echo '{"recheck_in": "5m"}'""")
    assert r.answer is Answer.RECHECK
    assert r.recheck_at == NOW + timedelta(minutes=5)


def test_concurrent_runs_are_bounded():
    ex = ExecExecutor(Settings(concurrency=2), FixedClock(NOW))

    async def go() -> list[Result]:
        jobs = [ex.run(make_job("sleep 0.3"), Attempt("203001011200", 1, 1, 10)) for _ in range(4)]
        return await asyncio.gather(*jobs)

    t0 = time.monotonic()
    results = asyncio.run(go())
    assert all(r.answer is Answer.DONE for r in results)
    assert time.monotonic() - t0 >= 0.55  # two waves of two


def test_cancellation_kills_the_group(tmp_path):
    pidfile = tmp_path / "pid"
    ex = ExecExecutor(Settings(), FixedClock(NOW))

    async def go() -> None:
        task = asyncio.create_task(ex.run(make_job(f"sleep 30 & echo $! > {pidfile}; wait"),
                                          Attempt("203001011200", 1, 1, 30)))
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_capture_keeps_head_and_tail():
    c = Capture(10, 20)
    for i in range(100):
        c.feed(f"line{i}\n".encode())
    assert c.total == sum(len(f"line{i}\n") for i in range(100))
    assert c.last_line() == b"line99"
    text = c.render(10)
    assert text.startswith("line0") and text.endswith("e99\n") and "skipped" in text
    small = Capture(100, 100)
    small.feed(b"abc\n\n")
    assert small.render(100) == "abc\n\n" and small.last_line() == b"abc"
