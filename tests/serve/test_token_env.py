"""A token's `--exec-env` is kept with the token and read when each job it added runs, never
copied into the job: `token list` (table and `--json`) shows the names only, each value `***`;
no job row (`show --json`, the API's job, `export`, history) holds a value; the job gets the
values as given (no `exec_env_allow` needed) and nothing of serve's own environment;
`token env` changes them for the pending jobs; a revoked token's jobs fail without running,
also once a new token has its name. Both stores, real `awty` and `awty serve` processes."""

from __future__ import annotations

import json

import pytest

import servekit

DATABASE_URL = "postgresql://u:pw@h/db"
API_KEY = "sk_live_51HxQ2mK9vL3pR7tWq8Zt"
ROTATED = "postgresql://u:rotated-pw@h/db"
SERVE_OWN = "serve-own-secret-3f9a"  # in serve's environment only: no job may see it
VALUES = (DATABASE_URL, API_KEY, ROTATED, "pw@h", "sk_live_", SERVE_OWN)


def _added(server, token, out):
    job = server.call("POST", "/v1/jobs", {"target": f"env > {out}", "kind": "exec",
                                           "in": "1h"}, token=token)
    assert job.status == 201, job.body
    return job.body["id"]


def _ran(server, token, job_id, out):
    assert server.call("POST", f"/v1/jobs/{job_id}/run", token=token).status == 200
    return dict(ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln)


def _none_shown(*texts):
    for text in texts:
        for value in VALUES:
            assert value not in text, (value, text[-2000:])


@pytest.mark.slow
def test_a_tokens_exec_env_is_read_when_its_job_runs_and_never_stored_in_the_job(served,
                                                                                  tmp_path):
    env, home = served.env, served.home
    exec_dir = tmp_path / "jobs"
    exec_dir.mkdir()
    new = servekit.awty(home, "token", "new", "ops", "--scope", "jobs:read,jobs:write,jobs:exec",
                        "--exec-dir", str(exec_dir), "--exec-env", "PATH=/usr/bin:/bin",
                        "--exec-env", f"DATABASE_URL={DATABASE_URL}",
                        "--exec-env", f"API_KEY={API_KEY}", env=env)
    assert new.returncode == 0, new.stderr
    ops = new.stdout.strip()

    listed = servekit.awty(home, "token", "list", "--json", env=env)
    table = servekit.awty(home, "token", "list", env=env)
    for res in (listed, table):
        assert res.returncode == 0, res.stderr
        _none_shown(res.stdout + res.stderr)
        assert ops not in res.stdout + res.stderr
    docs = {d["name"]: d for d in json.loads(listed.stdout)}
    assert docs["ops"]["exec_env"] == {"PATH": "***", "DATABASE_URL": "***", "API_KEY": "***"}
    assert docs["ops"]["exec_dir"] == str(exec_dir) and docs["svc"]["exec_env"] == {}
    assert [ln.split()[0] for ln in table.stdout.splitlines()[1:]] == ["ops", "svc"]

    # no endpoint lists tokens (a new one would have to mask them as token list does)
    # the OpenAPI document's paths, which every answer is held to
    paths = [p for _, p in served.check.paths]
    assert not [p for p in paths if "token" in p.lower()], paths

    # a serve whose own environment holds a secret, and no exec_env_allow
    own = servekit.start(home, {**env, "SERVE_OWN_SECRET": SERVE_OWN}, token=ops)
    try:
        first = _added(own, ops, exec_dir / "first.txt")
        pending = _added(own, ops, exec_dir / "pending.txt")
        shown = own.call("GET", f"/v1/jobs/{pending}", token=ops)
        assert shown.status == 200
        _none_shown(json.dumps(shown.body))
        got = _ran(own, ops, first, exec_dir / "first.txt")
        # the token's values as given (filtered by nothing), nothing of serve's own
        assert (got["DATABASE_URL"], got["API_KEY"], got["PATH"]) == (
            DATABASE_URL, API_KEY, "/usr/bin:/bin")
        assert SERVE_OWN not in (exec_dir / "first.txt").read_text()
        assert "SERVE_OWN_SECRET" not in got and got["AWTY_JOB_ID"] == first

        # neither the pending job's row nor the ended one's shows or keeps a value
        show = servekit.awty(home, "show", pending, "--json", env=env)
        ended = servekit.awty(home, "show", first, "--json", env=env)
        history = servekit.awty(home, "history", "--json", env=env)
        export = servekit.awty(home, "export", env=env)
        for res in (show, ended, history, export):
            assert res.returncode == 0, res.stderr
            _none_shown(res.stdout)
        assert json.loads(ended.stdout)["outcome"] == "done"
        rows = [json.loads(ln) for ln in export.stdout.splitlines()]
        kept = [r for r in rows if pending in json.dumps(r)]
        assert kept and '"=token": "ops#' in json.dumps(kept), kept  # the reference, only

        # rotated: the pending job runs with the token's new value
        rotate = servekit.awty(home, "token", "env", "ops", "--exec-env", "PATH=/usr/bin:/bin",
                               "--exec-env", f"DATABASE_URL={ROTATED}", env=env)
        assert rotate.returncode == 0, rotate.stderr
        assert rotate.stdout.strip() == "token ops: exec environment set (PATH, DATABASE_URL)"
        _none_shown(rotate.stdout + rotate.stderr)
        got = _ran(own, ops, pending, exec_dir / "pending.txt")
        assert got["DATABASE_URL"] == ROTATED and "API_KEY" not in got

        # revoked, then a new token given its name: the job it added fails, never runs
        doomed = _added(own, ops, exec_dir / "doomed.txt")
        assert servekit.awty(home, "token", "revoke", "ops", env=env).returncode == 0
        again = servekit.awty(home, "token", "new", "ops", "--scope", "jobs:exec",
                              "--exec-env", "DATABASE_URL=postgresql://other", env=env)
        assert again.returncode == 0, again.stderr
        ran = own.call("POST", f"/v1/jobs/{doomed}/run", token=served.token)
        assert ran.status == 200, ran.body
        log = own.log.read_text()
    finally:
        own.stop()
    assert not (exec_dir / "doomed.txt").exists()
    doc = json.loads(servekit.awty(home, "show", doomed, "--json", env=env).stdout)
    assert doc["outcome"] == "failed", doc
    assert doc["error"].startswith("token 'ops' was revoked: a job added with it does not run")
    _none_shown(log)
    # and token list still shows the names only, after the token was used
    after = servekit.awty(home, "token", "list", "--json", env=env)
    _none_shown(after.stdout)
    assert json.loads(after.stdout)[0]["exec_env"] == {"DATABASE_URL": "***"}


@pytest.mark.slow
def test_token_env_of_no_such_token_or_a_bad_item_changes_nothing(served):
    env, home = served.env, served.home
    res = servekit.awty(home, "token", "env", "nope", "--exec-env", "A=1", env=env)
    assert (res.returncode, res.stderr.strip()) == (
        1, "awty: no token named 'nope' (`awty token list` shows them)")
    res = servekit.awty(home, "token", "env", "svc", "--exec-env", "A", env=env)
    assert (res.returncode, res.stderr.strip()) == (2, "awty: --exec-env: 'A' is not NAME=VALUE")
    listed = json.loads(servekit.awty(home, "token", "list", "--json", env=env).stdout)
    assert listed[0]["exec_env"] == {}
