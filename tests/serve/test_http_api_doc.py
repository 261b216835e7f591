"""docs/http-api.md's curl examples, run as written against a real ``awty serve`` (the
``served`` fixture, SQLite and PostgreSQL): tests/test_examples.py runs its ``awty …`` lines,
this its ``curl`` blocks, in the order a reader meets them. Rewritten only where the example
points: ``localhost:8421`` becomes the test server, ``$AWTY_TOKEN`` the fixture's token. Each
answer must be a success and JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
# each curl in a block prints its body then its status on a line of its own, and a block stops
# at the first failure
CURL = r"""curl() { command curl -sS -w '\n%{http_code}\n' "$@"; }
set -euo pipefail
"""


def curl_blocks() -> list[str]:
    blocks = re.findall(r"^```sh\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    return [b for b in blocks if b.lstrip().startswith("curl ")]


def test_the_doc_has_curl_examples():
    blocks = curl_blocks()
    assert len(blocks) >= 2 and any("/v1/schedules" in b for b in blocks), blocks


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_every_curl_example_answers_as_documented(served):
    host = served.url.removeprefix("http://")
    for block in curl_blocks():
        script = CURL + block.replace("localhost:8421", host)
        res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "AWTY_TOKEN": served.token})
        assert res.returncode == 0, (block, res.stdout, res.stderr)
        lines = res.stdout.splitlines()
        # body, status, body, status…: a body is one line of JSON
        answers = list(zip(lines[::2], lines[1::2]))
        assert len(answers) == block.count("curl "), (block, res.stdout)
        for body, status in answers:
            assert status.startswith("2"), (block, status, body)
            json.loads(body)
