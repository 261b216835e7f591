"""The command line through Typer's CliRunner (exact exit codes, stdout and stderr apart),
and the installed ``awty`` script through real subprocesses."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from awty.cli import app
from awty.slots import from_iso, slot_id
from helpers import db_rows, tree_files

runner = CliRunner()
NOW = "2026-11-22T10:07:12Z"


def run(home, *args, input=None):
    with freeze_time(NOW):
        return runner.invoke(app, [*args, "--home", str(home)], input=input)


def test_add_echoes_due_and_slot(home):
    res = run(home, "add", "https://example.com/hook", "--in", "2h")
    assert res.exit_code == 0, res.stderr
    assert "2026-11-22 12:07:12 UTC" in res.stdout
    assert "slot  202611221215" in res.stdout
    assert res.stderr == ""
    assert len(db_rows(home, "future_job")) == 1


def test_add_json(home):
    res = run(home, "add", "https://example.com/hook", "--in", "2h", "--json",
              "--payload", '{"a": 1}', "--header", "X-Tenant: 7")
    doc = json.loads(res.stdout)
    assert doc["slot"] == "202611221215"
    assert doc["next_check_at"] == "2026-11-22T12:15:00Z"
    row = db_rows(home, "future_job")[0]
    assert row["id"] == doc["id"] and json.loads(row["headers"]) == {"X-Tenant": "7"}


def test_dry_run_stores_nothing(home):
    res = run(home, "add", "https://example.com/hook", "--in", "2h", "--dry-run")
    assert res.exit_code == 0 and "dry run" in res.stdout
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


@pytest.mark.parametrize("args", [
    ["add", "https://example.com/", "--at", "2020-01-01T00:00:00Z"],
    ["add", "https://example.com/", "--in", "2h", "--payload", "{nope"],
    ["add", "https://example.com/", "--in", "2h", "--payload", json.dumps({"x": "y" * 5000})],
    ["add", "ftp://example.com/", "--in", "2h"],
    ["add", "https://example.com/", "--in", "2h", "--no-such-option"],
    ["add", "https://example.com/", "--in", "2h", "--max-checks", "many"],
    ["add", "--in", "2h"],
    ["list", "--status", "weird"],
    ["run-slot", "2026-11-22"],
])
def test_bad_input_exit_2_one_line_nothing_changed(home, args):
    run(home, "add", "https://example.com/keep", "--in", "1h")
    before = (db_rows(home, "future_job"), tree_files(home))
    res = run(home, *args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("awty"), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert (db_rows(home, "future_job"), tree_files(home)) == before


def test_idempotency_via_cli(home):
    a = json.loads(run(home, "add", "https://e.com/", "--in", "2h", "--idempotency-key", "k",
                       "--json").stdout)
    b = json.loads(run(home, "add", "https://e.com/", "--in", "3h", "--idempotency-key", "k",
                       "--json").stdout)
    assert a["id"] == b["id"] and b["created"] is False
    c = run(home, "add", "https://e.com/other", "--in", "2h", "--idempotency-key", "k")
    assert c.exit_code == 1 and "different job" in c.stderr


@pytest.mark.slow
def test_list_and_show_json_match_rows(home):
    run(home, "add", "https://e.com/a", "--in", "2h", "--entity", "order", "--key", "42",
        "--payload", '{"n": 1}', "--header", "Authorization: Bearer sekrit")
    run(home, "add", "echo hi", "--exec", "--in", "3h")
    listed = json.loads(run(home, "list", "--json").stdout)
    rows = {r["id"]: r for r in db_rows(home, "future_job")}
    assert {j["id"] for j in listed} == set(rows)
    for j in listed:
        row = rows[j["id"]]
        assert j["next_check_at"] == row["next_check_at"]
        assert j["first_check_at"] == row["first_check_at"]
        assert j["kind"] == row["kind"] and j["target"] == row["target"]
        assert j["payload"] == json.loads(row["payload"])
    first = listed[0]
    shown = json.loads(run(home, "show", first["id"], "--json").stdout)
    assert shown["id"] == first["id"] and shown["state"] == "pending"
    assert shown["headers"] == {"Authorization": "***"}  # credentials never shown
    assert "sekrit" not in run(home, "show", first["id"]).stdout
    assert json.loads(run(home, "list", "--entity", "order", "--json").stdout)[0]["key"] == "42"


def test_show_unknown_is_exit_1(home):
    res = run(home, "show", "01NOSUCHJOB0000000000000000")
    assert res.exit_code == 1 and res.stderr.strip() == \
        "awty: no such job: 01NOSUCHJOB0000000000000000"


@pytest.mark.slow
def test_cancel_by_id_and_entity(home):
    a = json.loads(run(home, "add", "https://e.com/", "--in", "2h", "--json").stdout)
    run(home, "add", "https://e.com/", "--in", "2h", "--entity", "order", "--key", "1")
    res = run(home, "cancel", a["id"])
    assert res.exit_code == 0 and f"cancelled {a['id']}" in res.stdout
    res = run(home, "cancel", "--entity", "order", "--key", "1", "--json")
    assert len(json.loads(res.stdout)["cancelled"]) == 1
    assert db_rows(home, "future_job") == [] and tree_files(home) == []
    assert {h["outcome"] for h in db_rows(home, "job_history")} == {"cancelled"}
    again = run(home, "cancel", a["id"])
    assert again.exit_code == 1 and "not pending" in again.stderr


def test_batch_all_or_nothing_names_the_line(home, tmp_path):
    good = [{"target": "https://e.com/a", "in": "1h"},
            {"target": "echo hi", "kind": "exec", "in": "2h", "payload": {"x": 1}}]
    f = tmp_path / "jobs.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in good + [{"target": "https://e.com/",
                                                           "in": "never"}]) + "\n")
    res = run(home, "add", "--batch", str(f))
    assert res.exit_code == 2 and res.stderr.startswith("awty: line 3:")
    assert db_rows(home, "future_job") == []
    res = run(home, "add", "--batch", "-", "--json",
              input="\n".join(json.dumps(x) for x in good))
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 2
    assert len(db_rows(home, "future_job")) == 2 and len(tree_files(home)) == 2


def test_a_batch_refusal_names_the_line_of_the_file_past_blank_lines(home, tmp_path):
    f = tmp_path / "jobs.jsonl"
    f.write_text(json.dumps({"target": "https://e.com/", "in": "1h"}) + "\n\n  \n"
                 + json.dumps({"target": "https://e.com/", "in": "1h", "max_checks": True})
                 + "\n")
    res = run(home, "add", "--batch", str(f))
    assert res.exit_code == 2
    assert res.stderr == "awty: line 4: max_checks: True is not a whole number\n"
    assert db_rows(home, "future_job") == []


def test_a_batch_says_how_many_it_added_in_which_slots(home, tmp_path):
    specs = [{"target": "https://e.com/", "in": f"{1 + i % 2}h", "payload": {"n": i}}
             for i in range(5)]
    specs.append({**specs[0], "idempotency_key": "k"})
    specs.append(specs[-1])
    f = tmp_path / "jobs.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in specs))
    res = run(home, "add", "--batch", str(f))
    assert res.exit_code == 0, res.stderr
    slots = sorted({slot_id(from_iso(r["next_check_at"])) for r in db_rows(home, "future_job")})
    assert len(slots) == 2
    assert res.stdout == (f"added 6 job(s) in 2 slot(s) ({slots[0]} … {slots[1]}); "
                          "1 already existed\n")


@pytest.mark.parametrize("via", ["file", "stdin"])
def test_a_batch_splits_lines_on_newline_only(home, tmp_path, via):
    # Line numbers as an editor counts them: "\r\n" ends a line, a lone "\r" ends none (it
    # is JSON whitespace inside the line), where universal newlines made it a line of its own.
    bad = json.dumps({"target": "https://e.com/", "in": "1h", "max_checks": True})
    good = (json.dumps({"target": "https://e.com/", "in": "1h"}) + "\r\n"
            + '{"target": "https://e.com/",\r "in": "2h"}\n')
    f = tmp_path / "jobs.jsonl"
    for text, want in ((good + bad + "\r\n", 2), (good, 0)):
        f.write_bytes(text.encode())
        res = (run(home, "add", "--batch", str(f)) if via == "file"
               else run(home, "add", "--batch", "-", input=text.encode()))
        assert res.exit_code == want, res.stderr
        if want:
            assert res.stderr == "awty: line 3: max_checks: True is not a whole number\n"
    assert len(db_rows(home, "future_job")) == 2


KEY_WITHOUT_ENTITY = ("awty: key: given without entity (a key names one entity's instance: "
                      "--entity order --key 42)\n")


def test_key_without_entity_is_refused(home, tmp_path):
    res = run(home, "add", "https://e.com/", "--in", "1h", "--key", "42")
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", KEY_WITHOUT_ENTITY)
    # the quick path (no Typer) says the same
    p = awty_cmd(home, "add", "https://e.com/", "--in", "1h", "--key", "42")
    assert (p.returncode, p.stdout, p.stderr) == (2, "", KEY_WITHOUT_ENTITY)
    f = tmp_path / "jobs.jsonl"
    f.write_text(json.dumps({"target": "https://e.com/", "in": "1h", "entity": "order",
                             "key": "1"}) + "\n"
                 + json.dumps({"target": "https://e.com/", "in": "1h", "key": "2"}) + "\n")
    res = run(home, "add", "--batch", str(f))
    assert res.exit_code == 2
    assert res.stderr == KEY_WITHOUT_ENTITY.replace("awty: ", "awty: line 2: ")
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


@pytest.mark.parametrize("target, says", [
    ("ls -l", "target 'ls -l': not a URL; did you mean --exec?"),
    ("./backup", "target './backup': not a URL; did you mean --exec?"),
    ("myapp.checks:order_shipped",
     "target 'myapp.checks:order_shipped': not a URL; did you mean --call?"),
    ("example.com/hook", "target 'example.com/hook': not a URL; did you mean "
                         "https://example.com/hook (or --exec for a command)?"),
    ("localhost:8000/hook", "target 'localhost:8000/hook': not a URL; did you mean "
                            "http://localhost:8000/hook (or --exec for a command)?"),
])
def test_a_target_that_is_not_a_url_suggests_the_option(home, target, says):
    res = run(home, "add", target, "--in", "5m")
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", f"awty: {says}\n")
    p = awty_cmd(home, "add", target, "--in", "5m")  # the quick path says the same
    assert (p.returncode, p.stderr) == (2, f"awty: {says}\n")
    assert db_rows(home, "future_job") == []


def test_slots_and_reschedule(home):
    a = json.loads(run(home, "add", "https://e.com/", "--in", "2h", "--json").stdout)
    run(home, "add", "https://e.com/", "--in", "2h")
    slots = json.loads(run(home, "slots", "--json").stdout)
    assert slots == [{"slot": "202611221215", "at": "2026-11-22T12:15:00Z", "jobs": 2,
                      "past": False}]
    res = run(home, "reschedule", a["id"], "--in", "1d", "--json")
    assert json.loads(res.stdout)["slot"] == "202611231015"
    assert f"202611231015/{a['id']}.json" in tree_files(home)


@pytest.mark.slow
def test_every_command_has_help_and_is_in_the_command_table():
    from typer.main import get_command

    # The table of every command lives in docs/commands.md, which README links to.
    table = (Path(__file__).parent.parent / "docs" / "commands.md").read_text()
    group = get_command(app)
    names = sorted(group.commands)
    assert {"init", "add", "cancel", "reschedule", "list", "show", "slots", "run-slot",
            "catchup", "history", "retry", "stats", "doctor", "crontab", "prune", "version",
            "secret", "verify"} <= set(names)
    for name in names:
        res = runner.invoke(app, [name, "--help"])
        assert res.exit_code == 0 and "Usage" in res.stdout, name
        assert f"| `{name}" in table, f"{name} is missing from docs/commands.md's table"
    assert runner.invoke(app, ["secret", "new", "--help"]).exit_code == 0


# --- the real entry point --------------------------------------------------------------------
def awty_cmd(home, *args, env_extra=None, input=None):
    env = {**os.environ, "AWTY_HOME": str(home), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "awty", *args], capture_output=True,
                          text=True, env=env, input=input, timeout=60)


@pytest.mark.slow
def test_subprocess_add_and_list(home):
    p = awty_cmd(home, "add", "https://e.com/", "--in", "2h", "--json",
                 env_extra={"AWTY_NOW": NOW})
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["slot"] == "202611221215"
    p = awty_cmd(home, "list", "--json")
    assert [j["id"] for j in json.loads(p.stdout)] == [doc["id"]]
    p = awty_cmd(home, "add", "https://e.com/", "--in", "2h", "--oops")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_console_script_installed(home):
    exe = Path(sys.executable).parent / "awty"
    p = subprocess.run([str(exe), "version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("awty ")


def test_add_does_not_import_runner_only_modules(home):
    # The first call creates the schema (sqlite-utils' migrations); every later one must not
    # load it, nor what only the runner needs.
    assert awty_cmd(home, "init").returncode == 0
    code = ("import sys, runpy\nsys.argv=['awty','add','https://e.com/','--in','2h']\n"
            "try:\n    runpy.run_module('awty', run_name='__main__')\nexcept SystemExit:\n"
            "    pass\nheavy=[m for m in ('requests','httptools','uvloop','asyncio','rich',"
            "'rich.progress','sqlite_utils','filelock','awty.run.runner','awty.executors.http',"
            "'cronsim','cron_descriptor','starlette','uvicorn','jinja2','prometheus_client',"
            "'awty.serve','awty.tokens','typing')"
            " if m in sys.modules]\nprint('HEAVY', heavy, file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "AWTY_HOME": str(home)}, timeout=60)
    assert "HEAVY []" in p.stderr, p.stderr
