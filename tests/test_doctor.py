"""awty doctor: each inconsistency is found, left alone without --repair, mended with it, and a
second pass is clean. Real SQLite files and slot trees in tmp_path; cron is faked through the
injected ``which``/``run`` (never the real crontab)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import (
    FAKE_CRONTAB, T0, URL, assert_clean, bad, check_a_schedule_that_lost_its_occurrence,
    cron_daemon, db_rows, doctor, job_rows, set_lease, tree_files,
)
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from awty.doctor import diagnose_home
from awty.slots import iso, slot_id
from awty.store.migrations import SCHEMA_VERSION


def envelope_path(a: Awty, job) -> Path:
    return a.tree.slot_path(job.next_check_at) / f"{job.id}.json"


def snapshot(a: Awty):
    """Everything doctor could change: files (with modes and bytes) and the job rows."""
    files = {}
    for p in sorted(a.home.rglob("*")):
        if p.name.startswith("awty.db") or p.name.endswith(".lock"):
            continue
        files[str(p.relative_to(a.home))] = (oct(p.stat().st_mode),
                                              p.read_bytes() if p.is_file() else None)
    files["<home>"] = oct(a.home.stat().st_mode)
    files["<db>"] = oct(a.db_path.stat().st_mode)
    return files, job_rows(a.home), db_rows(a.home, "job_history")


# --- a clean home --------------------------------------------------------------------------
def test_clean_home_every_check_ok(a):
    report = doctor(a)
    assert_clean(report)
    checks = [f.check for f in report.findings]
    for name in ("home", "database", "config", "schema", "integrity", "leases", "resolution",
                 "envelopes", "orphans", "wrong slot", "temp files", "drop-ins",
                 "retired slots", "catch-up", "cron"):
        assert name in checks
    assert report.get("schema").detail == f"version {SCHEMA_VERSION}"
    assert "PRAGMA integrity_check: ok" in report.get("integrity").detail
    assert report.to_dict()["ok"] is True


# --- schedules ------------------------------------------------------------------------------
def test_a_schedule_is_clean_and_its_lost_occurrence_is_repaired(a):
    check_a_schedule_that_lost_its_occurrence(a)


# --- each inconsistency: found, untouched, repaired, clean ---------------------------------
def _delete_envelope(a):
    job = next(a.list())
    os.unlink(envelope_path(a, job))
    return ["envelopes"]


def _orphan_of_cancelled(a):
    job = a.add(URL, in_="5h").job
    data = envelope_path(a, job).read_bytes()
    a.cancel([job.id])
    envelope_path(a, job).parent.mkdir(parents=True, exist_ok=True)
    envelope_path(a, job).write_bytes(data)
    return ["orphans"]


def _wrong_slot(a):
    job = next(a.list())
    wrong = a.tree.slot_path(job.next_check_at + timedelta(minutes=15))
    wrong.mkdir(parents=True, exist_ok=True)
    os.replace(envelope_path(a, job), wrong / f"{job.id}.json")
    return ["wrong slot", "envelopes"]


def _copy_in_wrong_slot(a):
    job = next(a.list())
    wrong = a.tree.slot_path(job.next_check_at - timedelta(minutes=15))
    wrong.mkdir(parents=True, exist_ok=True)
    (wrong / f"{job.id}.json").write_bytes(envelope_path(a, job).read_bytes())
    return ["wrong slot"]


def _stale_lease(a):
    job = next(a.list())
    past = iso(T0 - timedelta(minutes=5))
    set_lease(a.store.conn, job.id, "x", past)
    return ["leases"]


def _lease_without_owner(a):
    job = next(a.list())
    set_lease(a.store.conn, job.id, None, None)
    return ["leases"]


def _home_mode(a):
    os.chmod(a.home, 0o755)
    return ["home"]


def _db_mode(a):
    os.chmod(a.db_path, 0o644)
    return ["database"]


def _old_temp_file(a):
    job = next(a.list())
    tmp = envelope_path(a, job).parent / f".{job.id}.json.tmp"
    tmp.write_text("{")
    hour_ago = tmp.stat().st_mtime - 3600
    os.utime(tmp, (hour_ago, hour_ago))
    return ["temp files"]


@pytest.mark.parametrize("inject", [
    _delete_envelope, _orphan_of_cancelled, _wrong_slot, _copy_in_wrong_slot, _stale_lease,
    _lease_without_owner, _home_mode, _db_mode, _old_temp_file,
], ids=lambda f: f.__name__.strip("_"))
def test_found_then_repaired_then_clean(a, inject):
    checks = inject(a)
    before = snapshot(a)
    found = doctor(a)
    assert set(bad(found)) == set(checks), bad(found)
    assert not found.ok
    assert all(f.status == "problem" and "--repair" in f.detail for f in bad(found).values())
    assert snapshot(a) == before, "doctor without --repair changed something"

    fixed = doctor(a, repair=True)
    assert fixed.ok, fixed.problems
    assert {f.check for f in fixed.repairs} == set(checks)
    assert all(f.status == "repaired" for f in fixed.repairs)
    assert_clean(doctor(a))
    assert "doctor repaired" in (a.home / "awty.log").read_text()


def test_repairs_restore_the_exact_state(a):
    """Wrong-slot, missing and orphan repairs leave exactly one envelope per pending job."""
    _wrong_slot(a)
    _orphan_of_cancelled(a)
    doctor(a, repair=True)
    want = sorted(f"{slot_id(j.next_check_at)}/{j.id}.json" for j in a.list())
    assert tree_files(a.home) == want


def test_stale_lease_goes_back_to_pending_and_live_lease_is_left(a):
    jobs = list(a.list())
    _stale_lease(a)
    live = iso(T0 + timedelta(minutes=5))
    set_lease(a.store.conn, jobs[1].id, "y", live)
    report = doctor(a, repair=True)
    assert "x (1)" in report.get("leases").detail
    rows = {r["id"]: r for r in job_rows(a.home)}
    assert rows[jobs[0].id]["status"] == "pending" and rows[jobs[0].id]["lease_owner"] is None
    assert rows[jobs[1].id]["status"] == "in_flight" and rows[jobs[1].id]["lease_owner"] == "y"
    assert "1 job(s) in flight now" in doctor(a).get("leases").detail


def test_old_temp_file_removed_but_fresh_one_left(a):
    _old_temp_file(a)
    job = next(a.list())
    fresh = envelope_path(a, job).parent / ".fresh.json.tmp"
    fresh.write_text("{")
    doctor(a, repair=True)
    assert fresh.exists()
    assert [p.name for p in envelope_path(a, job).parent.glob("*.tmp")] == [fresh.name]


# --- resolution changes --------------------------------------------------------------------
def reopen(a: Awty, clock, resolution: int) -> Awty:
    a.close()
    (a.home / "awty.toml").write_text(f"resolution = {resolution}\n")
    return Awty(a.home, clock=clock, env={})


def test_finer_resolution_needs_nothing(home, clock):
    """15 -> 5: every 15-minute boundary is a 5-minute one; jobs keep their slot (never
    earlier than due) and doctor does not invent a problem."""
    with Awty(home, clock=clock, env={}) as a:
        job = a.add(URL, in_="2h").job
        assert slot_id(job.next_check_at) == "202611221215"
    with reopen(a, clock, 5) as b:
        assert_clean(doctor(b))
        assert slot_id(next(b.list()).next_check_at) == "202611221215"


@pytest.mark.parametrize("old,new,before,after", [
    (5, 15, "202611221210", "202611221215"),
    (15, 60, "202611221215", "202611221300"),
    (15, 20, "202611221215", "202611221220"),
])
def test_coarser_resolution_reslots_pending_jobs(home, clock, old, new, before, after):
    home.mkdir(mode=0o700)
    (home / "awty.toml").write_text(f"resolution = {old}\n")
    with Awty(home, clock=clock, env={}) as a:
        job = a.add(URL, in_="2h").job
        assert slot_id(job.next_check_at) == before
    with reopen(a, clock, new) as b:
        before_snap = snapshot(b)
        found = doctor(b)
        assert set(bad(found)) == {"resolution"}
        assert f"{before} (1)" in found.get("resolution").detail
        assert snapshot(b) == before_snap

        fixed = doctor(b, repair=True)
        assert fixed.get("resolution").repaired is True
        moved = b.store.get(job.id)
        assert slot_id(moved.next_check_at) == after
        assert moved.next_check_at >= job.first_check_at  # never before due
        assert tree_files(home) == [f"{after}/{job.id}.json"]
        assert_clean(doctor(b))


# --- reported, not repaired ----------------------------------------------------------------
def test_drop_in_is_reported_and_left_for_the_runner(a):
    slot = a.tree.slot_path(next(a.list()).next_check_at)
    (slot / "dropped.json").write_text(json.dumps({"target": URL}))
    report = doctor(a, repair=True)
    f = report.get("drop-ins")
    assert f.ok and "dropped.json" in f.detail and f.repaired is None
    assert (slot / "dropped.json").exists()
    assert report.ok


def test_retired_slot_directories_left_behind(a, clock):
    """A finished slot's directory whose background rm was killed is deleted; one whose
    retirement was cut short before its check gives its files back to their slot."""
    retired = a.tree.retired
    stale = retired / "202611220900.0a1b2c3d.purge"
    stale.mkdir(parents=True)
    (stale / "01KAB3C4D5E6F7G8H9JKMNPQRS.json").write_text("{}")
    old = (clock.now() - timedelta(hours=1)).timestamp()
    os.utime(stale, (old, old))
    young = retired / "202611220915.0a1b2c3e.purge"  # its rm may still be running
    young.mkdir()
    os.utime(young, (clock.now().timestamp(), clock.now().timestamp()))
    cut = retired / "202611220930.0a1b2c3f"
    cut.mkdir()
    (cut / "late.json").write_text(json.dumps({"target": URL}))
    found = bad(doctor(a))
    assert "1 finished slot directory" in found["retired slots"].detail.replace(
        "director(y/ies)", "directory")
    assert "202611220930.0a1b2c3f" in found["cut-short retirements"].detail
    assert stale.exists() and cut.exists()
    report = doctor(a, repair=True)
    assert report.get("retired slots").repaired and report.get("cut-short retirements").repaired
    assert not stale.exists() and not cut.exists() and young.exists()
    assert "202611220930/late.json" in tree_files(a.home)  # the next run imports it


def test_past_slots_need_catchup_which_doctor_does_not_do(a, clock):
    clock.set(T0 + timedelta(hours=4))
    (a.tree.slot_path(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))).mkdir(parents=True)
    (a.tree.slot_path(datetime(2026, 11, 22, 12, 0, tzinfo=UTC)) / "x.json").write_text("{}")
    report = doctor(a, repair=True)
    f = report.get("catch-up")
    assert not f.ok and f.repaired is None
    assert "2 job(s) in 2 past slot(s) (202611221215 … 202611221315)" in f.detail
    assert "awty catchup" in f.detail
    d = report.get("drop-ins")
    assert not d.ok and "run `awty catchup`" in d.detail
    assert not report.ok
    assert len(db_rows(a.home, "future_job")) == 2


def test_bad_config_is_a_finding(a):
    (a.home / "awty.toml").write_text("resolution = 7\n")
    f = doctor(a).get("config")
    assert not f.ok and "resolution" in f.detail


def test_secret_file_readable_by_others_is_chmod_on_repair(home, clock, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("whsec_" + "A" * 44 + "\n")
    os.chmod(secret, 0o644)
    home.mkdir(mode=0o700)
    (home / "awty.toml").write_text(f'signing_secret_file = "{secret}"\n')
    with Awty(home, clock=clock, env={}) as a:
        a.add(URL, in_="1h")
        found = doctor(a).get("secret")
        assert not found.ok and "0644" in found.detail and "AAAA" not in found.detail
        assert doctor(a, repair=True).get("secret").repaired is True
        assert oct(secret.stat().st_mode & 0o777) == "0o600"
        assert doctor(a).get("secret").ok


def test_unsigned_callbacks_are_a_warning(a, home, clock):
    f = doctor(a).get("secret")
    assert f.ok and f.status == "warning"
    assert f.detail.startswith("none configured: callbacks go unsigned")
    res = CliRunner().invoke(app, ["init", "--home", str(home)])  # writes one
    assert res.exit_code == 0, res.stderr
    with Awty(home, clock=clock, env={}) as signed:
        f = doctor(signed).get("secret")
    assert f.status == "ok" and f.detail == f"loaded from {home / 'signing.secret'}"


# --- command line --------------------------------------------------------------------------
runner = CliRunner()


@pytest.fixture
def fake_cron_env(tmp_path, monkeypatch):
    """A fake `crontab` on PATH storing into a file, and HOME in tmp_path."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "crontab"
    script.write_text(FAKE_CRONTAB)
    script.chmod(0o755)
    store = tmp_path / "crontab.txt"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CRONTAB", str(store))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("AWTY_NOW", "2026-11-22T10:07:12Z")
    with cron_daemon(bindir):
        yield store


