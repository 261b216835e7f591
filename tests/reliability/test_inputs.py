"""SPEC 12, "a corrupt slot file" and "bad input gets one clear line and changes nothing"
(issue #6, scenario 6): corrupt things an operator or another program leaves behind.

- Truncated, garbage, empty, oversized (> 64 KiB), too deeply nested, non-UTF-8 envelopes, a
  FIFO, a directory, a foreign file name, an envelope whose data cannot be stored, two drop-ins
  claiming one id: the slot still runs everything it can, each bad item is moved to
  ``rejected/<slot>/<name>`` with a ``.reason`` note, and the store stays consistent.
- Symlinks in the slot tree pointing outside home, as an envelope file and as a whole slot
  directory: never followed. The target outside home is not read (its atime is checked where
  the file system keeps atimes), not moved, not deleted, not written.
- A corrupt ``awty.toml`` (bad TOML, bad bytes, bad values, a directory): one line on stderr,
  exit 2, nothing created. A database from a newer awty (``PRAGMA user_version = 99``) or a
  file that is not a database: one line, exit 1, the database untouched.

Real SQLite files, the real receiver on 127.0.0.1, a FixedClock; a few real subprocesses.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from awty import config as config_mod
from awty.api import Awty
from awty.cli import app
from awty.errors import InvalidInput
from awty.ids import new_id
from awty.slottree.staging import envelope_bytes
from awty.slots import iso, slot_id
from helpers import T0, db_rows, slow_except, tree_files


pytestmark = pytest.mark.reliability

FULL = os.environ.get("AWTY_FULL", "") not in ("", "0")
NOW = iso(T0)
cli = CliRunner()


def make(home, clock, **overrides):
    overrides.setdefault("quick_retries", 0)
    return Awty(home, clock=clock, env={}, **overrides)


def integrity(home: Path) -> str:
    conn = sqlite3.connect(home / "awty.db")
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def run_bounded(fn, limit: float, fifos=()):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it takes longer than
    ``limit`` seconds. A runner stuck opening a FIFO is released by opening it for writing."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        for f in fifos:
            try:
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        t.join(10)
        pytest.fail(f"did not finish within {limit}s (blocked on a file in the slot tree?)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def snapshot(root: Path) -> dict:
    """Everything about a directory tree that a follower of symlinks could change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            data = None
            if stat.S_ISREG(st_.st_mode):
                with open(p, "rb") as f:
                    data = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st_.st_mode), st_.st_ino, st_.st_size,
                                             st_.st_mtime_ns, st_.st_mode, data)
    return out


def atime_is_kept(where: Path) -> bool:
    probe = where / ".atime-probe"
    probe.write_text("x")
    os.utime(probe, (1_000_000_000, time.time()))
    probe.read_text()
    kept = os.stat(probe).st_atime != 1_000_000_000
    probe.unlink()
    return kept


OLD_ATIME_NS = 1_000_000_000 * 10**9


def plant_untouchable(path: Path, text: str) -> None:
    path.write_text(text)


def set_traps(root: Path) -> None:
    """Put every regular file's atime far behind its mtime (mtime kept): under relatime any
    read of such a file moves its atime, so an unchanged atime means "never read"."""
    for p in root.rglob("*"):
        st_ = os.lstat(p)
        if stat.S_ISREG(st_.st_mode):
            os.utime(p, ns=(OLD_ATIME_NS, st_.st_mtime_ns), follow_symlinks=False)


def read_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*")
                  if stat.S_ISREG(os.lstat(p).st_mode) and os.lstat(p).st_atime_ns != OLD_ATIME_NS)


