"""A reader that closes the pipe early (``awty add … | head -1``): the real ``awty`` script
with its stdout a pipe whose read end is already closed, so every write meets EPIPE. The
command still does its work, keeps its exit code, and prints no traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# real `awty` processes, one or several a test: 1-2 s each (issue 31)
pytestmark = pytest.mark.slow

AWTY = str(Path(sys.executable).parent / "awty")


def closed_pipe_run(home, *args):
    """Run ``awty ARGS`` with stdout a pipe nobody reads (closed before the command starts)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run([AWTY, *args], stdout=write_end, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)
    finally:
        os.close(write_end)
    return p


def listed(home):
    p = subprocess.run([AWTY, "list", "--json"], capture_output=True, text=True,
                       env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)
    return json.loads(p.stdout)


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_add_into_a_closed_pipe_stores_the_job_and_exits_0(home, extra):
    p = closed_pipe_run(home, "add", "https://example.com/hook", "--in", "5m", *extra)
    assert (p.returncode, p.stderr) == (0, "")
    assert len(listed(home)) == 1


def test_every_command_ends_quietly_typer_path_too(home):
    # `list` goes through the Typer app, `add --batch` writes one line per job
    batch = home.parent / "jobs.jsonl"
    batch.write_text("".join(json.dumps({"target": "https://example.com/h", "in": "5m"}) + "\n"
                             for _ in range(500)))
    p = closed_pipe_run(home, "add", "--batch", str(batch))
    assert (p.returncode, p.stderr) == (0, "")
    p = closed_pipe_run(home, "list", "--all")
    assert (p.returncode, p.stderr) == (0, "")
    assert len(listed(home)) == 500


def test_a_failing_command_keeps_its_exit_code_and_message(home):
    job = json.loads(subprocess.run(
        [AWTY, "add", "https://example.com/hook", "--in", "5m", "--json"], capture_output=True,
        text=True, env={**os.environ, "AWTY_HOME": str(home)}, timeout=60).stdout)["id"]
    # one id cancelled (a line on the closed stdout), one unknown (exit 1, a line on stderr)
    p = closed_pipe_run(home, "cancel", job, "01JD00000000000000000000ZZ")
    assert p.returncode == 1
    assert p.stderr == ("awty: not pending (unknown or already ended): "
                        "01JD00000000000000000000ZZ\n")
    assert listed(home) == []
