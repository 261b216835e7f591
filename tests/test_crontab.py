"""Cron lines: the schedule per resolution (and per UTC offset), the marker, an idempotent
install that leaves foreign lines alone, and the CLI against a fake `crontab` on PATH."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awty import crontab as cron
from awty.cli import app
from awty.errors import AwtyError
from awty.slots import RESOLUTIONS

HOME = Path("/srv/awty home")  # a space: every path is shell-quoted


# --- entries -------------------------------------------------------------------------------
@pytest.mark.parametrize("res,field", [
    (1, "*"), (2, "*/2"), (5, "*/5"), (10, "*/10"), (15, "*/15"), (20, "*/20"), (30, "*/30"),
    (60, "0"),
])
def test_run_slot_fires_at_every_boundary(res, field):
    lines = cron.entries(HOME, res, "/usr/bin/awty", utc_offset_minutes=0)
    run_slot = [ln for ln in lines if " run-slot " in ln]
    assert len(run_slot) == 1
    assert run_slot[0].startswith(f"{field} * * * * /usr/bin/awty run-slot ")


def test_lines_carry_home_log_and_marker():
    lines = cron.entries(HOME, 15, "/usr/bin/awty", utc_offset_minutes=0)
    commands = [ln for ln in lines if not ln.startswith("#")]
    assert [ln.split()[0] for ln in commands] == ["*/15", "@reboot", "7"]
    q = shlex.quote(str(HOME))
    for ln in commands:
        assert f"--home {q}" in ln
        assert f">> {shlex.quote(str(HOME / 'cron.log'))} #" in ln
        assert "2>" not in ln  # stderr (what needs a human) goes to cron's mail, not the log
        assert ln.endswith(" # awty:/srv/awty home")
    assert "catchup" in commands[1] and "catchup" in commands[2]
    assert all(cron.is_ours(ln, cron.marker(HOME)) for ln in lines)
    assert any("UTC" in ln and "CRON_TZ" in ln for ln in lines if ln.startswith("#"))


@pytest.mark.parametrize("offset", [0, 60, -300, 330, 345, -570, 525])
@pytest.mark.parametrize("res", RESOLUTIONS)
def test_minutes_are_utc_boundaries_in_any_zone(res, offset):
    lines = cron.entries(HOME, res, "awty", utc_offset_minutes=offset)
    run_slot = next(ln for ln in lines if " run-slot " in ln)
    minutes = cron._minutes(run_slot.split()[0])
    # local minute m is UTC minute m - offset: each must be a boundary, and all present
    assert {(m - offset) % 60 for m in minutes} == set(range(0, 60, res))
    catchup = next(ln for ln in lines if " catchup " in ln and not ln.startswith("@"))
    minute = int(catchup.split()[0])
    if res > 1:
        assert (minute - offset) % res != 0, "the safety net must avoid the boundaries"
    assert cron.missed_boundaries(run_slot, res, offset) == []


def test_half_hour_zone_shifts_and_says_so():
    lines = cron.entries(HOME, 60, "awty", utc_offset_minutes=330)
    assert any(ln.startswith("30 * * * * awty run-slot") for ln in lines)
    assert "+330" in lines[1]
    assert cron.minute_field(20, 345) == "5,25,45"


def test_bad_resolution_refused():
    with pytest.raises(ValueError):
        cron.entries(HOME, 7, "awty")


def test_percent_in_path_is_escaped_for_cron():
    home = Path("/srv/100%")
    lines = cron.entries(home, 15, "awty", utc_offset_minutes=0)
    run_slot = next(ln for ln in lines if " run-slot " in ln)
    assert "%" not in run_slot.replace("\\%", "")
    assert cron.runs_slots(run_slot, home)


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_default_bin_is_the_running_interpreters_script(monkeypatch, tmp_path):
    # Another awty first on PATH must not win over the one next to the running interpreter.
    _executable(tmp_path / "other" / "awty")
    monkeypatch.setenv("PATH", f"{tmp_path / 'other'}:{os.environ['PATH']}")
    python = _executable(tmp_path / "venv" / "bin" / "python")
    monkeypatch.setattr(cron.sys, "executable", str(python))
    assert cron.default_bin().endswith(" -m awty")  # no console script beside it
    script = _executable(tmp_path / "venv" / "bin" / "awty")
    assert cron.default_bin() == shlex.quote(str(script))


# --- reading lines -------------------------------------------------------------------------
def test_runs_slots_matches_this_home_only():
    mine = cron.entries(HOME, 15, "awty")[2]
    other = cron.entries(Path("/srv/awty"), 15, "awty")[2]
    assert cron.runs_slots(mine, HOME)
    assert not cron.runs_slots(other, HOME)  # a prefix of the path is not the path
    assert not cron.runs_slots("# */15 * * * * awty run-slot --home '/srv/awty home'", HOME)
    assert cron.runs_slots("*/15 * * * * AWTY_HOME=/h awty run-slot", Path("/h"))
    assert cron.runs_slots("*/15 * * * * awty run-slot --home=/h", Path("/h"))
    assert not cron.runs_slots("*/15 * * * * awty catchup --home /h", Path("/h"))


@pytest.mark.parametrize("line,res,missed", [
    ("*/15 * * * * awty run-slot", 15, []),
    ("0,15,30,45 * * * * awty run-slot", 15, []),
    ("* * * * * awty run-slot", 15, []),
    ("0-59/5 * * * * awty run-slot", 15, []),
    ("*/30 * * * * awty run-slot", 15, [15, 45]),
    ("*/15 8-18 * * * awty run-slot", 15, [0, 15, 30, 45]),
    ("@hourly awty run-slot", 60, []),
    ("@hourly awty run-slot", 30, [30]),
    ("*/x * * * * awty run-slot", 15, None),
])
def test_missed_boundaries(line, res, missed):
    assert cron.missed_boundaries(line, res, 0) == missed


# --- install with a fake run ---------------------------------------------------------------
class FakeCron:
    def __init__(self, text: str | None = None):
        self.text, self.writes = text, 0

    def __call__(self, cmd, input=None, **kw):
        if cmd == ["crontab", "-l"]:
            if self.text is None:
                return subprocess.CompletedProcess(cmd, 1, "", "no crontab for alice\n")
            return subprocess.CompletedProcess(cmd, 0, self.text, "")
        assert cmd == ["crontab", "-"]
        self.text, self.writes = input, self.writes + 1
        return subprocess.CompletedProcess(cmd, 0, "", "")


FOREIGN = ("SHELL=/bin/bash\nMAILTO=ops@example.com\n# nightly backup\n"
           "30 2 * * * /usr/local/bin/backup --all # not awty\n")


def test_install_into_empty_crontab():
    run = FakeCron()
    text, changed = cron.install(HOME, 15, "awty", run, utc_offset_minutes=0)
    assert changed and run.writes == 1
    assert text == "\n".join(cron.entries(HOME, 15, "awty", utc_offset_minutes=0)) + "\n"


def test_install_twice_is_idempotent_and_foreign_lines_untouched():
    run = FakeCron(FOREIGN)
    first, changed = cron.install(HOME, 15, "awty", run, utc_offset_minutes=0)
    assert changed and first.startswith(FOREIGN)
    second, changed = cron.install(HOME, 15, "awty", run, utc_offset_minutes=0)
    assert not changed and second == first and run.writes == 1
    third, changed = cron.install(HOME, 5, "awty", run, utc_offset_minutes=0)
    assert changed and third.startswith(FOREIGN)
    ours = [ln for ln in third.splitlines() if cron.is_ours(ln, cron.marker(HOME))]
    assert len(ours) == 5 and ours[2].startswith("*/5 ")


def test_install_keeps_other_homes_and_lines_added_after_the_block():
    other = Path("/srv/awty")
    run = FakeCron(FOREIGN)
    cron.install(other, 15, "awty", run, utc_offset_minutes=0)
    cron.install(HOME, 15, "awty", run, utc_offset_minutes=0)
    run.text += "0 5 * * 1 weekly-report\n"
    text, _ = cron.install(HOME, 30, "awty", run, utc_offset_minutes=0)
    lines = text.splitlines()
    assert sum(cron.is_ours(ln, cron.marker(other)) for ln in lines) == 5
    assert sum(cron.is_ours(ln, cron.marker(HOME)) for ln in lines) == 5
    assert "0 5 * * 1 weekly-report" in lines
    assert text.startswith(FOREIGN)
    # and the other way round: /srv/awty is a prefix of "/srv/awty home", never its owner
    text, _ = cron.install(other, 60, "awty", run, utc_offset_minutes=0)
    assert sum(cron.is_ours(ln, cron.marker(HOME)) for ln in text.splitlines()) == 5
    assert any(ln.startswith("*/30 ") for ln in text.splitlines())


def test_install_errors_are_awty_errors():
    def missing(cmd, **kw):
        raise FileNotFoundError("crontab")

    with pytest.raises(AwtyError, match="no `crontab` command"):
        cron.install(HOME, 15, "awty", missing)

    def refuses(cmd, **kw):
        if cmd == ["crontab", "-l"]:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(cmd, 1, "", "crontab: permission denied\n")

    with pytest.raises(AwtyError, match="permission denied"):
        cron.install(HOME, 15, "awty", refuses)


# --- the command line, with a fake `crontab` executable on PATH ----------------------------
runner = CliRunner()



@pytest.fixture
def store(fake_crontab) -> Path:
    return fake_crontab


def cli(home, *args):
    return runner.invoke(app, [*args, "--home", str(home)])


def test_cli_prints_entries(home):
    res = cli(home, "crontab", "--awty-bin", "/usr/bin/awty")
    assert res.exit_code == 0, res.stderr
    assert f"/usr/bin/awty run-slot --home {home}" in res.stdout
    assert res.stdout.count(f"# awty:{home}") == 5
    res = cli(home, "crontab", "--resolution", "5")
    assert "*/5 * * * *" in res.stdout
    assert "this home's resolution is 15" in res.stderr


def test_cli_install_twice_one_block_foreign_untouched(home, store):
    store.write_text(FOREIGN)
    res = cli(home, "crontab", "--install", "--awty-bin", "awty")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("installed")
    once = store.read_text()
    res = cli(home, "crontab", "--install", "--awty-bin", "awty")
    assert res.exit_code == 0 and "already installed" in res.stdout
    twice = store.read_text()
    assert twice == once and twice.startswith(FOREIGN)
    assert twice.count(f"# awty:{home}\n") == 5
    assert sum(cron.is_ours(ln, cron.marker(home)) for ln in twice.splitlines()) == 5
    assert home.is_dir()  # cron appends to <home>/cron.log


def test_cli_install_without_crontab_yet(home, store):
    res = cli(home, "crontab", "--install", "--awty-bin", "awty")
    assert res.exit_code == 0, res.stderr
    assert "run-slot" in store.read_text()


def test_cli_install_without_crontab_binary_is_one_line_exit_1(home, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    res = cli(home, "crontab", "--install", "--awty-bin", "awty")
    assert res.exit_code == 1
    assert len(res.stderr.strip().splitlines()) == 1 and "no `crontab` command" in res.stderr
    assert "Traceback" not in res.stdout + res.stderr


def test_cli_bad_resolution_exit_2(home):
    res = cli(home, "crontab", "--resolution", "7")
    assert res.exit_code == 2 and "--resolution" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_cli_notes_env_settings_cron_cannot_see(home, monkeypatch):
    monkeypatch.setenv("AWTY_MAX_CHECKS", "3")
    res = cli(home, "crontab")
    assert res.exit_code == 0 and "cron will not see AWTY_MAX_CHECKS" in res.stderr