# --- 1. corrupt envelopes ----------------------------------------------------------------------
def test_corrupt_envelopes_are_set_aside_and_the_slot_runs_the_rest(home, clock, rx, tmp_path):
    a = make(home, clock)
    ok = [a.add(rx.url(f"/ok{i}"), in_="1m", payload={"i": i}).job for i in range(3)]
    slot = ok[0].next_check_at
    sid = slot_id(slot)
    sd = home / "slots" / sid
    rng = random.Random(6)
    real_env = envelope_bytes(ok[0])
    dup_id = new_id(T0)
    url = rx.url("/dropped")
    bad: dict[str, tuple[bytes | None, str]] = {
        "truncated.json": (real_env[: len(real_env) // 2], "not JSON"),
        "garbage.json": (bytes(rng.randrange(256) for _ in range(4096)), "not JSON"),
        "empty.json": (b"", "not JSON"),
        "nul.json": (b'{"target": "' + url.encode() + b'\x00"}', "not JSON"),
        "latin1.json": (b'{"target": "http://\xe9t\xe9.example/"}', "not JSON"),
        "oversized.json": (json.dumps({"target": url, "payload": {"pad": "x" * 70_000}})
                           .encode(), "too large"),
        "nested.json": (b"[" * 30_000 + b"]" * 30_000, "not JSON"),
        "array.json": (b"[1, 2, 3]", "not a JSON object"),
        "unknown-field.json": (json.dumps({"target": url, "colour": "red"}).encode(),
                               "unknown field"),
        "newline-field.json": (json.dumps({"target": url, "\nforged log line": 1}).encode(),
                               "unknown field"),
        "file-scheme.json": (json.dumps({"target": "file:///etc/passwd"}).encode(),
                             "only http"),
        "surrogate.json": (b'{"target": "' + url.encode() + b'", "entity": "\\ud800"}',
                           "entity"),
        # exec is not among the default dropin_kinds (issue 10): refused before its cwd is read
        "cwd-list.json": (json.dumps({"kind": "exec", "target": "true", "cwd": [1]}).encode(),
                          "dropin_kinds"),
        "bad-id.json": (json.dumps({"target": url, "id": 42}).encode(), "id"),
        "notes.txt": (b"operator notes", "not a .json envelope"),
        "dup-b.json": (json.dumps({"target": rx.url("/dup"), "id": dup_id}).encode(),
                       "already exists"),
        "pipe.json": (None, "not a regular file"),
        "subdir.json": (None, "not a regular file"),
    }
    for name, (data, _) in bad.items():
        if data is not None:
            (sd / name).write_bytes(data)
    os.mkfifo(sd / "pipe.json")
    (sd / "subdir.json").mkdir()
    (sd / "subdir.json" / "inner.json").write_text("{}")
    # Valid drop-ins: one plain, and the first of two files that claim the same id.
    (sd / "good.json").write_text(json.dumps({"target": rx.url("/good"), "payload": [1]}))
    (sd / "dup-a.json").write_text(json.dumps({"target": rx.url("/dup"), "id": dup_id}))

    clock.set(slot + timedelta(seconds=5))
    s = run_bounded(lambda: a.run_slot(slot), 30,
                    fifos=[sd / "pipe.json", home / "rejected" / sid / "pipe.json"])

    assert s.imported == 2 and s.rejected == len(bad)
    assert s.outcomes == {"done": 5}
    for i in range(3):
        assert len(rx.requests(f"/ok{i}")) == 1
    assert len(rx.requests("/good")) == 1
    dup = rx.requests("/dup")
    assert len(dup) == 1 and dup[0].job_id == dup_id
    assert rx.requests("/dropped") == []
    rejected = home / "rejected" / sid
    for name, (_, why) in bad.items():
        assert os.path.lexists(rejected / name), name
        reason = (rejected / f"{name}.reason").read_text()
        assert why in reason, (name, reason)
        assert "\n" == reason[-1] and reason.count("\n") == 1  # one line
    assert stat.S_ISFIFO(os.lstat(rejected / "pipe.json").st_mode)
    assert (rejected / "subdir.json" / "inner.json").read_text() == "{}"  # moved whole
    assert not sd.exists()
    assert db_rows(home, "future_job") == [] and tree_files(home) == []
    assert sorted(h["outcome"] for h in db_rows(home, "job_history")) == ["done"] * 5
    assert integrity(home) == "ok"
    log = (home / "awty.log").read_text()
    assert f"slot {sid}: set aside nested.json" in log


def test_a_drop_in_conflicting_with_a_stored_job_does_not_sink_the_others(home, clock, rx):
    """Store-level refusals (an id or idempotency key already taken) cost only the drop-in
    that caused them."""
    a = make(home, clock)
    first = a.add(rx.url("/first"), in_="1m", idempotency_key="order-42").job
    other_slot = a.add(rx.url("/later"), in_="2h").job
    sd = home / "slots" / slot_id(first.next_check_at)
    (sd / "a-key-clash.json").write_text(json.dumps(
        {"target": rx.url("/clash"), "idempotency_key": "order-42"}))
    (sd / "b-id-clash.json").write_text(json.dumps(
        {"target": rx.url("/clash"), "id": other_slot.id}))
    (sd / "c-fine.json").write_text(json.dumps({"target": rx.url("/fine")}))
    clock.set(first.next_check_at)
    s = a.run_slot(first.next_check_at)
    assert s.imported == 1 and s.rejected == 2, s
    assert len(rx.requests("/fine")) == 1 and len(rx.requests("/first")) == 1
    assert rx.requests("/clash") == []
    rejected = home / "rejected" / slot_id(first.next_check_at)
    assert "order-42" in (rejected / "a-key-clash.json.reason").read_text()
    assert (rejected / "b-id-clash.json.reason").exists()
    assert [r["id"] for r in db_rows(home, "future_job")] == [other_slot.id]
    assert integrity(home) == "ok"


# --- 2. symlinks pointing outside home ----------------------------------------------------------
def test_symlinked_envelopes_are_never_followed(home, clock, rx, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.json"
    plant_untouchable(victim, json.dumps({"target": rx.url("/victim"), "payload": "outside"}))
    (outside / "data").mkdir()
    os.mkfifo(outside / "fifo")
    atime_checked = atime_is_kept(outside)

    a = make(home, clock)
    job = a.add(rx.url("/real"), in_="1m").job
    slot = job.next_check_at
    sid = slot_id(slot)
    sd = home / "slots" / sid
    links = {
        "link.json": victim,
        f"{new_id(T0)}.json": victim,  # looks like a drop-in named by its id
        "fifo.json": outside / "fifo",
        "dir.json": outside / "data",
        "dangling.json": outside / "nothing-here",
    }
    for name, target in links.items():
        os.symlink(target, sd / name)
    # The pending job's own envelope swapped for a link to the victim: the row decides, the
    # link is removed with the job (unlinked, never followed).
    os.unlink(sd / f"{job.id}.json")
    os.symlink(victim, sd / f"{job.id}.json")
    before = snapshot(outside)
    set_traps(outside)

    clock.set(slot)
    s = run_bounded(lambda: a.run_slot(slot), 30, fifos=[outside / "fifo"])

    assert s.rejected == len(links) and s.imported == 0
    assert s.outcomes == {"done": 1} and len(rx.requests("/real")) == 1
    assert rx.requests("/victim") == []
    if atime_checked:
        assert read_files(outside) == [], "a file outside home was read"
    assert snapshot(outside) == before  # nothing outside moved, deleted, or written
    rejected = home / "rejected" / sid
    for name, target in links.items():
        assert os.path.islink(rejected / name) and os.readlink(rejected / name) == str(target)
        assert "symlink" in (rejected / f"{name}.reason").read_text()
    assert not os.path.lexists(sd)
    assert integrity(home) == "ok"
    # The set-aside links still lead outside and nothing follows them later either.
    clock.advance(timedelta(hours=1))
    a.catchup()
    assert snapshot(outside) == before


@pytest.mark.parametrize("how", ["run_slot", "catchup", "cli"])
def test_a_symlinked_slot_directory_is_never_followed(home, clock, rx, tmp_path, how):
    a = make(home, clock)
    job = a.add(rx.url("/real"), in_="1m").job
    ended = a.add(rx.url("/ended"), in_="1m").job
    a.cancel([ended.id])
    a.close()
    slot = job.next_check_at
    sid = slot_id(slot)
    sd = home / "slots" / sid
    # Outside home: what a follower would import, set aside or delete.
    outside = tmp_path / "outside"
    outside.mkdir()
    plant_untouchable(outside / "victim.json", json.dumps({"target": rx.url("/victim")}))
    plant_untouchable(outside / "junk.json", "definitely not json")
    plant_untouchable(outside / f"{job.id}.json", (sd / f"{job.id}.json").read_text())
    plant_untouchable(outside / f"{ended.id}.json", "{}")  # an "orphan" a follower deletes
    atime_checked = atime_is_kept(outside)
    for p in list(sd.iterdir()):
        p.unlink()
    sd.rmdir()
    os.symlink(outside, sd)
    before = snapshot(outside)
    set_traps(outside)

    at = slot + timedelta(seconds=30)
    if how == "cli":
        res = subprocess.run([sys.executable, "-m", "awty", "run-slot", sid, "--home", str(home)],
                             env={**_clean_env(), "AWTY_NOW": iso(at), "AWTY_QUICK_RETRIES": "0"},
                             capture_output=True, text=True, timeout=60)
        assert "Traceback" not in res.stderr, res.stderr
        assert res.returncode == 0, res.stderr
    else:
        clock.set(at)
        b = make(home, clock)
        run_bounded(lambda: b.run_slot(slot) if how == "run_slot" else b.catchup(), 30)

    if atime_checked:
        assert read_files(outside) == [], "a file outside home was read"
    assert snapshot(outside) == before
    assert rx.requests("/victim") == [] and rx.requests("/ended") == []
    assert len(rx.requests("/real")) == 1  # a pending row with no (usable) file still runs
    link = home / "rejected" / sid / sid
    assert os.path.islink(link) and os.readlink(link) == str(outside)
    assert "symlink" in (home / "rejected" / sid / f"{sid}.reason").read_text()
    assert not os.path.lexists(sd) or (os.path.isdir(sd) and not os.path.islink(sd))
    assert db_rows(home, "future_job") == []
    assert integrity(home) == "ok"


def test_writes_never_go_through_a_symlinked_slot_directory(home, clock, rx, tmp_path):
    """``add`` (and re-slotting) into a slot whose directory was replaced by a symlink writes
    into a real directory of its own; the link is set aside, its target left alone."""
    a = make(home, clock)
    job = a.add(rx.url("/x"), in_="1m").job
    a.close()
    sd = home / "slots" / slot_id(job.next_check_at)
    outside = tmp_path / "outside"
    outside.mkdir()
    (sd / f"{job.id}.json").unlink()
    sd.rmdir()
    os.symlink(outside, sd)
    b = make(home, clock)
    second = b.add(rx.url("/y"), in_="2m").job
    assert second.next_check_at == job.next_check_at
    assert list(outside.iterdir()) == []
    assert not os.path.islink(sd) and (sd / f"{second.id}.json").is_file()
    assert os.path.islink(home / "rejected" / sd.name / sd.name)


# --- 3. a corrupt awty.toml ---------------------------------------------------------------------
BAD_CONFIGS = {
    "not-toml": b"resolution = = 15\n",
    "bad-bytes": b"resolution = 15 # \xff\xfe\n",
    "unknown-key": b"resolutoin = 15\n",
    "bad-resolution": b"resolution = 7\n",
    "infinite-int": b"concurrency = inf\n",
    "nan-int": b"max_checks = nan\n",
    "negative-int": b"max_attempts = -1\n",
    "nan-duration": b"timeout = nan\n",
    "table-duration": b"timeout = {a = 1}\n",
    "date-duration": b"horizon = 1979-05-27\n",
    "empty-backoff": b"backoff = []\n",
    "callbacks-int": b"allowed_callbacks = 5\n",
    "callbacks-scheme": b'allowed_callbacks = ["ftp://x/"]\n',
    "secret-file-list": b"signing_secret_file = []\n",
    "deny-maybe": b'deny_private_networks = "maybe"\n',
    "misfire-list": b"misfire = []\n",
    "duplicate-key": b"resolution = 15\nresolution = 5\n",
    "is-a-directory": None,
}


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}


def _write_config(home: Path, data: bytes | None) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    cfg = home / "awty.toml"
    if data is None:
        cfg.mkdir()
    else:
        cfg.write_bytes(data)


def _one_clean_line(res) -> str:
    err = res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in err + res.stdout
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("awty"), err
    return lines[0]


# ~1 s each (every command on each config): two in the inner loop, all 18 in the whole suite
@pytest.mark.parametrize("name", slow_except(sorted(BAD_CONFIGS), {"not-toml", "is-a-directory"}))
def test_a_corrupt_config_is_one_line_and_exit_2(home, name):
    _write_config(home, BAD_CONFIGS[name])
    commands = [
        ["add", "https://example.com/hook", "--in", "1h"],
        ["add", "--batch", "-"],
        ["list"], ["run-slot"], ["catchup"], ["history"], ["slots"], ["init"],
    ]
    for args in commands:
        res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW},
                         input='{"target": "https://example.com/", "in": "1h"}\n')
        line = _one_clean_line(res)
        assert res.exit_code == 2, (args, line)
        assert "awty.toml" in line, line
    assert sorted(p.name for p in home.iterdir()) == ["awty.toml"]  # nothing created


