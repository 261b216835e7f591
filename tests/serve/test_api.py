"""The /v1 API against a real `awty serve` on 127.0.0.1, on SQLite and PostgreSQL; every answer
is held to /v1/openapi.json (``served``'s check)."""

from __future__ import annotations

import json

import pytest

import servekit

HOOK = "http://127.0.0.1:9/hook"


def add(s, **fields):
    return s.call("POST", "/v1/jobs", {"target": HOOK, "in": "2h", **fields})


@pytest.mark.slow
def test_add_show_list_and_idempotency(served):
    a = add(served, entity="order", key="42", payload={"n": 1},
            headers={"X-Thing": "1"}, idempotency_key=None)
    assert a.status == 201, a.body
    job = a.body
    assert a.headers["location"] == f"/v1/jobs/{job['id']}"
    assert (job["state"], job["entity"], job["payload"], job["executions"]) == (
        "pending", "order", {"n": 1}, [])
    # the same document `awty show --json` prints
    shown = servekit.awty(served.home, "show", job["id"], "--json", env=served.env)
    assert json.loads(shown.stdout) == served.call("GET", f"/v1/jobs/{job['id']}").body
    # ids in any case, and unique prefixes of 6 or more
    assert served.call("GET", f"/v1/jobs/{job['id'].lower()}").status == 200
    assert served.call("GET", f"/v1/jobs/{job['id'][:10]}").body["id"] == job["id"]
    short = served.call("GET", f"/v1/jobs/{job['id'][:4]}")
    assert short.status == 400 and "too short" in short.body["detail"]
    assert served.call("GET", "/v1/jobs/01ZZZZZZZZZZZZZZZZZZZZZZZZ").status == 404
    # Idempotency-Key: a repeat is the same job (200), other fields 409
    first = served.call("POST", "/v1/jobs", {"target": HOOK, "in": "2h"},
                        headers={"Idempotency-Key": "k-1"})
    again = served.call("POST", "/v1/jobs", {"target": HOOK, "in": "2h"},
                        headers={"Idempotency-Key": "k-1"})
    other = served.call("POST", "/v1/jobs", {"target": HOOK + "/x", "in": "2h"},
                        headers={"Idempotency-Key": "k-1"})
    assert (first.status, again.status, other.status) == (201, 200, 409)
    assert again.body["id"] == first.body["id"]
    assert "idempotency key 'k-1' already names job" in other.body["detail"]
    listed = served.call("GET", "/v1/jobs?entity=order").body
    assert [j["id"] for j in listed["jobs"]] == [job["id"]] and listed["next"] is None


@pytest.mark.slow
def test_cursor_pagination_walks_every_job_once(served):
    ids = [add(served, **{"in": f"{h}h"}).body["id"] for h in (3, 1, 2, 1, 5)]
    seen = [j["id"] for j in served.walk("/v1/jobs?limit=2", "jobs", 2)]
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    by_id = served.call("GET", f"/v1/jobs?after={seen[0]}&limit=10").body
    assert [j["id"] for j in by_id["jobs"]] == seen[1:]
    assert served.call("GET", "/v1/jobs?limit=0").status == 400
    assert served.call("GET", "/v1/jobs?kind=ftp").body["field"] == "kind"


@pytest.mark.slow
def test_batch_is_all_or_nothing_naming_the_bad_index(served):
    good = [{"target": HOOK, "in": "1h", "entity": "order", "key": str(i)} for i in range(3)]
    bad = served.call("POST", "/v1/jobs/batch", [*good, {"target": HOOK, "in": "soon"}])
    assert bad.status == 400 and bad.body["index"] == 3 and bad.body["field"] == "in"
    assert served.call("GET", "/v1/jobs").body["jobs"] == []
    lines = "\n".join(json.dumps(g) for g in good).encode()
    ok = served.call("POST", "/v1/jobs/batch", raw=lines,
                     headers={"Content-Type": "application/x-ndjson"})
    assert ok.status == 201 and ok.body["created"] == 3
    assert len(served.call("GET", "/v1/jobs").body["jobs"]) == 3
    broken = served.call("POST", "/v1/jobs/batch", raw=lines + b"\n{nope",
                         headers={"Content-Type": "application/x-ndjson"})
    assert broken.status == 400 and broken.body["index"] == 3


