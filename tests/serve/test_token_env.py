"""A token's `--exec-env` is handed to the exec jobs added with it, never shown again: `token
list` (table and `--json`) shows the names only, each value `***`, on both stores, and no serve
endpoint shows a token; the job run through the token still gets the value (when
`exec_env_allow` names it: a token's environment is filtered as at `add`)."""

from __future__ import annotations

import json

import pytest

import servekit

DATABASE_URL = "postgresql://u:pw@h/db"
API_KEY = "sk_live_51HxQ2mK9vL3pR7tWq8Zt"


def _ran(server, token, out):
    job = server.call("POST", "/v1/jobs", {"target": f"env > {out}", "kind": "exec",
                                           "in": "1h"}, token=token)
    assert job.status == 201, job.body
    assert server.call("POST", f"/v1/jobs/{job.body['id']}/run", token=token).status == 200
    return dict(ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln)


@pytest.mark.slow
def test_token_list_never_shows_exec_env_values_but_the_job_gets_them(served, tmp_path):
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
        for secret in (DATABASE_URL, API_KEY, "pw@h", "sk_live_", ops):
            assert secret not in res.stdout + res.stderr
    docs = {d["name"]: d for d in json.loads(listed.stdout)}
    assert docs["ops"]["exec_env"] == {"PATH": "***", "DATABASE_URL": "***", "API_KEY": "***"}
    assert docs["ops"]["exec_dir"] == str(exec_dir) and docs["svc"]["exec_env"] == {}
    assert [ln.split()[0] for ln in table.stdout.splitlines()[1:]] == ["ops", "svc"]

    # no endpoint lists tokens (a new one would have to mask them as token list does)
    # the OpenAPI document's paths, which every answer is held to
    paths = [p for _, p in served.check.paths]
    assert not [p for p in paths if "token" in p.lower()], paths

    # filtered as at add: without exec_env_allow the credentials stay out of the job's row
    # (and so out of export and show), only the plain variables reach it
    got = _ran(served, ops, exec_dir / "plain.txt")
    assert got["PATH"] == "/usr/bin:/bin"
    assert "DATABASE_URL" not in got and "API_KEY" not in got
    # with the names allowed, the job run through the token gets the values
    allowing = servekit.start(home, {**env, "AWTY_EXEC_ENV_ALLOW": "DATABASE_URL,API_KEY"},
                              token=ops)
    try:
        got = _ran(allowing, ops, exec_dir / "allowed.txt")
        log = allowing.log.read_text()
    finally:
        allowing.stop()
    assert (got["DATABASE_URL"], got["API_KEY"]) == (DATABASE_URL, API_KEY)
    assert DATABASE_URL not in log and API_KEY not in log
    # and token list still shows the names only, after the token was used
    again = servekit.awty(home, "token", "list", "--json", env=env).stdout
    assert DATABASE_URL not in again and API_KEY not in again
    assert json.loads(again)[0]["last_used_at"] is not None