def cli(home, *args):
    return runner.invoke(app, [*args, "--home", str(home)])


@pytest.mark.slow
def test_cli_doctor_exit_codes_json_and_repair(home, fake_cron_env):
    assert cli(home, "init").exit_code == 0  # signed: an unsigned home is a warning
    assert cli(home, "add", URL, "--in", "2h").exit_code == 0
    res = cli(home, "doctor")
    assert res.exit_code == 1, res.stdout
    assert "cron" in res.stdout and "awty crontab --install" in res.stdout
    assert cli(home, "crontab", "--install", "--awty-bin", "awty").exit_code == 0
    res = cli(home, "doctor")
    assert res.exit_code == 0, res.stdout
    assert "all good" in res.stdout

    os.chmod(home, 0o755)
    res = cli(home, "doctor", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["ok"] is False and doc["repair"] is False
    home_finding = next(f for f in doc["findings"] if f["check"] == "home")
    assert home_finding["status"] == "problem" and home_finding["repaired"] is None
    assert oct(home.stat().st_mode & 0o777) == "0o755"  # read-only without --repair

    res = cli(home, "doctor", "--repair")
    assert res.exit_code == 0, res.stdout
    assert "repaired: home" in res.stdout
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert cli(home, "doctor").exit_code == 0


def test_cli_doctor_with_broken_config_reports_instead_of_failing(home, fake_cron_env):
    assert cli(home, "add", URL, "--in", "2h").exit_code == 0
    (home / "awty.toml").write_text("resolution = 7\n")
    res = cli(home, "doctor", "--json")
    assert res.exit_code == 1 and "Traceback" not in res.stdout + res.stderr
    doc = {f["check"]: f for f in json.loads(res.stdout)["findings"]}
    assert not doc["config"]["ok"] and "resolution" in doc["config"]["detail"]
    assert doc["home"]["ok"] and doc["database"]["ok"]


def test_diagnose_home_by_path(home, fake_cron_env):
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        a.add(URL, in_="1h")
    report = diagnose_home(home, env={"HOME": os.environ["HOME"], "AWTY_NOW": iso(T0)},
                           which=lambda n: None)
    assert report.ok and report.get("cron").status == "warning"


# --- failures and scale --------------------------------------------------------------------
def test_repair_failure_is_reported_not_raised(a, monkeypatch):
    import errno

    _delete_envelope(a)

    def read_only(job):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(a.tree, "write", read_only)
    report = doctor(a, repair=True)
    f = report.get("envelopes")
    assert f.repaired is False and f.status == "repair failed"
    assert "Read-only file system" in f.detail
    assert not report.ok


def test_many_jobs_samples_are_capped_and_all_are_repaired(awty):
    specs = [{"target": URL, "in": f"{2 + i % 3}h"} for i in range(1200)]
    jobs = [r.job for r in awty.add_many(specs)]
    for path in awty.tree.root.rglob("*.batch.jsonl"):  # one envelope file a job, 1100 missing
        path.unlink()
    for j in jobs[1100:]:
        awty.tree.write(j)
    f = doctor(awty).get("envelopes")
    assert f.detail.startswith("1100 pending job(s) without an envelope")
    assert "… and 1095 more" in f.detail and len(f.detail) < 400
    assert doctor(awty, repair=True).get("envelopes").repaired is True
    assert len(tree_files(awty.home)) == 1200
    assert_clean(doctor(awty))


def test_unreadable_tree_is_a_finding_not_a_traceback(a, monkeypatch):
    def denied(slot):
        raise PermissionError(13, "Permission denied", str(slot))

    monkeypatch.setattr(a.tree, "entries", denied)
    report = doctor(a)
    f = report.get("store")
    assert not f.ok and "Permission denied" in f.detail
    assert report.get("cron").ok  # the checks after it still ran


# --- the closing count, and the slot checks agreeing (issue 30, item 11) -----------------------
def test_the_closing_line_counts_what_was_listed(home, tmp_path, monkeypatch):
    empty = tmp_path / "nothing-on-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no crontab, no systemctl: nothing runs the slots
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("AWTY_SIGNING_SECRET", "whsec_" + "A" * 32)
    monkeypatch.setenv("AWTY_NOW", "2026-11-22T10:07:12Z")
    assert cli(home, "add", URL, "--in", "2h").exit_code == 0
    res = cli(home, "doctor")
    assert res.exit_code == 0, res.stdout
    lines = res.stdout.splitlines()
    at = lines[0].index("status")
    statuses = [ln[at:].split()[0] for ln in lines[1:-1]]
    assert statuses.count("warning") == 1 and set(statuses) == {"ok", "warning"}
    assert res.stdout.splitlines()[-1] == "1 warning: nothing runs the slots"
    # a problem too: both counted, each as listed
    monkeypatch.setenv("AWTY_NOW", "2026-11-22T14:07:12Z")
    res = cli(home, "doctor")
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == ("1 problem left: catch-up; "
                                          "1 warning: nothing runs the slots")


def test_last_slot_and_catch_up_never_contradict_each_other(a, clock):
    slot = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
    a.add(URL, at=slot)
    # 30 s after the boundary the run may still be going: neither check calls it overdue
    clock.set(slot + timedelta(seconds=30))
    report = doctor(a)
    assert report.get("catch-up").ok and report.get("last slot").ok
    # 3 minutes after: work waits; "last slot" must not say that nothing is overdue
    clock.set(slot + timedelta(minutes=3))
    report = doctor(a)
    assert not report.get("catch-up").ok
    last = report.get("last slot")
    assert "none is overdue" not in last.detail and "catch-up" in last.detail
