"""Issue 28, item 7: bad input is never a traceback, whatever the command.

- Every command's options and arguments (read from the app itself, so a new option is fuzzed
  without touching this file) with hypothesis-drawn values: undecodable argv bytes (what
  Python's surrogateescape makes of them), huge durations, huge numbers, ids, times, paths,
  plain nonsense. Run in-process through Typer's CliRunner for speed, each on a fresh copy of
  a home holding pending, ended and failed jobs. Each run exits 0, 1 or 2, prints no traceback,
  and an error is at most one line on stderr.
- What the fuzzing found (11 tracebacks out of 2,000 on the day it was written), as real
  ``python -m awty`` processes with raw bytes in argv, on both stores.

``AWTY_FULL=1`` runs ten times as many examples.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import typer.main
import typer.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from awty.slots import iso
from helpers import T0
from relkit import FULL, cli_env, run_cli

pytestmark = pytest.mark.reliability

NOW = iso(T0)
# These would reach past the test's tmp_path (the user's crontab and systemd directory), or
# never end (a server).
NEVER = {("crontab", "--install"), ("systemd", "--install")}
NEVER_COMMANDS = {"serve", "receiver"}
HOME_MARK = "<home>"  # the copy of the home each run gets


def commands() -> dict[str, list]:
    """``"secret new"`` -> its click parameters, for every command of the app."""
    found: dict[str, list] = {}

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = cmd.params
    walk(APP, [])
    return found


APP = typer.main.get_command(app)
COMMANDS = commands()
cli = CliRunner()
TAKES_HOME = {name for name, params in COMMANDS.items() if any(p.name == "home" for p in params)}


# --- values ---------------------------------------------------------------------------------
# What a real argv holds: any text but NUL, with undecodable bytes as U+DC80..U+DCFF.
undecodable = st.sampled_from([chr(c) for c in range(0xDC80, 0xDD00)])
argv_chars = st.characters(exclude_categories=("Cs",), exclude_characters="\x00") | undecodable
argv_text = st.text(argv_chars, max_size=30)
dirty = st.builds(lambda a, b, c: a + b + c, argv_text, undecodable, argv_text)
# Text no real argv can hold (only an in-process caller passes it): refused first of all.
impossible = st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udbff"])
huge_numbers = st.sampled_from(["9" * 400, "99999999999999999999", "1" + "0" * 40, "1e400",
                                "-99999999999999999999", str(2**63), str(2**64), "1e308"])
durations = st.sampled_from([
    "1s", "90s", "15m", "2h", "1d", "1w", "30d", "0", "-1s", "PT2H", "P1DT2H", "2 hours",
    "99999999999999999999w", "999999999999d", "99999999999d", "365001d", "1000000w",
    "P99999999999999W", "PT99999999999999999H", "9" * 400 + "s", "nan", "inf", "1e9s", "1y",
]) | huge_numbers
times = st.sampled_from([
    "now", "2026-11-22T12:00:00Z", "tomorrow 9am", "yesterday", "monday", "9", "1800000000",
    "99999999999", "9" * 30, "0001-01-01", "9999-12-31T23:59:59-23:59", "in 99999999999w",
    "99999999999w ago", "now - 999999999d", "last 99999999999 days", "2026-02-30",
])
ints = st.integers(-(10**30), 10**30).map(str) | huge_numbers | st.sampled_from(
    ["0", "1", "-1", "many", "1.5", "0x10", ""])
slots = st.sampled_from(["202611221015", "202611221030", "202611221016", "999999999999",
                         "000000000000", "2026112210150", "now"])
words = st.sampled_from(["pending", "in_flight", "done", "gone", "cancelled", "failed",
                         "expired", "http", "exec", "python", "skip", "run", "bash", "zsh",
                         "fish", "0/2", "1/2", "2/2", "-1/2", "1/0", "99999999999999/2"])
names = st.sampled_from(["nightly", "ci", "NIGHTLY", "no-such", "a" * 300, "\udcff"])
crons = st.sampled_from(["*/5 * * * *", "@daily", "0 9 * * mon", "61 * * * *", "* * *",
                         "0 0 31 2 *", "@reboot", "*/0 * * * *", "0 0 * * 8"])
zones = st.sampled_from(["UTC", "Europe/Berlin", "Nowhere/City", "../../etc/passwd", "+01:00",
                         "America/St_Johns", "\udcff"])
paths = st.sampled_from(["-", "out.jsonl", "/dev/null", "/nonexistent/x", ".", "/", "..",
                         "export.jsonl", "request.txt", "secret.txt", "\udcff.jsonl"])
settings_pairs = st.builds(
    lambda k, v: f"{k}={v}",
    st.sampled_from(["resolution", "max_delay", "lease", "quick_retries", "timeout",
                     "backoff", "max_attempts", "horizon", "batch_size", "nonsense"]),
    st.one_of(durations, ints, argv_text, dirty))


def ids_of(known: list[str]):
    """Real ids of the home, their prefixes and spellings, and wrong ones."""
    real = st.sampled_from(known)
    return st.one_of(
        real, real.map(str.lower), st.builds(lambda i, n: i[:n], real, st.integers(1, 26)),
        st.builds(lambda i, b: i + b, real, undecodable),
        st.builds(lambda i, b: b + i[:8], real, undecodable),
        st.sampled_from(["01NOSUCHJOB0000000000000000", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
                         "\udcff", "\udcff" * 30, "x" * 5000, "-", " "]))


def values_for(name: str, ids):
    """Values for a parameter named ``name``: mostly those it is meant to read, often wild."""
    meant = {
        "ids": ids, "job_id": ids, "older_than": durations, "window": durations,
        "since": times | durations, "until": times, "at": times, "in_": durations,
        "timeout": durations, "horizon": durations, "misfire_grace": durations,
        "tolerance": durations, "limit": ints, "max_checks": ints, "max_attempts": ints,
        "resolution": ints, "slot": slots, "shard": words, "status": words,
        "outcome": words, "kind": words, "misfire": words, "shell": words,
        "changes": settings_pairs, "output": paths, "source": paths, "batch": paths,
        "request": paths, "secret_file": paths, "unit_dir": paths, "exec_dir": paths,
        "name": names, "every": durations, "missed_window": durations, "start": times,
        "n": ints, "cron": crons, "tz": zones, "missed": words, "scope": words,
    }.get(name, argv_text)
    return st.one_of(meant, meant, meant, dirty, argv_text, huge_numbers, durations, times,
                     impossible)


@st.composite
def command_lines(draw, ids):
    name = draw(st.sampled_from(sorted(set(COMMANDS) - NEVER_COMMANDS)))
    args = name.split()
    if name in TAKES_HOME:
        args += ["--home", HOME_MARK]
    for p in COMMANDS[name]:
        opt = p.opts[0] if p.opts else p.name
        if (name, opt) in NEVER or p.name == "home":
            continue
        if p.param_type_name == "argument":
            count = draw(st.integers(0, 3)) if p.nargs == -1 else int(draw(st.integers(0, 9)) > 0)
            args += [draw(values_for(p.name, ids)) for _ in range(count)]
        elif getattr(p, "is_flag", False):
            if draw(st.integers(0, 3)) == 0:
                args.append(opt)
        elif draw(st.integers(0, 2)) == 0:
            for _ in range(draw(st.integers(1, 2)) if p.multiple else 1):
                args += [opt, draw(values_for(p.name, ids))]
    return args


# --- what every run starts from --------------------------------------------------------------
def make_workdir(work: Path) -> list[str]:
    """``work/home``: pending jobs in two slots, by entity; ended ones (cancelled, and failed
    by a receiver that is not there); a schedule and a token. Beside it, files the path
    options may name: an export of that home, a signed request, a secret. Returns the ids."""
    home = work / "home"
    clock = FixedClock(T0)
    with Awty(home, clock=clock, env={}, quick_retries=0) as a:
        added = [a.add("http://127.0.0.1:9/hook", in_=when, entity="order", key=str(n),
                       max_attempts=1)
                 for n, when in enumerate(["1m", "1m", "20m", "2h"])]
        a.cancel(added[3].job.id)
        a.schedule("nightly", "http://127.0.0.1:9/nightly", cron="0 3 * * *", tz="UTC")
        a.new_token("ci", "jobs:read")
        clock.set(added[0].job.next_check_at)
        a.run_slot(added[0].job.next_check_at)
        with open(work / "export.jsonl", "w") as f:
            a.export(f)
    (work / "request.txt").write_text("POST /hook\n\n{}\n")
    (work / "secret.txt").write_text("whsec_" + "A" * 40 + "\n")
    return [r.job.id for r in added]


def bounded(run, args: list[str], limit: float = 60):
    """``run()``, failing the test (rather than hanging it) when it does not end: a command
    that serves until stopped belongs in NEVER_COMMANDS."""
    box: list = []
    t = threading.Thread(target=lambda: box.append(run()), daemon=True)
    t.start()
    t.join(limit)
    assert box, f"awty {args} still running after {limit:g} s"
    return box[0]


# Commands whose failure is a report of several lines (documented in their --help).
REPORTS = {"schedule import-crontab": "awty: line "}


@pytest.mark.slow  # ~20-30 s on a loaded 2-core machine
def test_every_command_fuzzed(tmp_path, monkeypatch):
    template = tmp_path / "template"
    known = make_workdir(template)
    monkeypatch.chdir(tmp_path)
    # Typer's CliRunner builds every command's parameters again on each invoke (~0.1 s, most
    # of a run): give it the app built once.
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: APP)
    env = {"AWTY_NOW": NOW, "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}
    seen = {"ok": 0, "failed": 0, "refused": 0}
    runs = [0]

    @settings(max_examples=6000 if FULL else 600, deadline=timedelta(seconds=20),
              database=None, suppress_health_check=list(HealthCheck))
    @given(command_lines(ids_of(known)))
    def check(args):
        runs[0] += 1
        work = tmp_path / f"run{runs[0]}"
        shutil.copytree(template, work)
        os.chdir(work)  # relative paths drawn land here, and go with it
        try:
            res = bounded(lambda: cli.invoke(
                app, [str(work / "home") if a == HOME_MARK else a for a in args], env=env,
                input=""), args)
        finally:
            os.chdir(tmp_path)
            shutil.rmtree(work, ignore_errors=True)
        assert res.exception is None or isinstance(res.exception, SystemExit), \
            (args, f"{type(res.exception).__name__}: {res.exception}")
        assert "Traceback" not in res.stdout + res.stderr, (args, res.stderr)
        assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.stderr)
        if res.exit_code:
            # (lines end in "\n" only: a file name may hold U+0085 or U+2028)
            lines = res.stderr.rstrip("\n").split("\n") if res.stderr else []
            report = next((v for k, v in REPORTS.items() if " ".join(args).startswith(k)), None)
            if report is not None and len(lines) > 1:
                assert all(ln.startswith(report) for ln in lines), (args, res.stderr)
            else:
                assert len(lines) <= 1, (args, res.stderr)
                assert not lines or lines[0].startswith("awty"), (args, res.stderr)
        seen[("ok", "failed", "refused")[res.exit_code]] += 1

    check()
    print(f"\n{seen}")
    # the values must reach the commands, not all stop at the parser
    assert seen["ok"] > 50 and seen["refused"] > 50, seen


# --- what it found, as real processes --------------------------------------------------------
FOUND = [
    # undecodable bytes in ids: SQLite cannot encode a lone surrogate
    (["show", b"\xff"], 2), (["show", b"01K\xff"], 2), (["run", b"\xffabc"], 2),
    (["retry", b"a\xffb"], 2), (["cancel", b"\xff"], 2), (["reschedule", b"\xff", "--in", "1h"], 2),
    # … and in entity / key filters
    (["list", "--entity", b"\xff"], 2), (["list", "--entity", "order", "--key", b"\xff"], 2),
    (["history", "--entity", b"\xff"], 2), (["cancel", "--entity", b"\xff"], 2),
    # durations past what a timedelta or a date holds
    (["prune", "--older-than", "99999999999999999999w"], 2),
    (["prune", "--older-than", "9" * 400], 2), (["stats", "--window", "999999999999d"], 2),
    (["history", "--since", "99999999999d"], 2), (["list", "--limit", "9" * 40], 0),
    (["history", "--limit", "9" * 40], 0),
    # a crontab line and a unit file are text
    (["crontab", "--awty-bin", b"/opt/\xff/awty"], 2),
    (["systemd", "--awty-bin", b"/opt/\xff/awty"], 2),
    # names of schedules and tokens
    (["schedule", "pause", b"\xff"], 2), (["schedule", "show", b"n\xff"], 2),
    (["token", "revoke", b"\xff"], 1), (["token", "new", "ci", "--scope", "jobs:read",
                                           "--exec-env", b"A=\xff"], 2),
    # an error quoting a file name that holds a newline is still one line
    (["import", b"no\nsuch.jsonl"], 2),
    # a home with a schedule: its pending occurrence's time was not JSON
    (["export"], 0),
]


@pytest.mark.slow
def test_found_cases_as_real_processes(tmp_path, backend):
    home = tmp_path / "home"
    env = {**cli_env(home, T0), **backend.env, "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}
    assert run_cli(["init"], env).returncode == 0
    for args in (["add", "http://127.0.0.1:9/", "--in", "1h", "--entity", "order"],
                 ["schedule", "add", "nightly", "http://127.0.0.1:9/n", "--cron", "0 3 * * *"]):
        added = run_cli(args, env)
        assert added.returncode == 0, added.stderr
    before = _state(env)
    failures = []
    for args, code in FOUND:
        p = subprocess.run([sys.executable, "-m", "awty", *(os.fsencode(a) if isinstance(a, str)
                                                            else a for a in args)],
                           env=env, capture_output=True, timeout=120)
        err = p.stderr.decode("utf-8", "backslashreplace")
        if p.returncode != code or "Traceback" in err or (code and err.count("\n") > 1):
            failures.append(f"{args!r}: exit {p.returncode}, stderr {err[-300:]!r}")
    assert not failures, "\n".join(failures)
    assert _state(env) == before  # nothing changed


def _state(env: dict[str, str]) -> str:
    res = run_cli(["list", "--json"], env)
    assert res.returncode == 0, res.stderr
    return res.stdout