@pytest.mark.slow
def test_cancel_reschedule_retry_run(served, rx):
    job = add(served).body
    moved = served.call("POST", f"/v1/jobs/{job['id']}/reschedule", {"in": "5h"})
    assert moved.status == 200 and moved.body["next_check_at"] > job["next_check_at"]
    bad = served.call("POST", f"/v1/jobs/{job['id']}/reschedule", {"in": "never"})
    assert bad.status == 400
    assert served.call("DELETE", f"/v1/jobs/{job['id']}").body == {"cancelled": job["id"]}
    again = served.call("DELETE", f"/v1/jobs/{job['id']}")
    assert again.status == 404 and "already ended" in again.body["detail"]
    ended = served.call("GET", f"/v1/jobs/{job['id']}").body
    assert (ended["state"], ended["outcome"]) == ("ended", "cancelled")
    retried = served.call("POST", f"/v1/jobs/{job['id']}/retry")
    assert retried.status == 200 and retried.body["status"] == "pending"
    assert served.call("POST", f"/v1/jobs/{job['id']}/retry").status == 409
    # run now: a real callback to the test's receiver
    fired = add(served, target=rx.url("/now")).body
    ran = served.call("POST", f"/v1/jobs/{fired['id']}/run")
    assert ran.status == 200 and ran.body["ran"] == 1, ran.body
    assert len(rx.requests("/now")) == 1
    after = served.call("GET", f"/v1/jobs/{fired['id']}").body
    assert after["state"] == "ended" and after["outcome"] == "done"
    hist = served.call("GET", "/v1/history?outcome=done").body["history"]
    assert [h["id"] for h in hist] == [fired["id"]]
    assert served.call("GET", "/v1/history?outcome=meh").status == 400
    slots = served.call("GET", "/v1/slots").body["slots"]
    assert sum(s["jobs"] for s in slots) == 1
    stats = served.call("GET", "/v1/stats").body
    assert stats["outcomes"].get("done") == 1
    assert served.call("GET", "/v1/stats?window=0s").status == 400


@pytest.mark.slow
def test_errors_are_problems_never_a_500(served):
    cases = [
        ("POST", "/v1/jobs", b"{not json", 400),
        ("POST", "/v1/jobs", b"[1, 2]", 400),
        ("POST", "/v1/jobs", b'{"target": 5}', 400),
        ("POST", "/v1/jobs", b'{"target": "http://169.254.169.254/latest", "in": "1h"}', 400),
        ("POST", "/v1/jobs", b'{"target": "x", "in": "1h", "bogus": 1}', 400),
        ("POST", "/v1/jobs", b'{"target": "x", "in": "1h", "cwd": "/"}', 400),
        ("POST", "/v1/jobs", b"\xff\xfe", 400),
        ("POST", "/v1/jobs", b"[" * 100000, 400),
        ("POST", "/v1/jobs", b'{"target": "' + b"a" * (1024 * 1024) + b'"}', 413),
        ("POST", "/v1/jobs/batch", b'{"target": "x"}\n', 400),
        ("POST", "/v1/jobs/batch", b"", 400),
        # found by test_fuzz_api: '²' passes str.isdigit() and int() refused it (a 500)
        ("GET", "/v1/jobs?limit=%C2%B2", None, 400),
        ("GET", "/v1/history?limit=%C2%B2", None, 400),
        ("GET", "/v1/nothing", None, 404),
        ("PUT", "/v1/jobs", b"{}", 405),
    ]
    for method, path, raw, status in cases:
        a = served.call(method, path, raw=raw)
        assert a.status == status, (path, raw[:40] if raw else raw, a.status, a.body)
        assert a.headers["content-type"] == "application/problem+json"
        assert a.body["status"] == status and "\n" not in a.body["detail"]
    meta = served.call("POST", "/v1/jobs", raw=b'{"target": "http://169.254.169.254/x", '
                                               b'"in": "1h"}')
    assert meta.body["field"] == "target"