def test_a_corrupt_config_through_a_real_process(home):
    _write_config(home, b"concurrency = inf\n")
    res = subprocess.run([sys.executable, "-m", "awty", "run-slot", "--home", str(home)],
                         env={**_clean_env(), "AWTY_NOW": NOW}, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and "concurrency" in res.stderr


# Anything TOML can hold, in any key: settings come out valid or InvalidInput, nothing else.
_toml_scalars = (st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
                 | st.text(max_size=30) | st.booleans() | st.dates() | st.datetimes()
                 | st.sampled_from([float("inf"), float("-inf"), float("nan"), 2**64])
                 | st.sampled_from(["15", "1h", "0", "-1s", "1e400", "inf", "nan", "http://x/",
                                    "fire", "skip", " ", "true", "2h30m", "1w1d"]))
_toml_values = st.recursive(_toml_scalars, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                            max_leaves=8)


@settings(max_examples=3000 if FULL else 400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(st.dictionaries(st.sampled_from(config_mod.KEYS + ("nope",)), _toml_values, max_size=4))
def test_config_values_fuzzed(data):
    try:
        s = config_mod.load(Path("/nonexistent-awty-home"), env={}, file_data=data)
    except InvalidInput as e:
        assert "\n" not in str(e)
        return
    assert s.resolution in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)
    for key in ("concurrency", "per_host_concurrency", "max_payload_bytes", "batch_size"):
        assert isinstance(getattr(s, key), int) and getattr(s, key) >= 1
    for key in ("timeout", "horizon", "max_delay", "lease"):
        v = getattr(s, key)
        assert v == v and 0 < v < float("inf")
    assert s.signing_secret_file is None or isinstance(s.signing_secret_file, str)


# --- 4. a database from a newer awty, or not a database at all -----------------------------------
def _schema(home: Path) -> tuple:
    conn = sqlite3.connect(home / "awty.db")
    try:
        return (conn.execute("PRAGMA user_version").fetchone()[0],
                conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall(),
                conn.execute("SELECT count(*) FROM future_job").fetchone()[0])
    finally:
        conn.close()


STORE_COMMANDS = [
    ["add", "https://example.com/hook", "--in", "1h"],
    ["add", "--batch", "-"],
    ["list"], ["list", "--json"], ["show", "01JD3ZZZZZZZZZZZZZZZZZZZZZ"], ["run-slot"],
    ["run-slot", "--dry-run"], ["catchup"], ["catchup", "--dry-run"], ["history"], ["slots"],
    ["cancel", "01JD3ZZZZZZZZZZZZZZZZZZZZZ"], ["retry", "01JD3ZZZZZZZZZZZZZZZZZZZZZ"],
    ["reschedule", "01JD3ZZZZZZZZZZZZZZZZZZZZZ", "--in", "1h"], ["init"],
]


@pytest.mark.slow
def test_a_newer_schema_is_refused_in_one_line_and_left_alone(home, clock):
    with make(home, clock) as a:
        a.add("https://example.com/hook", in_="1h")
    conn = sqlite3.connect(home / "awty.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before, files = _schema(home), tree_files(home)
    for args in STORE_COMMANDS:
        res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW},
                         input='{"target": "https://example.com/", "in": "1h"}\n')
        line = _one_clean_line(res)
        assert res.exit_code == 1, (args, line)
        assert "schema version 99" in line and "upgrade awty" in line, line
    assert _schema(home) == before and tree_files(home) == files
    res = subprocess.run([sys.executable, "-m", "awty", "run-slot", "--home", str(home)],
                         env={**_clean_env(), "AWTY_NOW": NOW}, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "schema version 99" in res.stderr and "Traceback" not in res.stderr
    assert _schema(home) == before


@pytest.mark.slow
def test_a_file_that_is_not_a_database_is_refused_in_one_line(home):
    home.mkdir(mode=0o700)
    junk = b"this is not a database, it is a shopping list\n" * 200
    (home / "awty.db").write_bytes(junk)
    os.chmod(home / "awty.db", 0o600)
    for args in STORE_COMMANDS:
        res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW},
                         input='{"target": "https://example.com/", "in": "1h"}\n')
        line = _one_clean_line(res)
        assert res.exit_code == 1, (args, line)
        assert "not a database" in line, line
    assert (home / "awty.db").read_bytes() == junk


