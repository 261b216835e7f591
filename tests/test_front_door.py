"""The front door (issues 13 and 15): what a newcomer types and sees, through the real
``awty`` console script, in a pipe and in a real pseudo-terminal of 80 and 60 columns."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from helpers import T0

AWTY = Path(sys.executable).parent / "awty"
BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters
ID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
runner = CliRunner()


def awty(*args: str, env: dict[str, str] | None = None, input: str | None = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([str(AWTY), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, input=input)


def on_terminal(*args: str, columns: int, env: dict[str, str] | None = None) -> str:
    """What ``awty ARGS`` prints on a real pseudo-terminal COLUMNS wide."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(AWTY), *args], stdout=slave, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL,
                         env={**os.environ, "COLUMNS": str(columns), **(env or {})})
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert p.wait(timeout=60) == 0, p.stderr.read()
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


LONG = "https://api.example.com/hooks/orders/with/a/rather/long/path?tenant=acme&x="


@pytest.fixture
def filled(home):
    """A home with four pending jobs (long targets) and two ended ones (one failed)."""
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        for i in range(4):
            a.add(LONG + str(i), in_=f"{i + 1}h", entity="order", key=str(40 + i))
        ok = a.add("echo hello from the job; echo second line", kind="exec", in_="1m",
                   payload={"order": 7}).job
        bad = a.add("echo about to fail >&2; exit 3", kind="exec", in_="1m",
                    max_attempts=1).job
        a.clock.set(ok.next_check_at)
        a.run_slot(ok.next_check_at)
    return {"home": home, "ok": ok.id, "bad": bad.id}


# --- global options where people put them --------------------------------------------------
@pytest.mark.slow
def test_global_options_before_or_after_the_command(filled):
    home = str(filled["home"])
    before = awty("--home", home, "--json", "list")
    after = awty("list", "--json", "--home", home)
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert len(json.loads(before.stdout)) == 4
    assert awty(f"--home={home}", "--utc", "slots").stdout == awty("slots", "--utc", "--home",
                                                                   home).stdout
    # a command without such an option says so, in one line, exit 2
    p = awty("--json", "version")
    assert p.returncode == 2 and "--json" in p.stderr and len(p.stderr.splitlines()) == 1


def test_version_flag_and_command():
    flag, command = awty("--version"), awty("version")
    assert flag.returncode == 0 and flag.stdout == command.stdout
    assert re.fullmatch(r"awty \S+\n", flag.stdout)
    assert awty("-V").stdout == command.stdout


# --- bare awty and help --------------------------------------------------------------------
@pytest.mark.parametrize("args, shows", [
    ([], "Commands:"), (["secret"], "new"), (["help"], "Commands:"),
    (["help", "list"], "Usage: awty list"), (["help", "secret", "new"], "Usage: awty secret new"),
])
def test_bare_awty_and_help_show_help_exit_0(args, shows):
    p = awty(*args)
    assert p.returncode == 0, p.stderr
    assert shows in p.stdout and p.stderr == ""


def test_bare_app_through_the_runner_is_help_too():
    res = runner.invoke(app, [])
    assert res.exit_code == 0 and "Commands:" in res.stdout


# --- pipes and terminals -------------------------------------------------------------------
def test_pipes_get_plain_aligned_columns(filled):
    p = awty("list", "--home", str(filled["home"]))
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert not BOX.search(p.stdout) and "\x1b" not in p.stdout
    assert lines[0].split() == ["id", "slot", "(fires)", "kind", "target", "entity/key",
                                "checks", "status"]
    assert len(lines) == 5  # header + one line per job, whatever the width
    assert all(LONG in ln for ln in lines[1:])  # nothing cut in a pipe
    starts = {ln.index("https") for ln in lines[1:]}
    assert starts == {lines[0].index("target")}  # aligned
    grep = subprocess.run(f"{AWTY} list --home {filled['home']} | grep 'order/42'", shell=True,
                          capture_output=True, text=True, timeout=60)
    assert len(grep.stdout.splitlines()) == 1


