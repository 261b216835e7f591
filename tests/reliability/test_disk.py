"""SPEC 12, "a full or read-only disk".

On a real small filesystem (a tmpfs mounted into tmp_path; we run as root in CI; skipped with
the reason where mounting is not permitted):
- the disk fills up in the middle of a run (the receiver fills it at the n-th callback): the
  runner stops with one clear line, no traceback; ``add`` on the full disk is refused with one
  line and exit 1, writing nothing; once space returns, doctor --repair and catch-up account
  for every job;
- home remounted read-only: ``add`` and ``run-slot`` refuse with one line, change nothing, and
  everything runs once it is writable again.
At the write seam, in-process (``OSError(ENOSPC / EROFS)`` from the slot tree's file writes
and removals):
- ``add`` whose rows committed but whose envelopes could not be written: the jobs are accepted
  and still run (SQLite decides; doctor --repair writes the envelopes);
- a runner that cannot re-slot or remove envelopes: the store stays consistent and nothing is
  lost or fired twice.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import awty.slottree.tree as treemod
from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from helpers import T0
from awty.testing.receiver import Receiver
from relkit import (account, assert_doctor_clean, cli_env, count, doctor_problems,
                    envelope_ids, envelopes, integrity, query, run_cli, scale)

pytestmark = pytest.mark.reliability

_RECHECK = (200, {"Content-Type": "application/json"}, b'{"recheck_in": "1h"}')


def _recheck_once():
    """/re answers "check again in 1h" to a job's first check, 204 after; others 204."""
    seen: dict[str, int] = {}

    def reply(r):
        seen[r.job_id] = seen.get(r.job_id, 0) + 1
        return _RECHECK if r.path == "/re" and seen[r.job_id] == 1 else 204

    return reply


