"""The scheduler checks doctor registers (awty.cronhealth), against real stand-ins: a PATH of
temporary executables (a crontab(1) that prints a table), a /proc tree of comm files, a
systemd user unit directory written by `awty systemd --install`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from awty import crontab
from awty import systemd as units
from awty.cronhealth import cron_daemon, last_slot, scheduler

HOME = Path("/srv/awty")


def _exe(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def machine(tmp_path):
    """An empty PATH directory and user home: add executables to ``bin`` to install things."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    user = tmp_path / "user"
    return {"bin": bindir, "env": {"PATH": str(bindir), "HOME": str(user)}, "user": user,
            "units": user / ".config" / "systemd" / "user", "no_systemd": tmp_path / "none"}


def check(m, **kw):
    return scheduler(HOME, 15, env=m["env"], systemd_run_dir=m["no_systemd"], **kw)


def with_crontab(m, table: str | None) -> None:
    """A crontab(1) that prints ``table`` (None: the user has no crontab)."""
    if table is None:
        _exe(m["bin"] / "crontab", 'echo "no crontab for $USER" >&2; exit 1\n')
    else:
        (m["bin"] / "table").write_text(table)
        _exe(m["bin"] / "crontab", f'cat "{m["bin"] / "table"}"\n')


def test_no_scheduler_at_all_is_a_warning_that_passes(machine):
    h = check(machine)
    assert (h.level, h.ok) == ("warning", True) and "no scheduler installed" in h.detail


def test_cron_without_a_line_for_this_home_is_a_problem(machine):
    with_crontab(machine, None)
    h = check(machine)
    assert not h.ok and "awty crontab --install" in h.detail
    other = "\n".join(crontab.entries(Path("/srv/other"), 15, "/usr/bin/awty"))
    with_crontab(machine, f"MAILTO=ops\n{other}\n")
    assert not check(machine).ok


def test_cron_with_our_lines_is_ok_and_missing_boundaries_is_a_problem(machine):
    lines = crontab.entries(HOME, 15, "/usr/bin/awty", utc_offset_minutes=0)
    with_crontab(machine, "\n".join(lines) + "\n")
    h = check(machine)
    assert h.ok and h.level == "ok" and h.via == "cron" and "run-slot" in h.detail
    with_crontab(machine, "0 * * * * awty run-slot --home /srv/awty\n")
    h = scheduler(HOME, 15, env=machine["env"], systemd_run_dir=machine["no_systemd"])
    assert not h.ok and "misses minute(s)" in h.detail


def test_crontab_that_fails_is_a_problem(machine):
    _exe(machine["bin"] / "crontab", 'echo "permission denied" >&2; exit 1\n')
    h = check(machine)
    assert not h.ok and "permission denied" in h.detail


def test_shipped_systemd_units_are_recognised_once_enabled(machine):
    rendered = units.render(HOME, 15, "/opt/awty/bin/awty")
    units.install(rendered, machine["units"])
    h = check(machine)
    assert not h.ok and "not enabled" in h.detail and h.via == "systemd"
    wants = machine["units"] / "timers.target.wants"
    wants.mkdir()
    for t in units.TIMERS:
        (wants / t).symlink_to(machine["units"] / t)
    h = check(machine)
    assert h.ok and h.via == "systemd" and "awty-run-slot.timer" in h.detail
    # the same units for another home do not count for this one
    assert check(machine).ok
    other = scheduler(Path("/srv/other"), 15, env=machine["env"],
                      systemd_run_dir=machine["no_systemd"])
    assert other.level == "warning"


def test_systemd_machine_without_timers_is_a_problem(machine, tmp_path):
    _exe(machine["bin"] / "systemctl", "exit 0\n")
    booted = tmp_path / "run-systemd-system"
    booted.mkdir()
    h = scheduler(HOME, 15, env=machine["env"], systemd_run_dir=booted)
    assert not h.ok and "awty systemd --install" in h.detail


def test_cron_daemon_read_from_proc(tmp_path):
    proc = tmp_path / "proc"
    for pid, name in [(1, "init"), (77, "sshd")]:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(name + "\n")
    h = cron_daemon(proc)
    assert not h.ok and "no cron daemon is running" in h.detail
    (proc / "312").mkdir()
    (proc / "312" / "comm").write_text("crond\n")
    h = cron_daemon(proc)
    assert h.ok and "crond" in h.detail and "312" in h.detail
    assert cron_daemon(tmp_path / "nowhere").level == "warning"


T = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)  # last boundary 10:00, 7 min ago
S = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_last_slot_on_time_late_missed():
    on_time = last_slot(T, 15, pending=[], last_fired=(S, S + timedelta(seconds=3)))
    assert on_time.ok and "202611221000 fired 3s" in on_time.detail
    late = last_slot(T, 15, pending=[], last_fired=(S, S + timedelta(minutes=6)))
    assert late.level == "warning" and late.ok and "6 min after" in late.detail
    missed = last_slot(T, 15, pending=[(S, 4), (S + timedelta(minutes=15), 2)],
                       last_fired=(S - timedelta(minutes=15), S - timedelta(minutes=15)))
    assert not missed.ok and "4 job(s) in 1 slot(s)" in missed.detail
    # a boundary that passed a few seconds ago may still be running: not missed yet
    just = last_slot(S + timedelta(seconds=30), 15, pending=[(S, 4)], last_fired=None)
    assert just.ok


def test_evidence_from_a_real_home(awty, clock, rx):
    from awty.cronhealth import evidence

    job = awty.add(rx.url("/ok"), in_="1m").job
    assert evidence(awty) == {"pending": [(job.next_check_at, 1)], "last_fired": None}
    clock.set(job.next_check_at + timedelta(seconds=4))
    awty.run_slot(job.next_check_at)
    ev = evidence(awty)
    assert ev["pending"] == [] and ev["last_fired"][0] == job.next_check_at
    h = last_slot(clock.now(), 15, **ev)
    assert h.ok and "fired 4s" in h.detail
