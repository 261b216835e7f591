"""The exec executor: /bin/sh -c target, payload on stdin, exit code and last line as answer."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty.clock import FixedClock
from awty.config import Settings
from awty.executors._proc import Capture
from awty.executors.exec import ExecExecutor
from awty.model import Answer, Attempt, Job, Kind, Result
import helpers

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def make_job(target: str, *, cwd: str | None = None, payload: object = None,
             entity: str | None = "order", key: str | None = "42") -> Job:
    return helpers.make_job(target, id="01JOBEXEC", kind=Kind.EXEC, at=NOW,
                            payload=payload if payload is not None else {"n": 1},
                            entity=entity, key=key, cwd=cwd)


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


def gone_within(pid: int, seconds: float) -> bool:
    """True once ``pid`` has exited (a zombie counts), waited for at most ``seconds``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], seconds)[0]) or not alive(pid)
    finally:
        os.close(fd)


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


@pytest.mark.slow
def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    r = run(f"sh -c 'sleep 30' & echo $! > {pidfile}; wait", timeout=1.0)
    elapsed = time.monotonic() - t0
    assert r.answer is Answer.RETRY
    assert r.error == "timeout after 1s"
    assert r.status is None
    assert elapsed < 1.0 + 2.0
    assert gone_within(int(pidfile.read_text()), 2)


def test_background_leftovers_do_not_stall_nor_survive(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    r = run(f"sleep 30 & echo $! > {pidfile}; echo started", timeout=10.0)
    assert r.answer is Answer.DONE
    assert r.output == "started\n"
    assert time.monotonic() - t0 < 3
    assert gone_within(int(pidfile.read_text()), 2)


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


# The event loops a run may be on: the runner's (uvloop) and asyncio's own. Each has its own
# clean-up for a process whose start is cancelled half-way; neither kills the process group.
LOOPS = ["asyncio", "uvloop"]
PROMPT = 5.0  # seconds: a cancelled run ends well within this; its command would sleep 30


def loop_factory(name: str):
    if name == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def read_line(fifo: Path, within: float = 10.0) -> str:
    """The first line written to ``fifo`` (opened here for reading, so its writer may open it),
    waited for at most ``within`` seconds. Blocks its caller: on the loop, the loop stands still."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = b""
        end = time.monotonic() + within
        while not data.endswith(b"\n"):
            left = end - time.monotonic()
            assert left > 0, f"nothing written to {fifo} within {within}s"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 4096)
                assert chunk, f"{fifo} closed without a line"
                data += chunk
        return data.decode().strip()
    finally:
        os.close(fd)


def cancelled_run(loop: str, command: str, pid_of) -> tuple[float, bool]:
    """Start ``command`` in a run, await ``pid_of()`` (the pid of what it left in the
    background) and cancel the run there: (seconds from the cancel to the run's end, whether
    the background process was gone within 2 s). The background process is killed here in any
    case."""
    ex = ExecExecutor(Settings(), FixedClock(NOW))
    pid = 0

    async def go() -> float:
        nonlocal pid
        task = asyncio.create_task(ex.run(make_job(command), Attempt("203001011200", 1, 1, 60)))
        pid = await pid_of()
        t0 = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=PROMPT * 2)
        elapsed = time.monotonic() - t0
        assert task in done, f"the cancelled run had not ended {PROMPT * 2}s later"
        assert task.cancelled()
        return elapsed

    try:
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            elapsed = runner.run(go())
        return elapsed, gone_within(pid, 2)
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("loop", LOOPS)
def test_cancel_while_running_kills_the_group_at_once(tmp_path, loop):
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)

    async def pid_of() -> int:
        # the pid comes once the payload has been read to its end: the run is under way
        return int(await asyncio.to_thread(read_line, fifo))

    elapsed, gone = cancelled_run(loop, f"cat >/dev/null; sleep 30 & echo $! > {fifo}; wait",
                                  pid_of)
    assert elapsed < PROMPT
    assert gone


@pytest.mark.parametrize("loop", LOOPS)
def test_cancel_while_starting_kills_the_group_at_once(tmp_path, loop):
    """The cancel comes once the process is made, before the loop turns again (when
    loop.subprocess_exec is still connecting the pipes: its clean-up killed the shell alone,
    then asyncio waited 30 s for the pipes the `sleep 30` holds, uvloop left it running)."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)

    async def pid_of() -> int:
        await asyncio.sleep(0)  # the run's first step: the process is made
        return int(read_line(fifo))  # the loop held until the shell has its `sleep` going

    elapsed, gone = cancelled_run(loop, f"sleep 30 & echo $! > {fifo}; wait", pid_of)
    assert elapsed < PROMPT
    assert gone


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