@pytest.fixture
def small_fs(tmp_path):
    """A small tmpfs at tmp_path/mnt (6 MB; 24 MB with AWTY_FULL=1: an envelope takes a 4 KB
    page), unmounted afterwards; skipped where mount is refused."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    size = scale(6, 24)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m,mode=0700", "tmpfs",
                        str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({p.stderr.strip() or p.returncode}); "
                    "the in-process ENOSPC/EROFS tests below still run")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(path: Path) -> int:
    """Write until the filesystem says ENOSPC; returns the bytes written."""
    n = 0
    with open(path, "ab", buffering=0) as f:
        for size in (1 << 16, 512):
            try:
                while True:
                    n += f.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    return n


def _one_clean_line(p: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in p.stderr and "Logging error" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


# --- a real full disk ----------------------------------------------------------------------
@pytest.mark.slow
def test_disk_fills_up_mid_run(small_fs):
    n = scale(400, 2000)
    home = small_fs / "home"
    filler = small_fs / "filler"
    started = time.monotonic()
    filled = []
    reply = _recheck_once()

    def on_request(seen):
        if seen.n == n // 4 and not filled:
            filled.append(_fill(filler))

    with Receiver(reply=reply, on_request=on_request, delay=0.001, keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            ids = [r.job.id for r in a.add_many(
                [{"target": rx.url("/re" if i % 2 else "/k"), "in": "1m", "payload": {"i": i}}
                 for i in range(n)])]
            slot = a.get(ids[0]).job.next_check_at
        settings = dict(batch_size=50, concurrency=16, timeout="5s", busy_timeout="1s")
        env = cli_env(home, slot + timedelta(seconds=1), **settings)
        p = run_cli(["run-slot", slot_id(slot)], env)
        assert filled, "the disk never filled"
        run_line = _one_clean_line(p) if p.returncode else ""
        assert p.returncode in (0, 1)
        first = rx.total
        # Full disk: add is refused with one line, exit 1, and nothing of it is stored; or,
        # when SQLite can reuse the pages the run freed, it is accepted whole (its envelope
        # may be missing: the row still runs) and must then be delivered like the rest.
        q = run_cli(["add", rx.url("/new"), "--in", "2h"], cli_env(home, T0))
        assert q.returncode in (0, 1), (q.returncode, q.stdout, q.stderr)
        filler.unlink()  # space comes back
        assert integrity(home) == "ok"
        stored = query(home, "SELECT id FROM future_job WHERE target = ?", (rx.url("/new"),))
        if q.returncode == 1:
            add_line = _one_clean_line(q)
            assert not stored
        else:
            add_line = "accepted: " + q.stdout.split()[1]
            assert [r[0] for r in stored] == [q.stdout.split()[1]]
            ids.append(q.stdout.split()[1])
        later = slot + timedelta(hours=3)  # after every lease, and after the 1h re-checks
        doctor_problems(home, later, repair=True)
        for _ in range(3):
            r = run_cli(["catchup"], cli_env(home, later, **settings))
            assert r.returncode == 0, r.stderr
            if not count(home, "future_job"):
                break
            later += timedelta(hours=1)
        delivered = rx.counts()
    figures = account(home, ids, later, delivered=delivered)
    # Each job: /k once, /re twice, plus what the full disk kept the runner from recording.
    extra = figures["deliveries"] - (n // 2 + 2 * (n - n // 2)) - (q.returncode == 0)
    assert 0 <= extra <= 2 * 50 + 16, extra
    print(f"\n[disk/full mid-run] jobs={n} first run: exit {p.returncode} {run_line!r}, "
          f"delivered {first}; add on the full disk: {add_line!r}; after repair + catchup "
          f"deliveries={figures['deliveries']} duplicates={extra} "
          f"time={time.monotonic() - started:.1f}s")


@pytest.mark.slow
def test_read_only_home(small_fs):
    n = scale(200, 2000)
    home = small_fs / "home"
    with Receiver(reply=_recheck_once(), keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            ids = [r.job.id for r in a.add_many(
                [{"target": rx.url("/re" if i % 2 else "/k"), "in": "1m"} for i in range(n)])]
            slot = a.get(ids[0]).job.next_check_at
        files = sorted(envelopes(home))
        subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
        try:
            env = cli_env(home, slot + timedelta(seconds=1))
            q = run_cli(["add", rx.url("/new"), "--in", "2h"], env)
            assert q.returncode == 1, (q.returncode, q.stderr)
            add_line = _one_clean_line(q)
            r = run_cli(["run-slot", slot_id(slot)], env)
            assert r.returncode == 1, (r.returncode, r.stderr)
            run_line = _one_clean_line(r)
            c = run_cli(["catchup"], env)
            assert c.returncode == 1, (c.returncode, c.stderr)
            _one_clean_line(c)
            assert rx.total == 0  # nothing fired that could not be recorded
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
        assert sorted(envelopes(home)) == files and count(home, "future_job") == n
        later = slot + timedelta(hours=2)
        for _ in range(3):
            c = run_cli(["catchup"], cli_env(home, later))
            assert c.returncode == 0, c.stderr
            if not count(home, "future_job"):
                break
            later += timedelta(hours=1)
        delivered = rx.counts()
    figures = account(home, ids, later, delivered=delivered)
    assert figures["deliveries"] == n // 2 + 2 * (n - n // 2)
    print(f"\n[disk/read-only home] jobs={n}: add {add_line!r}; run-slot {run_line!r}; "
          f"after remount rw: deliveries={figures['deliveries']} duplicates=0")


def test_log_line_on_full_disk_is_dropped_quietly(small_fs):
    """awty.log is written on the same disk: a warning it cannot write must not turn into
    logging's "--- Logging error ---" traceback on stderr (the one-clear-line promise)."""
    home = small_fs / "home"
    home.mkdir(mode=0o700)
    _fill(small_fs / "filler")
    code = ("import sys; from pathlib import Path; from awty.logbook import open_log; "
            "log = open_log(Path(sys.argv[1]), 10**6); log.warning('x' * 100000); "
            "print('logged')")
    p = subprocess.run([sys.executable, "-c", code, str(home)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "logged", p
    assert p.stderr == "", p.stderr


# --- at the write seam, in-process ---------------------------------------------------------
def _break_writes(monkeypatch, code: int) -> list[int]:
    """Every envelope write raises OSError(code); returns a list counting the refusals."""
    refused: list[int] = []

    def fail(*args, **kw):
        refused.append(1)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(treemod, "_link_new", fail)
    monkeypatch.setattr(treemod, "_rename_into", fail)
    return refused


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["ENOSPC", "EROFS"])
def test_add_when_envelopes_cannot_be_written(home, monkeypatch, code):
    """The rows commit first; envelopes follow. When the envelopes fail, the jobs are still
    accepted (a pending row with no file runs): add must not report a failure for jobs that
    will fire, and nothing may be half-written in the store."""
    with Receiver(keep=False) as rx:
        clock = FixedClock(T0)
        a = Awty(home, clock=clock, env={})
        a.init()
        refused = _break_writes(monkeypatch, code)
        one = a.add(rx.url("/one"), in_="1m").job
        many = [r.job.id for r in a.add_many([{"target": rx.url("/many"), "in": f"{i}m"}
                                              for i in range(1, 200)])]
        assert refused, "the seam was never reached"
        monkeypatch.undo()
        ids = [one.id, *many]
        assert count(home, "future_job") == len(ids) and envelopes(home) == []
        assert integrity(home) == "ok"
        problems = doctor_problems(home, T0, repair=True)
        if problems is not None:
            assert problems == [], problems
            assert len(envelope_ids(home)) == len(ids)
        clock.set(T0 + timedelta(hours=5))
        a.catchup()
        a.close()
        delivered = rx.counts()
    figures = account(home, ids, clock.now(), delivered=delivered)
    assert figures["duplicates"] == 0


def test_cli_add_when_envelopes_cannot_be_written(home, tmp_path):
    """The same through the CLI in a real process: the seam is broken by a sitecustomize
    that makes envelope writes raise ENOSPC. Exit 0 with the job's id (it will run), no
    traceback; the row is there and runs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import errno, os\n"
        "import awty.slottree.tree as s\n"
        "def _fail(*a, **k):\n"
        "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "s._link_new = s._rename_into = _fail\n")
    with Receiver(keep=False) as rx:
        env = cli_env(home, T0)
        env["PYTHONPATH"] = f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}"
        p = run_cli(["add", rx.url("/cli"), "--in", "1m", "--json"], env)
        assert "Traceback" not in p.stderr, p.stderr
        assert p.returncode == 0, (p.returncode, p.stderr)
        job_id = json.loads(p.stdout)["id"]
        assert [r[0] for r in query(home, "SELECT id FROM future_job")] == [job_id]
        assert envelopes(home) == []
        later = T0 + timedelta(hours=1)
        c = run_cli(["catchup"], cli_env(home, later))
        assert c.returncode == 0, c.stderr
        delivered = rx.counts()
    account(home, [job_id], later, delivered=delivered)


def test_runner_cannot_reslot_or_remove_envelopes(home, monkeypatch):
    """The runner records each batch in SQLite, then moves envelopes: writes fail with
    ENOSPC, removals with EROFS (retiring the finished slot whole, then file by file). The run still completes on the store's word; the tree is
    mended later; every job ends once, each re-check fires once."""
    n = scale(300, 3000)
    with Receiver(reply=_recheck_once(), keep=False) as rx:
        clock = FixedClock(T0)
        a = Awty(home, clock=clock, env={}, quick_retries=0, batch_size=50, concurrency=16)
        ids = [r.job.id for r in a.add_many(
            [{"target": rx.url("/re" if i % 2 else "/k"), "in": "1m"} for i in range(n)])]
        slot = a.get(ids[0]).job.next_check_at
        refused = _break_writes(monkeypatch, errno.ENOSPC)
        removals: list[int] = []

        def no_unlink(self, job_ids, slot, missing=None):
            removals.append(len(job_ids))
            return [OSError(errno.EROFS, os.strerror(errno.EROFS)) for _ in job_ids]

        def no_retire(self, slot, done, ended=None):
            removals.append(0)
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

        monkeypatch.setattr(treemod.SlotTree, "remove_many", no_unlink)
        monkeypatch.setattr(treemod.SlotTree, "retire", no_retire)
        clock.set(slot + timedelta(seconds=1))
        summary = a.run_slot(slot)  # must not raise: the store recorded every result
        monkeypatch.undo()
        assert refused and removals[0] == 0 and sum(removals) == n
        assert summary.ran == n
        assert integrity(home) == "ok"
        assert count(home, "job_history") == n // 2  # /k done; /re re-slotted in the store
        problems = doctor_problems(home, clock.now(), repair=True)
        if problems is not None:  # the repair writes the re-slotted envelopes, drops orphans
            assert problems == [], problems
            assert len(envelope_ids(home)) == n - n // 2
        clock.set(slot + timedelta(hours=2))
        a.catchup()
        a.close()
        delivered = rx.counts()
    figures = account(home, ids, clock.now(), delivered=delivered)
    assert figures["deliveries"] == n // 2 + 2 * (n - n // 2)
    assert_doctor_clean(home, clock.now())
    print(f"\n[disk/runner seam] jobs={n}: {len(refused)} envelope writes refused (ENOSPC), "
          f"{len(removals)} removals refused (EROFS); deliveries={figures['deliveries']} "
          f"duplicates=0")