def test_a_drop_in_repeating_an_idempotency_key_is_not_run_twice(home, clock, rx):
    """A drop-in whose idempotency key names a job awty already has (the same job) is that
    job: nothing new runs, and no envelope appears for a job that is not pending."""
    a = make(home, clock)
    spec = {"target": rx.url("/once"), "idempotency_key": "order-7", "payload": {"n": 7}}
    first = a.add(spec["target"], in_="1m", idempotency_key="order-7", payload={"n": 7}).job
    live = a.add(rx.url("/live"), in_="20m", idempotency_key="order-8").job
    clock.set(first.next_check_at)
    a.run_slot(first.next_check_at)  # order-7 ends (done)
    nxt = a.add(rx.url("/next"), in_="20m").job
    sd = home / "slots" / slot_id(nxt.next_check_at)
    (sd / "again.json").write_text(json.dumps(spec))
    (sd / "live-again.json").write_text(json.dumps(
        {"target": rx.url("/live"), "idempotency_key": "order-8"}))
    clock.set(nxt.next_check_at)
    s = a.run_slot(nxt.next_check_at)
    assert len(rx.requests("/once")) == 1 and len(rx.requests("/next")) == 1
    assert s.imported == 0 and s.rejected == 0
    assert [r["id"] for r in db_rows(home, "future_job")] == [live.id]
    assert tree_files(home) == [f"{slot_id(live.next_check_at)}/{live.id}.json"]
    assert integrity(home) == "ok"


def test_odd_file_names_are_set_aside_and_logged_without_errors(home, clock, capfd):
    """Names with undecodable bytes, newlines or that merely look like ids: set aside, and the
    log takes them (escaped) without a "Logging error" traceback on stderr."""
    a = make(home, clock)
    job = a.add("https://example.com/hook", in_="1m", dry_run=True).job
    sd = home / "slots" / slot_id(job.next_check_at)
    sd.mkdir(parents=True)
    names = [os.fsdecode(b"bad\xffbyte.json"), "new\nline.json", "ü ñ.json",
             "01JD3ZZZZZZZZZZZZZZZZZZZZz.json", "01jd3zzzzzzzzzzzzzzzzzzzzz.json", " .json"]
    for n in names:
        (sd / n).write_bytes(b"\x00 not an envelope")
    clock.set(job.next_check_at)
    s = a.run_slot(job.next_check_at)
    assert s.rejected == len(names)
    rejected = home / "rejected" / slot_id(job.next_check_at)
    for n in names:
        assert "not JSON" in (rejected / f"{n}.reason").read_text(errors="replace")
    err = capfd.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err, err
    assert "bad\\udcffbyte.json" in (home / "awty.log").read_text()
    assert not sd.exists() and integrity(home) == "ok"
