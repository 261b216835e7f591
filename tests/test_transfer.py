"""`awty export` / `awty import`: a home moved SQLite -> PostgreSQL -> SQLite through the
command line (a real SQLite file, a real PostgreSQL schema), every line the same at each step
and the counts printed; a file cut short, a store not empty, a file that is not an export."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from awty.cli import app

# every test moves a home through whole CLI commands on both stores: 1.5-4 s each (issue 31)
pytestmark = pytest.mark.slow

runner = CliRunner()
T_ADD, T_RUN = "2026-11-22T10:07:12Z", "2026-11-22T10:15:05Z"


def awty(monkeypatch, *args, now=T_ADD):
    monkeypatch.setenv("AWTY_NOW", now)
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (args, res.stdout, res.stderr)
    return res


@pytest.fixture
def worked_home(tmp_path, monkeypatch, rx):
    """A SQLite home with pending jobs (one idempotent) and history (done, failed, cancelled)."""
    home = str(tmp_path / "sqlite-home")
    rx.script("/fail", status=500)
    for path, extra in (("/ok", []), ("/fail", ["--max-attempts", "1"]),
                        ("/later", ["--idempotency-key", "order-42"])):
        when = "2h" if path == "/later" else "5m"
        awty(monkeypatch, "add", rx.url(path), "--in", when, "--home", home, "--entity", "o",
             "--key", path, *extra)
    gone = json.loads(awty(monkeypatch, "add", rx.url("/x"), "--in", "5m", "--json",
                           "--home", home).stdout)["id"]
    awty(monkeypatch, "cancel", gone, "--home", home)
    awty(monkeypatch, "run-slot", "202611221015", "--home", home, now=T_RUN)
    return home


def lines(path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_sqlite_to_postgresql_and_back(worked_home, backend, tmp_path, monkeypatch, rx):
    first = tmp_path / "from-sqlite.jsonl"
    res = awty(monkeypatch, "export", "--output", str(first), "--home", worked_home)
    assert "exported 1 pending job(s) and 3 history row(s)" in res.stderr
    pg = ["--home", str(tmp_path / "pg-home"), *backend.args]
    awty(monkeypatch, "init", *pg)
    res = awty(monkeypatch, "import", str(first), *pg)
    assert "imported 1 pending job(s) and 3 history row(s) into PostgreSQL" in res.stdout
    second = tmp_path / "from-pg.jsonl"
    awty(monkeypatch, "export", "-o", str(second), *pg)
    assert lines(second) == lines(first)
    # the moved home works: idempotency finds the pending job, retry re-arms the failed one
    again = json.loads(awty(monkeypatch, "add", rx.url("/later"), "--in", "2h",
                            "--idempotency-key", "order-42", "--entity", "o", "--key",
                            "/later", "--json", *pg).stdout)
    failed = [h for h in json.loads(awty(monkeypatch, "history", "--json", *pg).stdout)
              if h["outcome"] == "failed"]
    assert len(failed) == 1
    pending = [j["id"] for j in json.loads(awty(monkeypatch, "list", "--json", *pg).stdout)]
    assert pending == [again["id"]]  # the key named the imported job: nothing added
    awty(monkeypatch, "retry", failed[0]["id"], *pg, now=T_RUN)
    # and back to a new SQLite home
    back = ["--home", str(tmp_path / "sqlite-again")]
    res = awty(monkeypatch, "import", str(second), "--json", *back)
    assert json.loads(res.stdout)["jobs"] == 1 and json.loads(res.stdout)["history"] == 3
    third = tmp_path / "back.jsonl"
    awty(monkeypatch, "export", "-o", str(third), *back)
    assert lines(third) == lines(first)
    assert len(list((tmp_path / "sqlite-again" / "slots").rglob("*.json"))) == 1  # envelope


def test_import_refuses_a_store_that_is_not_empty(worked_home, tmp_path, monkeypatch):
    dump = tmp_path / "e.jsonl"
    awty(monkeypatch, "export", "-o", str(dump), "--home", worked_home)
    res = runner.invoke(app, ["import", str(dump), "--home", worked_home])
    assert res.exit_code == 2 and "needs an empty store" in res.stderr


@pytest.mark.parametrize("cut", ["end", "job", "header"])
def test_a_damaged_export_changes_nothing(worked_home, tmp_path, monkeypatch, cut):
    dump = tmp_path / "e.jsonl"
    awty(monkeypatch, "export", "-o", str(dump), "--home", worked_home)
    text = lines(dump)
    broken = {"end": text[:-1], "job": text[:1] + text[2:], "header": text[1:]}[cut]
    dump.write_text("\n".join(broken) + "\n")
    target = ["--home", str(tmp_path / "new")]
    res = runner.invoke(app, ["import", str(dump), *target])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert json.loads(awty(monkeypatch, "list", "--json", *target).stdout) == []
    assert json.loads(awty(monkeypatch, "history", "--json", *target).stdout) == []


def test_export_never_writes_over_a_file(worked_home, tmp_path):
    there = tmp_path / "there.jsonl"
    there.write_text("keep")
    res = runner.invoke(app, ["export", "-o", str(there), "--home", worked_home])
    assert res.exit_code == 2 and there.read_text() == "keep"


# --- recurring schedules move with their home ------------------------------------------------
@pytest.fixture
def scheduled_home(tmp_path, monkeypatch, rx):
    """A SQLite home with a live schedule (one occurrence fired, the next pending) and a
    paused one."""
    home = str(tmp_path / "sched-home")
    awty(monkeypatch, "schedule", "add", "tick", rx.url("/tick"), "--cron", "*/15 * * * *",
         "--tz", "UTC", "--payload", '{"n": 1}', "--home", home)
    awty(monkeypatch, "schedule", "add", "daily", rx.url("/daily"), "--every", "1d",
         "--missed", "all", "--missed-window", "3d", "--home", home)
    awty(monkeypatch, "schedule", "pause", "daily", "--home", home)
    awty(monkeypatch, "run-slot", "202611221015", "--home", home, now=T_RUN)
    assert [r.headers["x-awty-occurrence"] for r in rx.requests("/tick")] == [
        "2026-11-22T10:15:00Z"]
    return home


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_schedules_move_to_postgresql_and_back_and_go_on(scheduled_home, backend, tmp_path,
                                                          monkeypatch, rx):
    first = tmp_path / "from-sqlite.jsonl"
    res = awty(monkeypatch, "export", "-o", str(first), "--home", scheduled_home, now=T_RUN)
    assert "exported 1 pending job(s), 2 schedule(s) and 2 history row(s)" in res.stderr
    assert [json.loads(x)["schedule"]["name"] for x in lines(first)[1:3]] == ["daily", "tick"]
    pg = ["--home", str(tmp_path / "pg-home"), *backend.args]
    awty(monkeypatch, "init", *pg)
    res = awty(monkeypatch, "import", str(first), "--json", *pg, now=T_RUN)
    assert json.loads(res.stdout)["schedules"] == 2
    second = tmp_path / "from-pg.jsonl"
    awty(monkeypatch, "export", "-o", str(second), *pg, now=T_RUN)
    assert lines(second) == lines(first)
    listed = {s["name"]: s for s in json.loads(
        awty(monkeypatch, "schedule", "list", "--json", *pg, now=T_RUN).stdout)}
    assert listed["daily"]["paused"] and not listed["tick"]["paused"]
    # the moved schedule goes on: its pending occurrence fires and makes the next, once
    awty(monkeypatch, "run-slot", "202611221030", *pg, now="2026-11-22T10:30:05Z")
    assert [r.headers["x-awty-occurrence"] for r in rx.requests("/tick")] == [
        "2026-11-22T10:15:00Z", "2026-11-22T10:30:00Z"]
    nxt = json.loads(awty(monkeypatch, "schedule", "next", "tick", "-n", "1", "--json", *pg,
                          now="2026-11-22T10:30:05Z").stdout)
    assert nxt[0]["occurrence"] == "2026-11-22T10:45:00Z", nxt
    back = ["--home", str(tmp_path / "sqlite-again")]
    awty(monkeypatch, "import", str(second), *back, now=T_RUN)
    third = tmp_path / "back.jsonl"
    awty(monkeypatch, "export", "-o", str(third), *back, now=T_RUN)
    assert lines(third) == lines(first)


@pytest.mark.parametrize("change, allow, line", [
    ({"cron": "61 * * * *"}, False, "line 3: cron:"),
    ({"zone": "Mars/Olympus"}, False, "line 3: tz:"),
    ({"missed": "sometimes"}, False, "line 3: missed:"),
    ({"name": "no spaces"}, False, "line 3: name:"),
    ({"template": {"kind": "exec", "target": "rm -rf ~"}}, False, "line 3: template: kind:"),
])
def test_a_bad_schedule_line_imports_nothing(scheduled_home, tmp_path, monkeypatch, change,
                                             allow, line):
    dump = tmp_path / "e.jsonl"
    awty(monkeypatch, "export", "-o", str(dump), "--home", scheduled_home, now=T_RUN)
    text = lines(dump)
    doc = json.loads(text[2])
    if "template" in change:
        doc["schedule"]["template"].update(change["template"])
    else:
        doc["schedule"].update(change)
    text[2] = json.dumps(doc)
    dump.write_text("\n".join(text) + "\n")
    target = ["--home", str(tmp_path / "new")]
    res = runner.invoke(app, ["import", str(dump), *target])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"awty: {line}"), res.stderr
    assert json.loads(awty(monkeypatch, "schedule", "list", "--json", *target).stdout) == []
    assert json.loads(awty(monkeypatch, "list", "--json", *target).stdout) == []


def test_two_jobs_of_one_occurrence_import_nothing(scheduled_home, tmp_path, monkeypatch):
    """One job per occurrence: a file giving an occurrence two jobs (edited, or joined from
    two exports) is refused naming both lines, not left to the store's key."""
    dump = tmp_path / "e.jsonl"
    awty(monkeypatch, "export", "-o", str(dump), "--home", scheduled_home, now=T_RUN)
    text = lines(dump)
    (at,) = [i for i, x in enumerate(text) if '"job"' in x[:8]]
    twin = json.loads(text[at])
    twin["job"]["id"] = twin["job"]["id"][:-4] + "ZZZZ"
    text.insert(at + 1, json.dumps(twin))
    end = json.loads(text[-1])
    end["end"]["jobs"] += 1
    text[-1] = json.dumps(end)
    dump.write_text("\n".join(text) + "\n")
    target = ["--home", str(tmp_path / "new")]
    res = runner.invoke(app, ["import", str(dump), *target])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"awty: line {at + 2}: the 2026-11-22T10:30:00Z occurrence "
                                 f"of schedule tick has a job already (line {at + 1})"), res.stderr
    assert json.loads(awty(monkeypatch, "schedule", "list", "--json", *target).stdout) == []