@pytest.mark.slow
def test_auth_scopes_and_revoke_on_every_process(served):
    env, home = served.env, served.home
    none = served.call("GET", "/v1/jobs", token=None)
    assert none.status == 401 and none.headers["www-authenticate"].startswith("Bearer")
    assert served.call("GET", "/v1/jobs", token="awty_nope").status == 401
    reader = servekit.awty(home, "token", "new", "reader", "--scope", "jobs:read",
                           env=env).stdout.strip()
    assert served.call("GET", "/v1/jobs", token=reader).status == 200
    denied = served.call("POST", "/v1/jobs", {"target": HOOK, "in": "1h"}, token=reader)
    assert denied.status == 403 and "lacks the jobs:write scope" in denied.body["detail"]
    # a second serve process on the same store: the revoke is refused by both at once
    second = servekit.start(home, env)
    try:
        second.check = served.check
        assert second.call("GET", "/v1/jobs", token=reader).status == 200
        assert servekit.awty(home, "token", "revoke", "reader", env=env).returncode == 0
        assert second.call("GET", "/v1/jobs", token=reader).status == 401
        assert served.call("GET", "/v1/jobs", token=reader).status == 401
        # idempotency across the two processes
        a = served.call("POST", "/v1/jobs", {"target": HOOK, "in": "1h"},
                        headers={"Idempotency-Key": "two"})
        b = second.call("POST", "/v1/jobs", {"target": HOOK, "in": "1h"},
                        token=served.token, headers={"Idempotency-Key": "two"})
        assert (a.status, b.status, a.body["id"]) == (201, 200, b.body["id"])
    finally:
        second.stop()


@pytest.mark.slow
def test_exec_needs_jobs_exec_and_runs_where_the_token_says(served, tmp_path):
    env, home = served.env, served.home
    exec_dir = tmp_path / "jobs"
    exec_dir.mkdir()
    admin = servekit.awty(home, "token", "new", "admin", "--scope", "admin",
                          env=env).stdout.strip()
    refused = served.call("POST", "/v1/jobs", {"target": "id", "kind": "exec", "in": "1h"},
                          token=admin)
    assert refused.status == 403 and "jobs:exec" in refused.body["detail"]
    ops = servekit.awty(home, "token", "new", "ops", "--scope", "jobs:write,jobs:exec",
                        "--exec-dir", str(exec_dir), "--exec-env", "PATH=/usr/bin:/bin",
                        "--exec-env", "GREETING=hi", env=env).stdout.strip()
    out = exec_dir / "out.txt"
    job = served.call("POST", "/v1/jobs", {
        "target": f'pwd > {out}; env | sort >> {out}', "kind": "exec", "in": "1h"}, token=ops)
    assert job.status == 201, job.body
    ran = served.call("POST", f"/v1/jobs/{job.body['id']}/run", token=ops)
    assert ran.status == 200
    lines = out.read_text().splitlines()
    assert lines[0] == str(exec_dir)
    names = {ln.split("=", 1)[0] for ln in lines[1:]}
    assert "GREETING=hi" in lines and "AWTY_DATABASE_URL" not in names
    # the token's environment, and what the shell and the job's own AWTY_* add: nothing of
    # the serve process's (its HOME, its AWTY_DATABASE_URL, the test runner's variables)
    assert {n for n in names if not n.startswith("AWTY_")} <= {"PATH", "GREETING", "PWD",
                                                                "SHLVL", "_", "OLDPWD"}
    limited = servekit.awty(home, "token", "new", "billing", "--scope", "jobs:write",
                            "--allow-callbacks", "http://127.0.0.1:9/billing/",
                            env=env).stdout.strip()
    assert served.call("POST", "/v1/jobs", {"target": "http://127.0.0.1:9/billing/x",
                                            "in": "1h"}, token=limited).status == 201
    other = served.call("POST", "/v1/jobs", {"target": HOOK, "in": "1h"}, token=limited)
    assert other.status == 403 and other.body["field"] == "target"