@pytest.mark.parametrize("columns", [80, 60])
@pytest.mark.parametrize("command", [["list"], ["history"], ["history", "--failed"],
                                     ["slots"]])
def test_terminal_tables_fit_and_never_cut_ids(filled, columns, command):
    text = on_terminal(*command, "--home", str(filled["home"]), columns=columns,
                       env={"NO_COLOR": "1"})
    lines = text.splitlines()
    assert "\x1b" not in text and not BOX.search(text)
    assert all(len(ln) <= columns for ln in lines), text
    assert len(lines) >= 2 and lines[0].split()[0] in ("id", "ended", "slot")
    if command[0] != "slots":
        ids = [m for ln in lines[1:] for m in ID.findall(ln)]
        assert len(ids) == len(lines) - 1  # every row carries its whole id on one line


def test_terminal_80_columns_cuts_low_value_columns_with_ellipsis(filled):
    text = on_terminal("list", "--home", str(filled["home"]), columns=80)
    head, *rows = text.splitlines()
    assert head.startswith("\x1b[1m")  # a bold header on a terminal, without NO_COLOR
    assert "target" in head and "checks" not in head
    assert all("…" in r and LONG not in r for r in rows)
    history = on_terminal("history", "--failed", "--home", str(filled["home"]), columns=60,
                          env={"NO_COLOR": "1"})
    assert history.splitlines()[0].split() == ["ended", "id", "outcome"]


# --- completion ----------------------------------------------------------------------------
@pytest.mark.parametrize("shell, mark", [("bash", "complete -o default -F"),
                                         ("zsh", "compdef"), ("fish", "complete --command")])
def test_completion_scripts(shell, mark):
    p = awty("completion", shell)
    assert p.returncode == 0 and mark in p.stdout and "_AWTY_COMPLETE" in p.stdout


@pytest.mark.slow
def test_completion_completes_commands_and_options():
    env = {"_AWTY_COMPLETE": "complete_bash", "COMP_CWORD": "1", "COMP_WORDS": "awty li"}
    assert awty(env=env).stdout.split() == ["list"]
    env = {**env, "COMP_CWORD": "2", "COMP_WORDS": "awty history --fa"}
    assert awty(env=env).stdout.split() == ["--failed"]
    bad = awty("completion", "tcsh")
    assert bad.returncode == 2 and "bash, zsh, fish" in bad.stderr


