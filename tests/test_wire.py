"""The wire rules, defined once (issue 14): tables for each rule, and proof that what ``add``
accepts is exactly what the sender sends, through the real CLI and a real receiver."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from helpers import db_rows, tree_files
from freezegun import freeze_time
from typer.testing import CliRunner

from awty import jobspec, wire
from awty.cli import app
from awty.clock import FixedClock
from awty.config import Settings
from awty.errors import InvalidInput
from awty.executors import pyworker
from awty.executors.http import HttpExecutor
from awty.ids import is_id
from awty.model import Answer, Attempt, Job, Kind

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
GOOD = "0123456789ABCDEFGHJKMNPQRS"


@pytest.mark.parametrize("text, ok", [
    (GOOD, True),
    ("01KB7X3Q9ZR2M4N6P8T0VWXYZA", True),
    (GOOD.lower(), False),  # lower case is not what awty writes
    (GOOD[:-1] + "I", False),  # I, L, O, U are not Crockford base32
    (GOOD[:-1] + "O", False),
    (GOOD[:-1] + "U", False),
    (GOOD + "\n", False),  # `$` would have taken this
    (GOOD + "0", False),
    (GOOD[:-1], False),
    ("", False),
])
def test_id_rule(text, ok):
    assert is_id(text) is ok
    spec = {"target": "https://example.com/", "in": "1h", "id": text}
    if ok:
        assert jobspec.build(spec, now=NOW, settings=Settings())[0].id == text
    else:
        with pytest.raises(InvalidInput, match="id"):
            jobspec.build(spec, now=NOW, settings=Settings())


@pytest.mark.parametrize("text, ok", [
    ("pkg.mod:fn", True),
    ("mod:Class.method", True),
    ("_private:_f", True),
    ("mod:fn\n", False),
    ("mod.fn", False),
    ("mod:", False),
    ("1mod:fn", False),
    ("mod:fn()", False),
    ("mod::fn", False),
    ("mod:fné", True),  # Python identifiers may be Unicode
    ("os:system; rm", False),
])
def test_python_target_pattern(text, ok):
    assert bool(wire.PY_TARGET.match(text)) is ok
    assert pyworker.TARGET is wire.PY_TARGET


@pytest.mark.parametrize("name, value, refused", [
    ("X-Tenant", "7", None),
    ("Authorization", "Bearer t0k", None),
    ("X-Tab", "a\tb", None),
    ("X-Max", "v" * wire.MAX_HEADER_VALUE, None),
    ("X-Long", "v" * (wire.MAX_HEADER_VALUE + 1), "single line"),
    ("Upgrade", "websocket", "set by awty"),
    ("Expect", "100-continue", "set by awty"),
    ("keep-alive", "timeout=5", "set by awty"),
    ("TE", "trailers", "set by awty"),
    ("Host", "evil.example", "set by awty"),
    ("webhook-anything", "x", "set by awty"),
    ("X-Awty-Check", "9", "set by awty"),
    ("Bad Name", "x", "not a valid header name"),
    ("X-A\n", "x", "not a valid header name"),
    ("", "x", "not a valid header name"),
    ("X-Ctl", "a\x01b", "single line"),
    ("X-Esc", "\x1b[31m", "single line"),
    ("X-Del", "a\x7f", "single line"),
    ("X-Crlf", "a\r\nInjected: 1", "single line"),
    (7, "x", "not a valid header name"),
    ("X-Num", 7, "single line"),
])
def test_header_rule(name, value, refused):
    got = wire.header_refusal(name, value)
    if refused is None:
        assert got is None
    else:
        assert got is not None and refused in got
    # add applies the very same rule
    spec = {"target": "https://example.com/", "in": "1h", "headers": {name: value}}
    if refused is None:
        job, _ = jobspec.build(spec, now=NOW, settings=Settings())
        assert job.headers == {name: value}
    else:
        with pytest.raises(InvalidInput, match="header"):
            jobspec.build(spec, now=NOW, settings=Settings())


@pytest.mark.parametrize("header", ["Upgrade: websocket", "Expect: 100-continue",
                                    "Keep-Alive: 5", "Proxy-Connection: keep-alive",
                                    "X-Bell: ring\x07"])
def test_add_refuses_what_the_sender_would_drop(home, header):
    runner = CliRunner()
    with freeze_time("2026-11-22T10:07:12Z"):
        runner.invoke(app, ["add", "https://example.com/keep", "--in", "1h", "--home", str(home)])
        before = (db_rows(home, "future_job"), tree_files(home))
        res = runner.invoke(app, ["add", "https://example.com/", "--in", "1h", "--header",
                                  header, "--home", str(home)])
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "header" in res.stderr
    assert (db_rows(home, "future_job"), tree_files(home)) == before


def send(job: Job):
    async def main():
        ex = HttpExecutor(Settings(), FixedClock(NOW), None)
        try:
            return await ex.run(job, Attempt(slot="203001011200", check=0, attempt=0,
                                             timeout=5.0))
        finally:
            await ex.close()

    return asyncio.run(main())


def test_every_header_add_accepts_is_sent(rx):
    """Everything jobspec accepted arrives at the receiver, byte for byte."""
    headers = {"X-Tenant": "7", "Authorization": "Bearer t0k", "X-Tab": "a\tb",
               "X-Unicode": "héllo", "x-lower": "v"}
    spec = {"target": rx.url("/h"), "in": "1h", "headers": headers}
    job, _ = jobspec.build(spec, now=NOW, settings=Settings())

    r = send(job)
    assert r.answer is Answer.DONE, r.error
    got = rx.requests("/h")[0].headers
    for name, value in headers.items():
        # sent as UTF-8 bytes; the receiver reads header bytes as latin-1
        assert got[name.lower()].encode("latin-1").decode() == value
    assert got["x-tab"] == "a\tb"


@pytest.mark.slow
def test_a_stored_reserved_header_is_not_sent(rx):
    """A row stored before add refused it: never sent (it would break the framing)."""
    job = Job(id="01JTESTJOB00000000000000001", kind=Kind.HTTP, target=rx.url("/old"),
              payload_json="null", headers={"Expect": "100-continue", "X-Ok": "1"},
              entity_name=None, entity_key=None,
              first_check_at=NOW, next_check_at=NOW)

    assert send(job).answer is Answer.DONE
    got = rx.requests("/old")[0].headers
    assert "expect" not in got and got["x-ok"] == "1"
