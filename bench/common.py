"""What every part of the bench shares: where things are, the fixed secret and slot times,
and how the bench runs and stops its child processes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "bench"  # `python bench …` runs bench/__main__.py
BIN = Path(sys.executable).parent  # the venv's bin directory (not resolved: keep the venv)
AWTY_SCRIPT = BIN / "awty"
# Fixed secret: every callback is signed (SPEC 11 counts "sign" in end to end).
SECRET_TEXT = "whsec_" + base64.b64encode(b"awty-bench-secret-not-for-use!!!").decode()
SECRET = base64.b64decode(SECRET_TEXT[6:])
BASE = datetime(2030, 1, 1, tzinfo=UTC)  # slot times are built from here; clocks are fixed
R = 15  # minutes: awty's default resolution
RAISED = 128  # awty's default concurrency; the per-host cap is raised to it in one row
REQUESTS_THREADS = 32
PATH = "/hook"

CHILDREN: list[subprocess.Popen] = []  # every process the bench started: stopped at the end


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if the bench dies (Linux), so nothing outlives it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PDEATHSIG
        except (OSError, AttributeError):
            pass


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"receiver did not listen on 127.0.0.1:{port}") from None
            time.sleep(0.05)


def proc_cpu(pids: Iterable[int]) -> float:
    """utime + stime (seconds) of these processes, from /proc; 0 where unreadable."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def self_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


PYCACHE: list[Path] = []  # set by main: where subprocesses keep their bytecode cache


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of the bench's subprocesses: no AWTY_* from the caller; bytecode cached
    as in any installed package (a PYTHONDONTWRITEBYTECODE=1 environment would recompile
    awty's modules from source on every call), under the work directory rather than in
    awty/__pycache__ (PYTHONPYCACHEPREFIX)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWTY_")
           and k not in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE")}
    if PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE[0])
    env.update(extra)
    return env


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def slot_at(k: int) -> datetime:
    return BASE + timedelta(minutes=R * k)


def alternate(run: int, first, second) -> tuple:
    """The two things a run compares, in the order of run ``run``: swapped every other run,
    so that neither always pays for going first."""
    return (first, second) if run % 2 == 0 else (second, first)


def fmt_n(n: int) -> str:
    return f"{n:,}"


@dataclass
class Proc:
    rc: int
    wall: float
    maxrss_kb: int
    stdout: str
    stderr: str
    started: float  # epoch when the command was started (its launcher's fork)


def run_proc(cmd: Sequence[str], env: dict[str, str], workdir: Path, timeout: float,
             stdin_path: Path | None = None) -> Proc:
    """Run a subprocess; its peak RSS and wall time are taken by ``bench/launch.py`` (a small
    process between the bench and the command: the command's ru_maxrss would otherwise be at
    least the bench's own size, see there). The wall time is from the launcher's fork to the
    command's end (the launcher's own start-up is not in it)."""
    out_path, err_path = workdir / ".proc.out", workdir / ".proc.err"
    usage_path = workdir / ".proc.usage"
    usage_path.unlink(missing_ok=True)
    launcher = [sys.executable, "-I", "-S", str(Path(__file__).with_name("launch.py")),
                str(usage_path)]
    with open(out_path, "wb") as out, open(err_path, "wb") as err, \
            (open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb")) as inp:
        p = subprocess.Popen(launcher + list(cmd), stdin=inp, stdout=out, stderr=err, env=env,
                             preexec_fn=die_with_parent)
        timer = threading.Timer(timeout, p.terminate)  # the launcher kills the command
        timer.start()
        try:
            p.wait()
        except BaseException:  # e.g. the section's time ran out: leave no child behind
            p.terminate()
            p.wait()
            raise
        finally:
            timer.cancel()
    try:
        maxrss_kb, wall, started = usage_path.read_text().split()
    except (OSError, ValueError):  # the launcher itself failed
        maxrss_kb, wall, started = "0", "nan", "nan"
    return Proc(p.returncode, float(wall), int(maxrss_kb), out_path.read_text(errors="replace"),
                err_path.read_text(errors="replace"), float(started))


def stop_proc(p: subprocess.Popen, sig: int) -> None:
    if p.poll() is None:
        with contextlib.suppress(OSError):
            p.send_signal(sig)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def stop_children() -> None:
    for p in CHILDREN:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(5)


def new_loop():
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
