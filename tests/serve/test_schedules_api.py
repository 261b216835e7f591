"""/v1/schedules against a real `awty serve` on 127.0.0.1, on SQLite and PostgreSQL; every
answer is held to /v1/openapi.json (``served``'s check)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

import servekit

from awty.slots import iso, parse_slot_id

HOOK = "http://127.0.0.1:9/hook"


def add(s, name, **fields):
    return s.call("POST", "/v1/schedules", {"name": name, "target": HOOK, "every": "1h",
                                            **fields})


def cli(s, *args, **env):
    return servekit.awty(s.home, *args, env={**s.env, **env})


@pytest.mark.slow
def test_add_show_list_pause_resume_remove(served):
    made = add(served, "digest", cron="0 9 * * mon-fri", tz="Europe/Berlin",
               payload={"n": 1}, entity="report", missed="skip", every=None)
    assert made.status == 201, made.body
    assert made.headers["location"] == "/v1/schedules/digest"
    doc = made.body
    assert (doc["cron"], doc["zone"], doc["missed"], doc["pending"], doc["paused"]) == (
        "0 9 * * mon-fri", "Europe/Berlin", "skip", 1, False)
    assert len(doc["next_occurrences"]) == 3 and doc["next_occurrences"][0] == doc["next"]
    # the same document `awty schedule show --json` prints
    shown = cli(served, "schedule", "show", "digest", "--json")
    assert json.loads(shown.stdout) == served.call("GET", "/v1/schedules/digest").body
    five = served.call("GET", "/v1/schedules/digest?n=5").body["next_occurrences"]
    assert len(five) == 5 and five == sorted(five) and five[:3] == doc["next_occurrences"]
    assert served.call("GET", "/v1/schedules/digest?n=0").body["field"] == "n"
    # found by test_fuzz_api: '²' passes str.isdigit() and int() refused it (a 500)
    assert served.call("GET", "/v1/schedules/digest?n=%C2%B2").body["field"] == "n"
    assert served.call("GET", "/v1/schedules?limit=%C2%B2").body["field"] == "limit"
    # its one pending occurrence is a job, listed as any other
    (job,) = served.call("GET", "/v1/jobs?entity=report").body["jobs"]
    assert job["first_check_at"] == doc["next"]

    paused = served.call("POST", "/v1/schedules/digest/pause")
    assert paused.status == 200 and (paused.body["paused"], paused.body["pending"]) == (True, 0)
    assert served.call("GET", "/v1/jobs?entity=report").body["jobs"] == []
    resumed = served.call("POST", "/v1/schedules/digest/resume").body
    assert (resumed["paused"], resumed["pending"]) == (False, 1)

    (job,) = served.call("GET", "/v1/jobs?entity=report").body["jobs"]
    gone = served.call("DELETE", "/v1/schedules/digest")
    assert gone.status == 200 and gone.body == {"removed": "digest", "cancelled": [job["id"]]}
    for method, path in [("GET", "/v1/schedules/digest"), ("DELETE", "/v1/schedules/digest"),
                         ("POST", "/v1/schedules/digest/pause"),
                         ("POST", "/v1/schedules/digest/run")]:
        missing = served.call(method, path)
        assert missing.status == 404 and missing.body["detail"] == "no such schedule: digest"
    assert served.call("GET", "/v1/schedules/no%20such").body["field"] == "name"


@pytest.mark.slow
def test_list_pages_by_name(served):
    for name in ("c-3", "a-1", "b-2", "B-0"):
        assert add(served, name).status == 201
    seen = [s["name"] for s in served.walk("/v1/schedules?limit=3", "schedules", 3)]
    assert seen == ["B-0", "a-1", "b-2", "c-3"]  # code point order on both stores
    listed = cli(served, "schedule", "list", "--json")
    assert json.loads(listed.stdout) == served.call("GET", "/v1/schedules").body["schedules"]
    assert [s["name"] for s in served.call("GET", "/v1/schedules?after=a-1").body[
        "schedules"]] == ["b-2", "c-3"]
    assert served.call("GET", "/v1/schedules?limit=1001").body["field"] == "limit"


@pytest.mark.slow
def test_a_start_long_past_sets_the_phase_and_the_schedules_still_read(served):
    # the fuzzer's find: a start in year 272 was kept as '272-05-04T…' on SQLite (glibc's %Y
    # does not pad), and every later read of the schedules answered 500
    made = served.call("POST", "/v1/schedules", {
        "name": "old-phase", "target": "https://example.com/tick", "every": "2h",
        "start": "0272-05-04T15:18:31Z", "tz": "UTC"})
    assert made.status == 201, made.body
    assert made.body["next_occurrences"][0][14:19] == "18:31"  # the phase kept
    assert served.call("GET", "/v1/schedules").body["schedules"][0]["name"] == "old-phase"
    assert served.call("GET", "/v1/schedules/old-phase").status == 200
    listed = cli(served, "schedule", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["name"] == "old-phase"


@pytest.mark.slow
def test_bad_input_is_the_cli_line_and_nothing_is_stored(served):
    cases = [
        ({"cron": "61 * * * *", "every": None}, "cron"),
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"every": "0"}, "every"),
        ({"every": "1h", "cron": "@daily"}, None),
        ({"missed": "sometimes"}, "missed"),
        ({"target": "http://169.254.169.254/latest"}, "target"),
        ({"missed": "all", "missed_window": "soon"}, "missed_window"),
    ]
    for fields, field in cases:
        bad = add(served, "x", **fields)
        assert bad.status == 400 and bad.body.get("field") == field, (fields, bad.body)
        # the one line `awty schedule add` prints for the same input, exit 2
        args = ["schedule", "add", "x", fields.get("target", HOOK)]
        for k in ("cron", "every", "tz", "missed", "missed_window"):
            v = fields.get(k, "1h" if k == "every" else None)
            if v is not None:
                args += [f"--{k.replace('_', '-')}", v]
        res = cli(served, *args)
        assert res.returncode == 2 and bad.body["detail"] in res.stderr, (res.stderr, bad.body)
    assert add(served, "x").status == 201
    # a name in use: the CLI's bad input (exit 2), over HTTP a conflict with the stored one
    dup = add(served, "x")
    assert (dup.status, dup.body["field"]) == (409, "name"), dup.body
    res = cli(served, "schedule", "add", "x", HOOK, "--every", "1h")
    assert res.returncode == 2 and dup.body["detail"] in res.stderr, res.stderr
    shapes = [
        (b"[1]", None), (b'{"target": "x"}', "name"), (b'{"name": 5, "target": "x"}', "name"),
        (b'{"name": "y", "target": "x", "every": true}', "every"),
        (b'{"name": "y", "target": "x", "every": "1h", "in": "2h"}', "in"),
        (b'{"name": "y", "target": "x", "every": "1h", "cwd": "/"}', "cwd"),
        (b'{"name": "y", "target": "x", "every": "1h", "bogus": 1}', None),
        (b'{"name": "y", "target": "http://127.0.0.1:9/", "every": "1h", "max_attempts": 0}',
         "max_attempts"),
    ]
    for raw, field in shapes:
        bad = served.call("POST", "/v1/schedules", raw=raw)
        assert bad.status == 400 and bad.body.get("field") == field, (raw, bad.body)
    assert [s["name"] for s in served.call("GET", "/v1/schedules").body["schedules"]] == ["x"]


@pytest.mark.slow
def test_scopes_callback_prefixes_and_exec_like_jobs(served, tmp_path):
    env, home = served.env, served.home
    reader = servekit.awty(home, "token", "new", "reader", "--scope", "jobs:read",
                           env=env).stdout.strip()
    assert served.call("GET", "/v1/schedules", token=reader).status == 200
    for method, path in [("POST", "/v1/schedules"), ("POST", "/v1/schedules/x/pause"),
                         ("POST", "/v1/schedules/x/run"), ("DELETE", "/v1/schedules/x")]:
        denied = served.call(method, path, {"name": "x", "target": HOOK, "every": "1h"},
                             token=reader)
        assert denied.status == 403 and "jobs:write" in denied.body["detail"]
    assert served.call("GET", "/v1/schedules", token=None).status == 401
    no_exec = add(served, "sh", target="true", kind="exec")
    assert no_exec.status == 403 and no_exec.body["field"] == "kind"
    limited = servekit.awty(home, "token", "new", "billing", "--scope", "jobs:write",
                            "--allow-callbacks", "http://127.0.0.1:9/billing/",
                            env=env).stdout.strip()
    other = served.call("POST", "/v1/schedules", {"name": "b", "target": HOOK, "every": "1h"},
                        token=limited)
    assert other.status == 403 and other.body["field"] == "target"
    assert served.call("POST", "/v1/schedules", {
        "name": "b", "target": "http://127.0.0.1:9/billing/x", "every": "1h"},
                       token=limited).status == 201
    # an exec schedule runs where its token says, with the token's environment only
    exec_dir = tmp_path / "jobs"
    exec_dir.mkdir()
    ops = servekit.awty(home, "token", "new", "ops", "--scope", "jobs:write,jobs:exec",
                        "--exec-dir", str(exec_dir), "--exec-env", "PATH=/usr/bin:/bin",
                        "--exec-env", "GREETING=hi", env=env).stdout.strip()
    out = exec_dir / "out.txt"
    made = served.call("POST", "/v1/schedules", {
        "name": "sh", "target": f"pwd > {out}; env | sort >> {out}", "kind": "exec",
        "every": "1h"}, token=ops)
    assert made.status == 201, made.body
    ran = served.call("POST", "/v1/schedules/sh/run", token=ops)
    assert ran.status == 200 and ran.body["ran"] == 1, ran.body
    lines = out.read_text().splitlines()
    assert lines[0] == str(exec_dir)
    assert "GREETING=hi" in lines and "AWTY_SCHEDULE=sh" in lines
    assert not any(ln.startswith("AWTY_DATABASE_URL=") for ln in lines)


@pytest.mark.slow
def test_an_occurrence_added_over_http_is_fired_by_run_slot(served, rx):
    made = add(served, "tick", target=rx.url("/tick"), payload={"n": 1})
    assert made.status == 201, made.body
    first = made.body["next"]
    (job,) = served.call("GET", "/v1/jobs").body["jobs"]
    slot = parse_slot_id(job["slot"])
    # cron's runner at the occurrence's slot (the clock seam: the process's AWTY_NOW)
    fired = cli(served, "run-slot", job["slot"], AWTY_NOW=iso(slot + timedelta(seconds=5)))
    assert fired.returncode == 0, fired.stderr
    (req,) = rx.requests("/tick")
    assert (req.headers["x-awty-schedule"], req.headers["x-awty-occurrence"]) == ("tick", first)
    assert json.loads(req.body)["payload"] == {"n": 1}
    seen = served.call("GET", "/v1/schedules/tick").body
    assert (seen["last_outcome"], seen["pending"]) == ("done", 1)
    step = datetime.fromisoformat(seen["next"]) - datetime.fromisoformat(first)
    assert step == timedelta(hours=1)
    (ended,) = served.call("GET", "/v1/history?outcome=done").body["history"]
    assert ended["id"] == job["id"]
    # run now: beside the occurrences, none of them
    ran = served.call("POST", "/v1/schedules/tick/run")
    assert ran.status == 200 and ran.body["ran"] == 1
    now = rx.requests("/tick")[-1]
    assert now.headers["x-awty-schedule"] == "tick" and "x-awty-occurrence" not in now.headers
    assert served.call("GET", "/v1/schedules/tick").body["next"] == seen["next"]
