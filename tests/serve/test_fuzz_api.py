"""A property-based fuzzer against a real ``awty serve`` on 127.0.0.1: schemathesis's own runner
(``st run``, a real process) reads ``/v1/openapi.json`` from the live server and, with a
read+write token, tries every operation: its coverage phase (each parameter and field missing,
of the wrong type, at its edges), fuzzing (requests drawn from the document, valid ones and ones
that break it), and stateful sequences following the links it infers (a schedule added, then
read, paused, run, removed). No answer may be a 5xx, and every answer must be what the document
says: a documented status, its content type, a body valid against its schema.

The document's patterns, enums and bounds (ids, names, durations, times, kinds, limits, max
lengths) make most of the requests it calls valid get past the server's parsing: of the
positive fuzzing's requests, ~4 % answer 400 (73 % before they were written, issue 33), and
the rest reach the store, the rules and the token checks (201, 404, 409, 403 for exec kinds:
this token has no jobs:exec, so the fuzzer never runs a command). Bounded by examples:
``--max-examples 5`` an operation (~1,130 requests, ~35 s a store on a loaded 2-core machine;
its ``--max-time`` is not used, as it makes fuzzing repeat until the time is spent), and a
timeout on the process; ``AWTY_FULL=1`` draws 100 an operation. One worker:
schemathesis's threaded workers share Hypothesis's lambda-source cache, and on Python 3.11 two
of them parsing at once fail now and then with "AST constructor recursion depth mismatch", an
error in the fuzzer, not in awty."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.util import find_spec

import pytest

if find_spec("schemathesis") is None:  # found, not imported: collection stays light
    pytest.skip("pip install 'awty[test]'", allow_module_level=True)

FULL = bool(os.environ.get("AWTY_FULL"))
TIMEOUT = 1800 if FULL else 240  # seconds: a run past it is a hang, not a slow machine
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance")


@pytest.mark.slow  # ~40 s a store, serve's start included
def test_no_5xx_and_every_answer_as_documented(served, tmp_path):
    cmd = [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; "
           "sys.exit(schemathesis())", "run", f"{served.url}/v1/openapi.json",
           "-H", f"Authorization: Bearer {served.token}", "--checks", CHECKS,
           "--max-examples", "100" if FULL else "5",
           "--workers", "1", "--request-timeout", "30", "--no-color"]
    # its cwd: where Hypothesis and schemathesis keep their files
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                         timeout=TIMEOUT, env={**os.environ, "NO_COLOR": "1"})
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-20000:]
    # every operation of the document was tried, by each phase
    doc = served.check.doc
    operations = sum(len(methods) for methods in doc["paths"].values())
    assert re.search(rf"^\s*Tested: {operations}$", out, re.M), out
    for phase in ("Coverage", "Fuzzing", "Stateful"):  # each ran and passed (not skipped)
        assert re.search(rf"^\s*\u2705\s+{phase}$", out, re.M), (phase, out)
    cases = re.search(r"^\s*(\d+) generated, (\d+) passed", out, re.M)
    assert cases and int(cases.group(1)) >= operations * 3 and cases.group(1) == cases.group(2), \
        out
