"""awty doctor and what fires the slots: a crontab line for this home (read through the injected
``which``/``run``, never the real crontab), the cron daemon among the processes, a systemd user
timer, a last slot fired late."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

from helpers import cron_fakes, doctor, fake_proc

from awty import crontab
from awty.doctor import check_cron, diagnose


def test_no_scheduler_installed_is_a_warning_not_a_failure(a):
    report = doctor(a, binary=False)
    f = report.get("cron")
    assert f.ok and f.status == "warning" and "no scheduler installed" in f.detail
    assert "install cron" in f.detail and report.ok


def test_cron_without_a_daemon_is_a_problem(a, tmp_path):
    which, run = cron_fakes(crontab.entries(a.home, a.settings.resolution, "awty"))
    report = diagnose(a, env={"HOME": str(tmp_path / "user")}, which=which, run=run,
                      proc=fake_proc(tmp_path / "p", "sshd"))
    assert report.get("cron").ok
    daemon = report.get("cron daemon")
    assert not daemon.ok and "no cron daemon is running" in daemon.detail and not report.ok


def test_last_slot_fired_late_is_a_warning(a, clock, rx):
    slot = datetime(2026, 11, 22, 10, 30, tzinfo=UTC)
    a.add(rx.url("/late"), at=slot)
    clock.set(slot + timedelta(minutes=9))  # the run starts 9 minutes after its boundary
    a.run_slot(slot)
    report = doctor(a)
    f = report.get("last slot")
    assert f.status == "warning" and "9 min after its boundary" in f.detail and report.ok


def test_cron_empty_crontab(a):
    f = doctor(a, cron_lines=[], rc=1, stderr="no crontab for alice").get("cron")
    assert not f.ok and "awty crontab --install" in f.detail


def test_cron_line_for_another_home_does_not_count(a, tmp_path):
    lines = crontab.entries(tmp_path / "other", 15, "awty")
    assert not doctor(a, cron_lines=lines).get("cron").ok


def test_cron_line_missing_boundaries_is_reported(a):
    line = f"*/30 * * * * awty run-slot --home {a.home}"
    f = doctor(a, cron_lines=[line]).get("cron")
    assert not f.ok and "misses minute(s) 15,45" in f.detail


def test_cron_hand_written_line_is_accepted(a):
    line = f"0,15,30,45 * * * * AWTY_HOME={a.home} /opt/bin/awty run-slot >/dev/null 2>&1"
    assert doctor(a, cron_lines=["MAILTO=ops", line]).get("cron").ok


def test_cron_crontab_failing_is_a_finding(a):
    def run(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, 30)

    f = check_cron(a.home, 15, env={"HOME": "/nonexistent"}, which=lambda n: "/x",
                   run=run, proc=None)[0]
    assert not f.ok and "failed" in f.detail


def test_cron_systemd_user_timer_counts_when_enabled(a, tmp_path):
    user = tmp_path / "user"
    units = user / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "awty-run-slot.timer").write_text("[Timer]\nOnCalendar=*:0/15\n")
    (units / "awty-run-slot.service").write_text(
        f"[Service]\nExecStart=/usr/bin/awty run-slot --home {a.home}\n")
    which, run = cron_fakes([], rc=1, stderr="no crontab for alice")
    f = check_cron(a.home, 15, env={"HOME": str(user)}, which=which, run=run,
                   proc=None)[0]
    assert not f.ok and "systemctl --user enable --now" in f.detail
    (units / "timers.target.wants").mkdir()
    (units / "timers.target.wants" / "awty-run-slot.timer").symlink_to(
        units / "awty-run-slot.timer")
    f = check_cron(a.home, 15, env={"HOME": str(user)}, which=which, run=run,
                   proc=None)[0]
    assert f.ok and "awty-run-slot.timer" in f.detail


def test_default_home_line_without_home_flag_counts(tmp_path, clock):
    user = tmp_path / "user"
    home = user / ".local" / "share" / "awty"
    which, run = cron_fakes(["*/15 * * * * /usr/local/bin/awty run-slot"])
    f = check_cron(home, 15, env={"HOME": str(user)}, which=which, run=run,
                   proc=None)[0]
    assert f.ok
    f = check_cron(tmp_path / "elsewhere", 15, env={"HOME": str(user)}, which=which, run=run,
                   proc=None)[0]
    assert not f.ok
