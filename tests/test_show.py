"""``show`` reads like ``add`` and ``list``: their words (due, slot, checks, attempts), their
time format (local time, or UTC with --utc), one status line, values in one column; and
``catchup --dry-run`` / ``run-slot --dry-run`` print sentences, not JSON (``--json`` is JSON)."""

import json
import re
import time
from datetime import timedelta

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from helpers import T0

runner = CliRunner()


@pytest.fixture(autouse=True)
def berlin(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def cli(home, *args, at=T0):
    with freeze_time(at):
        res = runner.invoke(app, [*args, "--home", str(home)])
    assert res.exit_code == 0, res.stderr
    return res.stdout


def block(text):
    """The key-value lines before the first blank line or table."""
    rows = []
    for line in text.splitlines():
        if not line or line.startswith(("at ", "output of")):
            break
        rows.append(line)
    return rows


def test_a_pending_job_in_the_words_and_times_of_add(home):
    doc = json.loads(cli(home, "add", "https://e.com/a", "--in", "2h", "--entity", "order",
                         "--key", "42", "--payload", '{"n": 1}', "--json"))
    assert cli(home, "show", doc["id"]) == (
        f"id        {doc['id']}\n"
        "status    pending\n"
        "kind      http\n"
        "target    https://e.com/a\n"
        "entity    order/42\n"
        "due       2026-11-22 13:07:12 CET\n"
        "slot      202611221215  fires 2026-11-22 13:15:00 CET\n"
        "checks    0\n"
        "attempts  0\n"
        "payload   {\"n\": 1}\n"
        "added     2026-11-22 11:07:12 CET\n")
    utc = cli(home, "show", doc["id"], "--utc")
    assert "due       2026-11-22 12:07:12 UTC\n" in utc
    assert "slot      202611221215  fires 2026-11-22 12:15:00 UTC\n" in utc


def test_an_ended_job_one_status_line_aligned_local_times(home, rx):
    rx.script("/gone", status=404)
    with Awty(home, env={"AWTY_NOW": T0.isoformat()}) as a:
        job = a.add(rx.url("/gone"), in_="1m").job
    after = job.next_check_at + timedelta(seconds=3)
    with Awty(home, env={"AWTY_NOW": after.isoformat()}) as a:
        assert a.run_slot().outcomes == {"failed": 1}
    text = cli(home, "show", job.id, at=after)
    rows = block(text)
    labels = [r.split()[0] for r in rows]
    assert labels == ["id", "status", "kind", "target", "due", "ended", "checks", "attempts",
                      "payload", "added"]
    assert len({len(r) - len(r[len(r.split()[0]):].lstrip()) for r in rows}) == 1  # one column
    assert rows[1] == "status    failed: http 404"
    assert rows[5].startswith("ended     2026-11-22 11:15:03 CET")
    # the executions table: list's time format, local
    table = text.splitlines()[len(rows):]
    assert table[0].split() == ["at", "slot", "check", "attempt", "answer", "status", "ms",
                                "runner", "error"]
    assert table[1].startswith("2026-11-22 11:15:03 CET  202611221015")
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text)  # no ISO timestamps in text
    doc = json.loads(cli(home, "show", job.id, "--json", at=after))  # --json stays as it was
    assert doc["state"] == "ended" and doc["outcome"] == "failed"


def add_past(home):
    with Awty(home, env={"AWTY_NOW": T0.isoformat()}) as a:
        for minutes in (10, 25):
            a.add("https://example.com/hook", in_=f"{minutes}m")
    return T0 + timedelta(hours=3)


def test_catchup_dry_run_prints_sentences(home):
    later = add_past(home)
    assert cli(home, "catchup", "--dry-run", at=later) == (
        "slot 202611221030: 1 would fire\n"
        "slot 202611221045: 1 would fire\n"
        "2 slot(s), 2 job(s): 2 would fire\n")
    assert cli(home, "catchup", "--dry-run", "--misfire", "skip", at=later) == (
        "slot 202611221030: 1 would end expired (misfired)\n"
        "slot 202611221045: 1 would end expired (misfired)\n"
        "2 slot(s), 2 job(s): 2 would end expired (misfired)\n")
    doc = json.loads(cli(home, "catchup", "--dry-run", "--json", at=later))
    assert doc["ran"] == 2 and doc["slots"][0]["outcomes"] == {"would_fire": 1}


def test_run_slot_dry_run_prints_a_sentence(home):
    add_past(home)
    boundary = T0.replace(minute=30, second=5)
    assert cli(home, "run-slot", "--dry-run", at=boundary) == "slot 202611221030: 1 would fire\n"
    assert cli(home, "run-slot", "202611221000", "--dry-run", at=boundary) == \
        "slot 202611221000: nothing to fire\n"
