"""``awty add`` without Typer (issue 12, item 4): the quick path reads exactly what the Typer
command reads, hands everything else to the Typer app, and never imports typer."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import awty.cli.jobs as jobs
from awty.cli import app
from awty.cli.quickadd import parse

READ = [
    ["https://e.com/", "--in", "2h"],
    ["https://e.com/", "--in=2h", "--json", "--utc", "--dry-run"],
    ["--at", "now", "https://e.com/", "--payload", '{"a": 1}', "--entity", "order", "--key",
     "42", "--idempotency-key", "k1", "--header", "A: b", "--header=C: d"],
    ["echo hi", "--exec", "--in", "1h", "--max-checks", "3", "--max-attempts=2",
     "--horizon", "2d", "--timeout", "5s", "--misfire-grace", "1m"],
    ["m.f:g", "--call", "--in", "1h", "--payload", "-"],
    ["--batch", "jobs.jsonl", "--dry-run"],
    ["--batch=-"],
    ["--in", "2h"],  # no TARGET: the body's own error, same on both paths
    ["--in", "1h", "--exec", "--", "-x"],
    ["https://e.com/", "--in", "2h", "--home", "/tmp/somewhere"],
    ["https://e.com/", "--in", "2h", "--max-checks", " 7 "],
]

LEFT_TO_TYPER = [
    ["--help"], ["-h"], ["https://e.com/", "--oops"], ["https://e.com/", "--in"],
    ["https://e.com/", "--max-checks", "x"], ["a", "b"], ["https://e.com/", "--exec=yes"],
    ["https://e.com/", "--in", "1h", "--in", "2h"], ["https://e.com/", "--in", "-1h"],
    ["https://e.com/", "--home", ""], ["--", "a", "b"], ["https://e.com/", "--ex"],
    ["https://e.com/", "--json", "--json"],
]


@pytest.mark.parametrize("args", READ)
def test_quick_path_reads_what_typer_reads(args, monkeypatch):
    seen = {}

    def capture(target, **kw):
        seen.update(kw, target=target)

    monkeypatch.setattr(jobs, "run_add", capture)
    res = CliRunner().invoke(app, ["add", *args])
    assert res.exit_code == 0, res.output
    quick = parse(args)
    assert quick is not None
    typer_read = {k: v for k, v in seen.items() if v not in (None, False)}
    assert {k: v for k, v in quick.items() if v is not None} == typer_read


@pytest.mark.parametrize("args", LEFT_TO_TYPER)
def test_anything_unsure_is_left_to_typer(args):
    assert parse(args) is None


def _awty(home, *args):
    code = ("import sys, runpy\nsys.argv=['awty', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('awty', run_name='__main__')\nexcept SystemExit as e:\n"
            "    code = e.code\nelse:\n    code = 0\n"
            "print('TYPER', 'typer' in sys.modules, file=sys.stderr)\n"
            "print('WORDS', 'cron_descriptor' in sys.modules, file=sys.stderr)\n"
            "sys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)


@pytest.mark.slow
def test_plain_add_never_imports_typer_and_errors_are_unchanged(home):
    p = _awty(home, "add", "https://e.com/", "--in", "2h", "--entity", "order", "--key", "1")
    assert p.returncode == 0 and p.stdout.startswith("added "), p.stderr
    assert "TYPER False" in p.stderr
    # the library's error: one line, exit 2, still without Typer
    p = _awty(home, "add", "https://e.com/", "--in", "soon")
    assert p.returncode == 2 and "TYPER False" in p.stderr
    assert p.stderr.splitlines()[0].startswith("awty: ")
    # the parser's error: Typer's one line, as before
    p = _awty(home, "add", "https://e.com/", "--in", "2h", "--max-checks", "x")
    assert p.returncode == 2 and "TYPER True" in p.stderr
    assert p.stderr.splitlines()[0] == ("awty add: Invalid value for '--max-checks': 'x' is "
                                        "not a valid int.  (see --help)")


# --- `awty schedule add` (issue 32): the same kind of path -------------------------------------
SCHEDULE_READ = [
    ["report", "https://e.com/", "--cron", "0 9 * * mon-fri", "--tz", "Europe/Berlin"],
    ["sync", "make sync", "--exec", "--every=2h", "--start", "today 13:00", "--missed", "skip",
     "--json", "--utc"],
    ["b", "m.f:g", "--call", "--every", "1d", "--missed=all", "--missed-window", "2h",
     "--payload", "-", "--entity", "order", "--key", "42", "--header", "A: b",
     "--header=C: d", "--max-checks", "3", "--max-attempts=2", "--horizon", "2d",
     "--timeout", "5s", "--misfire-grace", "1m", "--home", "/tmp/somewhere"],
    ["n", "--exec", "--every", "1h", "--", "-x"],
    ["n", "https://e.com/"],  # neither --cron nor --every: the body's own error, both paths
]

SCHEDULE_LEFT_TO_TYPER = [
    ["--help"], ["n", "https://e.com/", "-h"], ["n"], [], ["n", "t", "extra"],
    ["n", "https://e.com/", "--cron"], ["n", "https://e.com/", "--in", "2h"],
    ["n", "https://e.com/", "--dry-run"], ["n", "https://e.com/", "--max-checks", "x"],
    ["n", "https://e.com/", "--tz", "UTC", "--tz", "UTC"], ["n", "t", "--every", "-1h"],
    ["n", "t", "--home", ""], ["--", "n", "t"],
]


@pytest.mark.parametrize("args", SCHEDULE_READ)
def test_quick_schedule_add_reads_what_typer_reads(args, monkeypatch):
    import awty.cli.schedule as schedule
    from awty.cli.quickadd import parse_schedule_add

    seen = {}

    def capture(name, target, **kw):
        seen.update(kw, name=name, target=target)

    monkeypatch.setattr(schedule, "run_schedule_add", capture)
    res = CliRunner().invoke(app, ["schedule", "add", *args])
    assert res.exit_code == 0, res.output
    quick = parse_schedule_add(args)
    assert quick is not None
    typer_read = {k: v for k, v in seen.items() if v not in (None, False)}
    assert {k: v for k, v in quick.items() if v is not None} == typer_read


@pytest.mark.parametrize("args", SCHEDULE_LEFT_TO_TYPER)
def test_anything_unsure_in_schedule_add_is_left_to_typer(args):
    from awty.cli.quickadd import parse_schedule_add

    assert parse_schedule_add(args) is None


def _typer_app(home, *args):
    """The same command through the whole Typer app, in a process of its own."""
    code = ("import sys\nfrom awty.cli import app\nsys.argv = ['awty', *sys.argv[1:]]\n"
            "app(args=sys.argv[1:], prog_name='awty')\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)


@pytest.mark.parametrize("args", [
    ["--cron", "0 25 * * *"],  # bad cron
    ["--cron", "0 9 * * *", "--tz", "Nowhere/Land"],  # unknown zone
    ["--cron", "0 9 * * *", "--tz", "UTC"],  # the duplicate name (made first, below)
    ["--every", "0"],
    ["--every", "1m"],  # finer than the slots
    ["--cron", "0 9 * * *", "--every", "1h"],
    ["--every", "1h", "--missed", "sometimes"],
    ["--cron", "0 9 30 2 *"],  # never fires
    ["--cron", "0 9 * * *", "--exec", "--call"],
    ["--cron", "0 9 * * *", "--payload", "@/nonexistent/file"],
])
@pytest.mark.slow
def test_quick_schedule_add_fails_as_the_typer_app_does(home, args):
    """Bad input on the quick path: exit 2, the one line the whole app prints, nothing
    stored, and no Typer imported; a good add prints what the app prints."""
    assert _awty(home, "init").returncode == 0
    made = _awty(home, "schedule", "add", "dup", "https://e.com/", "--cron", "0 9 * * *",
                 "--tz", "UTC")
    assert made.returncode == 0 and "TYPER False" in made.stderr, made.stderr
    name = "dup" if args == ["--cron", "0 9 * * *", "--tz", "UTC"] else "tick"
    quick = _awty(home, "schedule", "add", name, "https://e.com/", *args)
    full = _typer_app(home, "schedule", "add", name, "https://e.com/", *args)
    assert "TYPER False" in quick.stderr
    assert quick.returncode == full.returncode == 2, (quick.stderr, full.stderr)
    line = quick.stderr.splitlines()[0]
    assert line.startswith("awty: ") and full.stderr == line + "\n"
    assert quick.stdout == full.stdout == ""
    listed = _awty(home, "schedule", "list", "--json")
    assert [d["name"] for d in json.loads(listed.stdout)] == ["dup"]


@pytest.mark.slow
def test_quick_schedule_add_prints_what_the_typer_app_prints(home):
    assert _awty(home, "init").returncode == 0
    for as_json in ([], ["--json"]):
        quick = _awty(home, "schedule", "add", "q" + "".join(as_json), "https://e.com/",
                      "--cron", "0 9 * * mon-fri", "--tz", "Europe/Berlin", "--utc", *as_json)
        full = _typer_app(home, "schedule", "add", "f" + "".join(as_json), "https://e.com/",
                          "--cron", "0 9 * * mon-fri", "--tz", "Europe/Berlin", "--utc",
                          *as_json)
        assert quick.returncode == full.returncode == 0, (quick.stderr, full.stderr)
        assert "TYPER False" in quick.stderr
        assert quick.stdout.replace("q", "f") == full.stdout.replace("q", "f")
        if as_json:
            assert json.loads(quick.stdout)["rule"] == "At 09:00, Monday through Friday"
        else:
            # the rule in words is `schedule show`'s: the add shows the expression and the next
            # occurrences, without importing cron-descriptor (issue 32: within 1.2x of `add`)
            assert "WORDS False" in quick.stderr
            assert "rule    0 9 * * mon-fri\n" in quick.stdout
            assert quick.stdout.count(" UTC") == 3  # next: three occurrences (--utc)
            shown = _awty(home, "schedule", "show", "q")
            assert "At 09:00, Monday through Friday (0 9 * * mon-fri)" in shown.stdout
