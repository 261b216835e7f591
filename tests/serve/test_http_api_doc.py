"""docs/http-api.md's curl and Node examples, run as written against one real ``awty serve``
(the ``served`` fixture, SQLite and PostgreSQL) in the order a reader meets them:
tests/test_examples.py runs its ``awty …`` lines, this its ``curl`` blocks (bash) and its ``js``
block (node, whose fetch is built in from Node 18). Rewritten only where the example points:
``localhost:8421`` and ``127.0.0.1:8421`` become the test server, ``$AWTY_TOKEN`` is the
fixture's token. Each answer must be a success and JSON."""

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


def blocks() -> list[tuple[str, str]]:
    """The curl and js blocks, in the document's order."""
    found = re.findall(r"^```(sh|js)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    return [(lang, b) for lang, b in found if lang == "js" or b.lstrip().startswith("curl ")]


def test_the_doc_has_curl_and_node_examples():
    found = blocks()
    assert [lang for lang, _ in found].count("js") == 1, found
    assert len(found) >= 3 and any("/v1/schedules" in b for _, b in found), found


def run_curl(block: str, host: str, token: str) -> list[tuple[str, str]]:
    script = CURL + block.replace("localhost:8421", host)
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "AWTY_TOKEN": token})
    assert res.returncode == 0, (block, res.stdout, res.stderr)
    lines = res.stdout.splitlines()
    # body, status, body, status…: a body is one line of JSON
    answers = list(zip(lines[1::2], lines[::2]))
    assert len(answers) == block.count("curl "), (block, res.stdout)
    return answers


def run_node(block: str, host: str, token: str, tmp: Path) -> list[tuple[str, str]]:
    script = tmp / "example.mjs"  # a module: the example awaits at its top level
    script.write_text(block.replace("127.0.0.1:8421", host)
                      + "\nconsole.log(res.status);\nconsole.log(JSON.stringify(job));\n")
    res = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "AWTY_TOKEN": token})
    assert res.returncode == 0, (block, res.stdout, res.stderr)
    status, body = res.stdout.splitlines()[-2:]
    return [(status, body)]


NODE = shutil.which("node") or shutil.which("nodejs")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None or NODE is None,
                    reason="curl or node not installed")
def test_every_example_answers_as_documented(served, tmp_path):
    host = served.url.removeprefix("http://")
    for lang, block in blocks():
        answers = (run_curl(block, host, served.token) if lang == "sh" else
                   run_node(block, host, served.token, tmp_path))
        for status, body in answers:
            assert status.startswith("2"), (block, status, body)
            json.loads(body)
