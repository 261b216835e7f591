"""No credential is stored with an exec job (issue 28, item 5).

``awty add --exec`` records the adding shell's environment so the job finds it under cron; the
filter went by name only, so ``DATABASE_URL``, ``AWTY_DATABASE_URL`` with its password, a
proxy's ``user:password``, ``REDIS_URL``, ``SENTRY_DSN``, webhook URLs, ``MYSQL_PWD``,
``DB_PASS``, ``CI_JOB_JWT`` and an ``AccountKey=`` connection string were stored, printed by
``export``, and on PostgreSQL readable from every host. Here a real ``awty add`` subprocess
runs in a shell environment holding each of them (and values that say nothing in their name:
a GitHub, Slack, Stripe or AWS key, a random token, a ``password=`` pair); ``show --json`` and
``export`` must show none of them, on each store, while PATH, HOME, LANG, LC_*, TZ, a plain
variable and the names ``exec_env_allow`` lists are kept."""

from __future__ import annotations

import json
import os

import pytest

from relkit import cli_env, run_cli
from helpers import T0

pytestmark = pytest.mark.reliability

SECRETS = {
    "DATABASE_URL": "postgresql://app:Xk9pw0rdQ@db.internal:5432/app",
    "AWTY_DATABASE_URL": "postgresql://awty:Tr0ub4dorZ@db.internal/awty",
    "http_proxy": "http://proxyuser:pr0xypassQ@proxy.internal:3128",
    "HTTPS_PROXY": "http://proxyuser:pr0xypassQ@proxy.internal:3128",
    "REDIS_URL": "redis://:r3disPassQ@cache.internal:6379/0",
    "SENTRY_DSN": "https://4f1c2a9be07d4c3e8a15b6d9f0e2c7a1@o12345.ingest.sentry.io/678",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T024BE7LD/B01J5NQ8Z/"
                         "hK3vQ9xZ2mB7nR4tW8yL1pC6",
    "ALERTS_URL": "https://discord.com/api/webhooks/1183456789012345678/"
                  "Xq7Lr2Nv9Tb4Mk8Pz1Wc6Hd3Jf5Gs0Ya-uE2oI8",
    "MYSQL_PWD": "hunter2",
    "DB_PASS": "hunter2",
    "CI_JOB_JWT": "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJqb2JfMTIzIn0."
                  "c2lnbmF0dXJlLXRoYXQtaXMtbG9uZw",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=acct;"
                                       "AccountKey=bXlrZXlteWtleW15a2V5bXlrZXk=;"
                                       "EndpointSuffix=core.windows.net",
    # nothing in these names says "secret": the value does
    "GH": "ghp_R8mQ2xV7kL9pT4nB6wZ1cY3dF5gH0jK2sA4e",
    "GH_FINE": "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGH",
    "SLACK_BOT": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
    "STRIPE": "sk_live_51HxQ2mK9vL3pR7tW",
    "AWS_ID": "AKIAIOSFODNN7EXAMPLE",
    "OPAQUE": "Zx8Qm2Lr7Vk4Tn9Wb3Pc6Hy1Jd5Gf0Ns",
    "SVC_OPTS": "host=db.internal user=app password=hunter2",
}
KEPT = {"HOME": "/home/app", "LANG": "en_US.UTF-8", "LC_ALL": "en_US.UTF-8",
        "TZ": "Europe/Paris", "MYVAR": "hello", "JAVA_OPTS": "-Xmx2g -Dfile.encoding=UTF-8",
        "BUILD_TOKEN": "build-token-1",  # a secret-looking name the setting allows
        "GIT_COMMIT": "9fceb02d0ae598e95dc970b74767f19372d61af8"}  # allowed by prefix GIT_*


@pytest.mark.slow
def test_no_credential_is_stored_with_an_exec_job(home, backend, tmp_path):
    shell = {**cli_env(home, T0), **backend.env, **SECRETS, **KEPT,
             "AWTY_EXEC_ENV_ALLOW": "BUILD_TOKEN,GIT_*"}
    # the flag points this add at the store under test: AWTY_DATABASE_URL is one of the secrets
    store = backend.args or ["--database-url", ""]
    add = run_cli(["add", "--exec", "printenv", "--in", "1h", "--json", *store], shell)
    assert add.returncode == 0, add.stderr
    job_id = json.loads(add.stdout)["id"]

    reader = {**cli_env(home, T0), **backend.env}
    show = run_cli(["show", job_id, "--json"], reader)
    assert show.returncode == 0, show.stderr
    export = run_cli(["export", "--output", str(tmp_path / "home.jsonl")], reader)
    assert export.returncode == 0, export.stderr
    exported = (tmp_path / "home.jsonl").read_text()
    jobs = [d["job"] for d in map(json.loads, exported.splitlines())
            if d.get("job", {}).get("id") == job_id]
    assert len(jobs) == 1, exported[:2000]
    env = jobs[0]["env"]  # the environment as stored

    stored = sorted(name for name in SECRETS if name in env)
    assert stored == [], f"credentials stored with the job: {stored}"
    for value in SECRETS.values():
        assert value not in show.stdout and value not in exported
    assert env["PATH"] == os.environ["PATH"]
    assert {k: env.get(k) for k in KEPT} == KEPT