def test_add_does_not_load_the_setup_commands(home):
    code = ("import sys, runpy\nsys.argv=['awty','add','https://e.com/','--in','2h']\n"
            "try:\n    runpy.run_module('awty', run_name='__main__')\nexcept SystemExit:\n"
            "    pass\nprint('LOADED', [m for m in ('awty.cli.setup','awty.systemd','awty.cli.tables',"
            "'awty.notify','awty.cronhealth','awty.cli.addjob')"
            " if m in sys.modules], file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)
    assert "LOADED ['awty.cli.addjob']" in p.stderr, p.stderr


# --- lists say when they are cut -----------------------------------------------------------
@pytest.mark.slow
def test_list_says_how_many_more_on_stderr(filled):
    home = str(filled["home"])
    p = awty("list", "--limit", "1", "--home", home)
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 2
    assert p.stderr == "… 3 more (use --limit / --all)\n"
    full = awty("list", "--json", "--home", home)
    assert len(json.loads(full.stdout)) == 4 and full.stderr == ""
    cut = awty("list", "--json", "--limit", "3", "--home", home)
    assert len(json.loads(cut.stdout)) == 3 and "1 more" in cut.stderr
    whole = awty("list", "--all", "--home", home)
    assert len(whole.stdout.splitlines()) == 5 and whole.stderr == ""


def test_list_default_limit_is_100_and_says_so(home):
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        a.add_many([{"target": f"https://e.com/{i}", "in": "2h"} for i in range(1203)])
    p = awty("list", "--home", str(home))
    assert len(p.stdout.splitlines()) == 101
    assert p.stderr == "… 1,103 more (use --limit / --all)\n"


# --- output, payloads, failures ------------------------------------------------------------
@pytest.mark.slow
def test_show_prints_the_last_output_and_the_payload(filled):
    p = awty("show", filled["ok"], "--home", str(filled["home"]))
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("output of the last execution:\nhello from the job\n"
                             "second line\n")
    assert 'payload   {"order": 7}' in p.stdout
    doc = json.loads(awty("show", filled["ok"], "--json", "--home", str(filled["home"])).stdout)
    assert doc["payload"] == {"order": 7} and doc["state"] == "ended"


def test_add_json_prints_the_payload(home):
    p = awty("add", "https://e.com/", "--in", "2h", "--payload", '{"a": [1, 2]}', "--json",
             "--home", str(home))
    assert json.loads(p.stdout)["payload"] == {"a": [1, 2]}


@pytest.mark.slow
def test_history_failed_is_outcome_failed_with_the_error_line(filled):
    home = str(filled["home"])
    failed = awty("history", "--failed", "--home", home)
    assert failed.stdout == awty("history", "--outcome", "failed", "--home", home).stdout
    head, *rows = failed.stdout.splitlines()
    assert head.split()[-1] == "error" and len(rows) == 1
    assert filled["bad"] in rows[0] and "about to fail" in rows[0]
    both = awty("history", "--failed", "--outcome", "done", "--home", home)
    assert both.returncode == 2


def test_python_jobs_end_with_a_real_reason(home, tmp_path):
    (tmp_path / "frontchecks.py").write_text("def done(job):\n    return None\n")
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        job = a.add("frontchecks:done", kind="python", in_="1m", cwd=str(tmp_path)).job
        a.clock.set(job.next_check_at + timedelta(seconds=1))
        a.run_slot(job.next_check_at)
        [row] = a.history()
    assert (row.outcome.value, row.reason) == ("done", "returned")


# --- packaging, systemd, cron --------------------------------------------------------------
@pytest.mark.slow
def test_systemd_prints_and_installs_units_for_this_home(tmp_path):
    home = tmp_path / "my home"
    printed = awty("systemd", "--home", str(home))
    assert printed.returncode == 0, printed.stderr
    assert f"ExecStart={AWTY} run-slot --home '{home}'" in printed.stdout
    assert "OnCalendar=*:0/15 UTC" in printed.stdout and "OnCalendar=*:07 UTC" in printed.stdout
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    first = awty("systemd", "--install", "--home", str(home), env=env)
    assert first.returncode == 0 and "wrote awty-run-slot.service" in first.stdout
    unit_dir = tmp_path / "config" / "systemd" / "user"
    assert sorted(p.name for p in unit_dir.iterdir()) == [
        "awty-catchup.service", "awty-catchup.timer", "awty-run-slot.service",
        "awty-run-slot.timer"]
    again = awty("systemd", "--install", "--home", str(home), env=env)
    assert "already installed" in again.stdout


def test_crontab_install_writes_this_awty_and_keeps_stderr_for_cron(fake_crontab, home):
    p = awty("crontab", "--install", "--home", str(home))
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in fake_crontab.read_text().splitlines() if " run-slot " in ln]
    assert lines[0].split()[5] == str(AWTY)
    assert "2>&1" not in fake_crontab.read_text()


@pytest.mark.slow
def test_wheel_ships_license_units_and_crontab_example(tmp_path):
    import zipfile

    root = Path(__file__).resolve().parent.parent
    assert "MIT License" in (root / "LICENSE").read_text()
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(root),
                        "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    [wheel] = tmp_path.glob("awty-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"awty/data/awty-run-slot.service", "awty/data/awty-run-slot.timer",
            "awty/data/awty-catchup.service", "awty/data/awty-catchup.timer",
            "awty/data/crontab.example"} <= names
    assert any(n.endswith("licenses/LICENSE") for n in names)


@pytest.mark.slow
def test_history_says_when_it_is_cut(filled):
    home = str(filled["home"])
    cut = awty("history", "--limit", "1", "--home", home)
    assert len(cut.stdout.splitlines()) == 2
    assert cut.stderr == "… more than 1 (use --limit N, or --limit 0 for all)\n"
    whole = awty("history", "--limit", "2", "--home", home)
    assert len(whole.stdout.splitlines()) == 3 and whole.stderr == ""
