"""The SQLite store's process locks (issue 10 #3, #4): owner sessions tell a live runner from a
dead one whatever the clocks say; slot locks make unsharded and sharded runs of one slot exclude
each other; nothing planted at a lock path is followed, truncated or crashes a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
from helpers import T0
from typer.testing import CliRunner

from awty.cli import app
from awty.errors import StoreError
from awty.slots import iso, slot_id

URL = "https://example.com/hook"


@pytest.fixture
def store(awty):
    return awty.store


def slot_of(awty):
    return awty.add(URL, in_="1m").job.next_check_at


# --- slot locks ------------------------------------------------------------------------------
def test_unsharded_and_sharded_runs_exclude_each_other(store):
    slot = T0.replace(second=0, microsecond=0)
    whole = store.slot_lock(slot)
    assert whole.acquire()
    shard = store.slot_lock(slot, (0, 1))
    assert not shard.acquire()  # whatever the shard flag, the slot is taken
    assert "pid" in shard.holder() and str(os.getpid()) in shard.holder()
    whole.release()
    assert shard.acquire()
    other = store.slot_lock(slot, (1, 2))
    assert other.acquire()  # shards run side by side
    again = store.slot_lock(slot)
    assert not again.acquire()
    assert str(os.getpid()) in again.holder()
    same = store.slot_lock(slot, (0, 1))
    assert not same.acquire()  # one runner per shard
    shard.release()
    other.release()
    assert again.acquire()
    again.release()


def test_a_symlink_at_the_owner_note_is_replaced_not_followed(store, tmp_path):
    slot = T0.replace(second=0, microsecond=0)
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    store.locks.mkdir(parents=True, exist_ok=True)
    note = store.locks / f"{slot_id(slot)}.lock.owner"
    note.symlink_to(precious)
    lock = store.slot_lock(slot)
    assert lock.acquire()
    assert precious.read_text() == "keep me"
    assert not note.is_symlink() and str(os.getpid()) in note.read_text()
    lock.release()
    assert precious.read_text() == "keep me"


@pytest.mark.parametrize("plant", ["symlink", "directory"])
def test_a_planted_lock_path_is_one_clear_error(store, tmp_path, plant):
    slot = T0.replace(second=0, microsecond=0)
    target = tmp_path / "target"
    target.write_text("keep me")
    store.locks.mkdir(parents=True, exist_ok=True)
    path = store.locks / f"{slot_id(slot)}.lock"
    if plant == "symlink":
        path.symlink_to(target)
    else:
        path.mkdir()
    what = "symbolic link" if plant == "symlink" else "directory"
    with pytest.raises(StoreError, match=f"is a {what}"):
        store.slot_lock(slot).acquire()
    assert target.read_text() == "keep me"


def test_run_slot_with_a_planted_lock_is_one_line_exit_1(home, awty):
    slot = slot_of(awty)
    awty.store.locks.mkdir(parents=True, exist_ok=True)
    (awty.store.locks / f"{slot_id(slot)}.lock").symlink_to("/etc/passwd")
    now = slot + timedelta(seconds=1)
    res = CliRunner().invoke(app, ["run-slot", slot_id(slot), "--home", str(home)],
                             env={"AWTY_NOW": iso(now)})
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "symbolic link" in lines[0], res.output
    assert "Traceback" not in res.output


# --- owner sessions ----------------------------------------------------------------------------
def test_owner_alive_while_in_session_unknown_after(store):
    assert store.sessions.alive("h:1:a") is None  # never opened a session
    with store.owner_session("h:1:a"):
        assert store.sessions.alive("h:1:a") is True
    assert store.sessions.alive("h:1:a") is None  # exited cleanly: its file is gone


def test_a_killed_owner_is_dead(store, home):
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from awty.store.filelocks import OwnerSessions
        with OwnerSessions(Path({str(store.locks)!r})).session("h:999:k"):
            print("in", flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "in"
        assert store.sessions.alive("h:999:k") is True
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    assert store.sessions.alive("h:999:k") is False


def test_a_live_owners_expired_lease_is_never_taken_over(awty, store):
    slot = slot_of(awty)
    now = slot + timedelta(seconds=1)
    with store.owner_session("h:1:a"):
        got = store.claim(slot, now=now, owner="h:1:a", lease_until=now + timedelta(minutes=1),
                          limit=10)
        assert len(got) == 1
        ahead = now + timedelta(hours=1)  # another runner whose clock runs an hour ahead
        assert store.claim(slot, now=ahead, owner="h:2:b",
                           lease_until=ahead + timedelta(minutes=1), limit=10) == []
        assert store.release_stale("h:1:a", ahead) == 0
        [group] = store.leases(ahead)
        assert group.alive is True and group.expired == 1
    # gone (no session, clean exit): the lease alone decides, and it has expired
    taken = store.claim(slot, now=ahead, owner="h:2:b", lease_until=ahead + timedelta(minutes=1),
                        limit=10)
    assert [j.id for j in taken] == [j.id for j in got]


def test_doctor_reports_a_planted_lock_and_repair_moves_it_aside(home, awty, tmp_path):
    from awty.doctor import diagnose

    slot = slot_of(awty)
    target = tmp_path / "target"
    target.write_text("keep me")
    awty.store.locks.mkdir(parents=True, exist_ok=True)
    planted = awty.store.locks / f"{slot_id(slot)}.lock"
    planted.symlink_to(target)
    (awty.store.locks / f"{slot_id(slot)}.shard0of2.lock").mkdir()
    f = diagnose(awty, env={}, which=lambda _: None).get("locks")
    assert not f.ok and "2 lock path(s)" in f.detail and f.repaired is None
    assert planted.is_symlink()  # nothing changed without --repair
    f = diagnose(awty, repair=True, env={}, which=lambda _: None).get("locks")
    assert f.repaired is True
    assert not os.path.lexists(planted) and target.read_text() == "keep me"
    assert diagnose(awty, env={}, which=lambda _: None).get("locks").ok
    lock = awty.store.slot_lock(slot, (0, 2))
    assert lock.acquire()  # the slot can run again
    lock.release()
