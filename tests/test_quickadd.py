"""``awty add`` without Typer (issue 12, item 4): the quick path reads exactly what the Typer
command reads, hands everything else to the Typer app, and never imports typer."""

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
            "print('TYPER', 'typer' in sys.modules, file=sys.stderr)\nsys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)


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
