"""The way onto PostgreSQL as an operator takes it (issue 29): the driver, the URL kept in
awty.toml, the cron and systemd lines that carry it, a home that cannot split between two
stores. Real processes on a real server (the ``pg_database`` session database)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DRIVER_LINE = "awty: PostgreSQL needs the driver: pip install 'awty[postgres]'\n"


def awty(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "awty", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd,
                          timeout=timeout)


# --- 1. the driver ---------------------------------------------------------------------------
@pytest.fixture
def no_driver(tmp_path) -> dict[str, str]:
    """An environment in which ``import psycopg`` fails as it does where the extra is not
    installed: a sitecustomize on PYTHONPATH marks psycopg and psycopg_pool missing."""
    shim = tmp_path / "no-driver"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import sys\nfor name in ('psycopg', 'psycopg_pool'):\n    sys.modules[name] = None\n")
    return {"PYTHONPATH": str(shim)}


def test_the_postgres_extra_names_the_driver_and_its_pool():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    wanted = {d.split(">=")[0]: d for d in extras["postgres"]}
    assert set(wanted) == {"psycopg[binary]", "psycopg-pool"}
    assert all(">=" in d for d in wanted.values())  # lower bounds pinned


@pytest.mark.parametrize("command", [
    ["init"], ["add", "https://example.com/hook", "--in", "2h"], ["list"], ["run-slot"],
    ["catchup"],
])
def test_a_missing_driver_is_one_line_and_exit_1(tmp_path, no_driver, command):
    res = awty(*command, "--home", str(tmp_path / "home"), "--database-url",
               "postgresql://awty@127.0.0.1:5432/awty", env=no_driver)
    assert (res.returncode, res.stderr, res.stdout) == (1, DRIVER_LINE, ""), res.stderr
    assert not (tmp_path / "home" / "awty.db").exists()


def test_doctor_names_the_missing_driver(tmp_path, no_driver):
    res = awty("doctor", "--home", str(tmp_path / "home"), "--database-url",
               "postgresql://awty@127.0.0.1:5432/awty", env=no_driver)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "PostgreSQL needs the driver: pip install 'awty[postgres]'" in res.stdout


def test_readme_install_section_names_the_extra():
    readme = (ROOT / "README.md").read_text()
    install = readme[readme.index("## Install"):readme.index("## Quick start")]
    assert "pip install 'awty[postgres]'" in install


# --- 2. the URL is kept ----------------------------------------------------------------------
@pytest.fixture
def pg(pg_database, pg_schema):
    """A PostgreSQL URL (the session database) and a schema name of this test's own, dropped
    afterwards."""
    from helpers import pg_url

    return pg_url(pg_database.url), pg_schema


def pending_in(url: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        return [r[0] for r in c.execute(f'SELECT target FROM "{schema}".future_job ORDER BY id')]


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, (res.args, res.stdout, res.stderr)
    return res


@pytest.mark.slow
def test_init_keeps_the_url_and_every_command_after_finds_it(tmp_path, pg):
    url, schema = pg
    home = tmp_path / "home"
    out = ok(awty("init", "--home", str(home), "--database-url", url,
                  env={"AWTY_DATABASE_SCHEMA": schema})).stdout
    assert f"database_url in {home / 'awty.toml'}" in out
    kept = tomllib.loads((home / "awty.toml").read_text())
    assert kept == {"database_url": url, "database_schema": schema,
                    "signing_secret_file": str(home / "signing.secret")}  # the cluster's first
    # no flag, no variable from here on: awty.toml alone points at PostgreSQL
    ok(awty("add", "https://example.com/hook", "--in", "2h", "--home", str(home)))
    for command in (["list"], ["slots"], ["stats"], ["history"], ["run-slot"], ["catchup"],
                    ["doctor"], ["export", "-o", str(tmp_path / "e.jsonl")]):
        res = awty(*command, "--home", str(home))
        assert "awty.db" not in res.stderr and "Traceback" not in res.stderr, (command, res)
    assert pending_in(url, schema) == ["https://example.com/hook"]
    assert not (home / "awty.db").exists() and not (home / "slots").exists()


@pytest.mark.slow
def test_init_adds_the_url_below_the_operators_own_lines(tmp_path, pg):
    url, schema = pg
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "awty.toml").write_text("# mine\nresolution = 5\n")
    ok(awty("init", "--home", str(home), "--database-url", url,
            env={"AWTY_DATABASE_SCHEMA": schema}))
    text = (home / "awty.toml").read_text()
    assert text.startswith("# mine\nresolution = 5\n")
    assert tomllib.loads(text) == {"resolution": 5, "database_url": url,
                                   "database_schema": schema,
                                   "signing_secret_file": str(home / "signing.secret")}
    again = awty("init", "--home", str(home), "--database-url", url + "_other",
                 env={"AWTY_DATABASE_SCHEMA": schema})
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
    assert "names database_url" in again.stderr
    assert (home / "awty.toml").read_text() == text


@pytest.mark.slow
def test_init_leaves_a_linked_awty_toml_alone_and_says_what_to_add(tmp_path, pg):
    url, schema = pg
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    etc = tmp_path / "etc-awty.toml"
    etc.write_text("# the operator's, kept elsewhere\n")
    (home / "awty.toml").symlink_to(etc)
    res = ok(awty("init", "--home", str(home), "--database-url", url,
                  env={"AWTY_DATABASE_SCHEMA": schema}))
    assert etc.read_text() == "# the operator's, kept elsewhere\n"
    assert (home / "awty.toml").is_symlink()
    assert "not a file awty rewrites: add database_url = " in res.stderr


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["crontab", "systemd"])
def test_cron_and_systemd_refuse_a_url_they_would_not_see(tmp_path, pg, scheduler):
    url, schema = pg
    home = tmp_path / "home"
    for how in ({"args": ["--database-url", url], "env": {"AWTY_DATABASE_SCHEMA": schema}},
                {"args": [], "env": {"AWTY_DATABASE_URL": url,
                                     "AWTY_DATABASE_SCHEMA": schema}}):
        res = awty(scheduler, "--home", str(home), *how["args"], env=how["env"])
        assert res.returncode == 2 and res.stdout == "", res
        assert "which " in res.stderr and "awty init --database-url URL" in res.stderr
    ok(awty("init", "--home", str(home), "--database-url", url,
            env={"AWTY_DATABASE_SCHEMA": schema}))
    shown = ok(awty(scheduler, "--home", str(home))).stdout
    assert f'{url}, schema "{schema}" (database_url in {home / "awty.toml"})' in shown
    assert "run-slot --home" in shown


@pytest.mark.slow
def test_a_home_with_jobs_in_both_stores_is_refused(tmp_path, pg):
    url, schema = pg
    home = tmp_path / "home"
    ok(awty("add", "https://example.com/left-in-sqlite", "--in", "2h", "--home", str(home)))
    for command in (["init"], ["add", "https://example.com/new", "--in", "2h"], ["list"],
                    ["run-slot"]):
        res = awty(*command, "--home", str(home), "--database-url", url,
                   env={"AWTY_DATABASE_SCHEMA": schema})
        assert res.returncode == 1 and res.stderr.count("\n") == 1, (command, res.stderr)
        assert f"{home / 'awty.db'} holds 1 pending job(s)" in res.stderr
        assert "for PostgreSQL" in res.stderr and "for SQLite, drop database_url" in res.stderr
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:  # init made nothing
        assert c.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is None
    # the way the line gives: export from SQLite (an empty URL: this home's awty.db), moved
    assert f"`awty export --database-url '' --move {url} -o jobs.jsonl`" in res.stderr
    ok(awty("export", "--home", str(home), "--database-url", "", "--move", url, "-o",
            str(tmp_path / "jobs.jsonl")))
    ok(awty("init", "--home", str(home), "--database-url", url,
            env={"AWTY_DATABASE_SCHEMA": schema}))
    ok(awty("import", str(tmp_path / "jobs.jsonl"), "--home", str(home)))
    assert pending_in(url, schema) == ["https://example.com/left-in-sqlite"]


# --- 3. cluster settings live in the cluster -------------------------------------------------
NOW = "2026-11-22T10:07:12Z"


def two_hosts(tmp_path: Path, url: str, schema: str, b_toml: str = "") -> tuple[Path, Path]:
    """Two homes ("hosts") on one PostgreSQL schema: A ran `awty init` first; B has its own
    awty.toml lines (``b_toml``) and ran init after."""
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    env = {"AWTY_DATABASE_SCHEMA": schema}
    ok(awty("init", "--home", str(a), "--database-url", url, env=env))
    b.mkdir(mode=0o700)
    (b / "awty.toml").write_text(b_toml)
    ok(awty("init", "--home", str(b), "--database-url", url, env=env))
    return a, b


def added_slot(home: Path, *args: str) -> tuple[str, str]:
    import json

    res = ok(awty("add", "https://example.com/hook", *args, "--json", "--home", str(home),
                  env={"AWTY_NOW": NOW}))
    return json.loads(res.stdout)["slot"], res.stderr


@pytest.mark.slow
def test_every_host_slots_by_the_clusters_resolution_and_says_when_its_own_differs(
        tmp_path, pg):
    url, schema = pg
    a, b = two_hosts(tmp_path, url, schema, b_toml="resolution = 5\n")
    assert added_slot(a, "--in", "1m") == ("202611221015", "")
    slot, warning = added_slot(b, "--in", "1m")
    assert slot == "202611221015"  # the cluster's 15 minutes, not B's 5 (10:10)
    assert warning == (f"awty: warning: resolution = 5 ({b / 'awty.toml'}): the cluster's is "
                       "15, used here (`awty config --cluster` shows and changes them)\n")
    res = awty("add", "https://example.com/hook", "--in", "2h", "--home", str(b),
               env={"AWTY_NOW": NOW, "AWTY_RESOLUTION": "10", "AWTY_MAX_DELAY": "1d"})
    assert res.returncode == 0 and res.stderr.count("\n") == 1
    assert "resolution = 10 (AWTY_RESOLUTION), max_delay = 1d (AWTY_MAX_DELAY)" in res.stderr


@pytest.mark.slow
def test_config_cluster_changes_every_hosts_settings_and_moves_pending_jobs(tmp_path, pg):
    import json

    url, schema = pg
    a, b = two_hosts(tmp_path, url, schema)
    first, _ = added_slot(a, "--in", "1m")  # 10:15
    second, _ = added_slot(a, "--in", "30m")  # 10:45
    assert (first, second) == ("202611221015", "202611221045")
    res = ok(awty("config", "--cluster", "resolution=20", "max_delay=2h", "--home", str(b),
                  env={"AWTY_NOW": NOW}))
    assert "resolution 15 -> 20, max_delay 365d -> 2h" in res.stdout
    assert "moved 2 pending job(s) to 20-minute slots" in res.stdout
    listed = json.loads(ok(awty("list", "--json", "--home", str(a))).stdout)
    assert sorted(j["slot"] for j in listed) == ["202611221020", "202611221100"]
    assert added_slot(a, "--in", "1m")[0] == "202611221020"  # A reads the new resolution
    far = awty("add", "https://example.com/hook", "--in", "3h", "--home", str(a),
               env={"AWTY_NOW": NOW})
    assert far.returncode == 2 and "max_delay" in far.stderr
    shown = json.loads(ok(awty("config", "--cluster", "--json", "--home", str(a))).stdout)
    assert shown["resolution"] == {"value": 20, "from": "cluster"}


@pytest.mark.slow
def test_config_cluster_refuses_what_is_not_a_cluster_setting(tmp_path, pg):
    url, schema = pg
    a, _ = two_hosts(tmp_path, url, schema)
    for bad in (["concurrency=5"], ["resolution=7"], ["resolution"]):
        res = awty("config", "--cluster", *bad, "--home", str(a))
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (bad, res.stderr)
    sqlite = awty("config", "--cluster", "resolution=5", "--home", str(tmp_path / "solo"))
    assert sqlite.returncode == 2 and "SQLite" in sqlite.stderr


# --- 7. moving a home fences the old one -----------------------------------------------------
@pytest.mark.slow
def test_a_home_moved_to_postgresql_refuses_runs_and_adds_and_doctor_says_delete(tmp_path, pg):
    url, schema = pg
    home = tmp_path / "home"
    ok(awty("add", "https://example.com/moved", "--in", "1m", "--home", str(home),
            env={"AWTY_NOW": NOW}))
    secret_url = url.replace("@", ":s3cret@", 1)  # trust auth: never sent anyway
    res = ok(awty("export", "--move", secret_url, "-o", str(tmp_path / "home.jsonl"),
                  "--home", str(home)))
    assert "marked as moved" in res.stderr and "s3cret" not in res.stderr
    for command in (["add", "https://example.com/late", "--in", "2h"], ["run-slot"],
                    ["catchup"], ["retry", "01JD3XXXXX"]):
        refused = awty(*command, "--home", str(home), env={"AWTY_NOW": NOW})
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("awty: this home moved to postgresql://")
        assert refused.stderr.rstrip().endswith(": use that store")
        assert "s3cret" not in refused.stderr and "***" in refused.stderr
    assert ok(awty("list", "--json", "--home", str(home))).stdout.count('"id"') == 1  # reads
    doctor = awty("doctor", "--home", str(home))
    assert "already moved: delete them" in doctor.stdout and "re-add" not in doctor.stdout
    assert "catchup" not in doctor.stdout  # a leftover is not work to catch up
    # the same home, now on PostgreSQL: its awty.db was moved, so it is no second store
    ok(awty("init", "--home", str(home), "--database-url", url,
            env={"AWTY_DATABASE_SCHEMA": schema}))
    ok(awty("import", str(tmp_path / "home.jsonl"), "--home", str(home)))
    assert pending_in(url, schema) == ["https://example.com/moved"]
    ok(awty("add", "https://example.com/after", "--in", "2h", "--home", str(home)))
    doctor = awty("doctor", "--home", str(home)).stdout
    drop_ins = next(line for line in doctor.splitlines() if line.startswith("drop-ins"))
    assert "already moved: delete them" in drop_ins and "awty add" not in drop_ins


@pytest.mark.slow
def test_a_postgresql_home_moved_away_fences_every_host(tmp_path, pg):
    url, schema = pg
    a, b = two_hosts(tmp_path, url, schema)
    ok(awty("add", "https://example.com/one", "--in", "1m", "--home", str(a)))
    new_home = tmp_path / "new-home"
    ok(awty("export", "--move", str(new_home), "-o", str(tmp_path / "out.jsonl"), "--home",
            str(a)))
    refused = awty("add", "https://example.com/two", "--in", "1m", "--home", str(b))
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"awty: this home moved to {new_home} on ")
    assert refused.stderr.endswith(": use that store\n") and refused.stderr.count("\n") == 1
    ok(awty("import", str(tmp_path / "out.jsonl"), "--home", str(new_home)))
    listed = ok(awty("list", "--json", "--home", str(new_home))).stdout
    assert "https://example.com/one" in listed


# --- 4. where jobs run; 5. who fired what -----------------------------------------------------
RUN_AT = "2026-11-22T10:15:05Z"  # just past the slot the 1-minute adds land in


@pytest.mark.slow
def test_a_runner_claims_only_its_kinds_and_doctor_names_what_none_may_claim(tmp_path, pg,
                                                                              rx):
    import json
    import socket

    url, schema = pg
    web_only, anything = two_hosts(tmp_path, url, schema)
    with (web_only / "awty.toml").open("a") as f:
        f.write('runner_kinds = ["http"]\n')
    hook = json.loads(ok(awty("add", rx.url("/hook"), "--in", "1m", "--json", "--home",
                              str(anything), env={"AWTY_NOW": NOW})).stdout)["id"]
    cmd = json.loads(ok(awty("add", "true", "--exec", "--in", "1m", "--json", "--home",
                             str(anything), env={"AWTY_NOW": NOW})).stdout)["id"]
    ok(awty("run-slot", "--home", str(web_only), env={"AWTY_NOW": RUN_AT}))
    assert len(rx.requests("/hook")) == 1
    left = json.loads(ok(awty("list", "--json", "--home", str(web_only))).stdout)
    assert [j["id"] for j in left] == [cmd]  # the exec job waits for a host that runs it
    doctor = awty("doctor", "--home", str(web_only), env={"AWTY_NOW": RUN_AT})
    runners = next(ln for ln in doctor.stdout.splitlines() if ln.startswith("runners"))
    assert "problem" in runners and "1 exec job(s) pending that no live runner may claim" \
        in runners and f"{socket.gethostname()} claims http" in runners, doctor.stdout
    assert doctor.returncode == 1
    refused = awty("run", cmd, "--home", str(web_only), env={"AWTY_NOW": RUN_AT})
    assert refused.returncode == 1 and "runner_kinds" in refused.stderr
    ok(awty("run-slot", "--home", str(anything), env={"AWTY_NOW": RUN_AT}))
    assert json.loads(ok(awty("list", "--json", "--home", str(anything))).stdout) == []
    # 5: each execution and history row says which host and process fired it
    for job in (hook, cmd):
        shown = json.loads(ok(awty("show", job, "--json", "--home", str(web_only))).stdout)
        [run] = shown["executions"]
        assert run["host"] == socket.gethostname() and isinstance(run["pid"], int)
        assert (shown["host"], shown["pid"]) == (run["host"], run["pid"])
    text = ok(awty("show", cmd, "--home", str(web_only))).stdout
    assert f"{socket.gethostname()} pid " in text
    history = json.loads(ok(awty("history", "--json", "--home", str(anything))).stdout)
    assert {h["id"]: h["host"] for h in history} == {hook: socket.gethostname(),
                                                    cmd: socket.gethostname()}
    pids = {h["id"]: h["pid"] for h in history}
    assert pids[hook] != pids[cmd]  # two runner processes on two "hosts"
    from awty.api import Awty

    with Awty(anything, env={}) as a:  # the Python API says the same
        [row] = a.get(cmd).ended
        assert (row.host, row.pid) == (socket.gethostname(), pids[cmd])
        assert a.executions(cmd)[0].pid == pids[cmd]


@pytest.mark.slow
def test_log_format_json_is_one_object_a_line_for_a_log_shipper(tmp_path, rx):
    import json
    import socket

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "awty.toml").write_text('log_format = "json"\n')
    rx.script("/gone-wrong", status=400)
    job = json.loads(ok(awty("add", rx.url("/gone-wrong"), "--in", "1m", "--json", "--home",
                             str(home), env={"AWTY_NOW": NOW})).stdout)["id"]
    ok(awty("--home", str(home), "run-slot", env={"AWTY_NOW": RUN_AT}))
    lines = [json.loads(line) for line in (home / "awty.log").read_text().splitlines()]
    keys = {"time", "level", "host", "pid", "command", "slot", "job", "outcome", "message"}
    assert lines and all(set(d) == keys for d in lines)
    failed = next(d for d in lines if d["job"] == job)
    assert (failed["level"], failed["command"], failed["slot"], failed["outcome"]) == (
        "warning", "run-slot", "202611221015", "failed")
    assert failed["host"] == socket.gethostname() and isinstance(failed["pid"], int)
    summary = next(d for d in lines if d["job"] is None)
    assert summary["outcome"] == {"failed": 1} and summary["slot"] == "202611221015"


def test_systemd_system_units_run_as_a_service_account(tmp_path):
    from awty import cronhealth

    printed = ok(awty("systemd", "--system")).stdout
    assert "User=awty\nGroup=awty\nStateDirectory=awty\nStateDirectoryMode=0700" in printed
    assert "run-slot --home /var/lib/awty" in printed and "catchup --home /var/lib/awty" \
        in printed
    home, units = tmp_path / "srv-awty", tmp_path / "etc-systemd-system"
    res = ok(awty("systemd", "--system", "--user", "jobs", "--home", str(home), "--install",
                  "--unit-dir", str(units)))
    assert "useradd --system" in res.stdout and "systemctl daemon-reload" in res.stdout
    service = (units / "awty-run-slot.service").read_text()
    assert "User=jobs" in service and "StateDirectory" not in service  # not under /var/lib
    assert f"run-slot --home {home}" in service
    (units / "timers.target.wants").mkdir()
    (units / "timers.target.wants" / "awty-run-slot.timer").symlink_to(
        units / "awty-run-slot.timer")
    seen = cronhealth.scheduler(home, 15, env={"HOME": str(tmp_path / "user"),
                                               "PATH": "/nonexistent"},
                                system_unit_dir=units)
    assert seen.level == "ok" and "systemd system timer" in seen.detail, seen


# --- 6. connection settings ----------------------------------------------------------------
@pytest.fixture(params=["transaction", "session"])
def bouncer(request, pg_database):
    import pgserver

    try:
        b = pgserver.Bouncer(pg_database.url, request.param)
    except pgserver.NoServer as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the pooler tests need pgbouncer: {e}", pytrace=False)
        pytest.skip(f"the pooler tests need pgbouncer: {e}")
    yield request.param, b.url
    b.stop()


@pytest.mark.slow
def test_a_pooler_in_transaction_mode_is_refused_in_one_line(tmp_path, pg, bouncer, rx):
    import json

    _, schema = pg
    mode, url = bouncer
    home = tmp_path / "home"
    env = {"AWTY_DATABASE_SCHEMA": schema}
    ok(awty("init", "--home", str(home), "--database-url", url, env=env))
    job = json.loads(ok(awty("add", rx.url("/pooled"), "--in", "1m", "--json", "--home",
                             str(home), env={"AWTY_NOW": NOW})).stdout)["id"]
    res = awty("run-slot", "--home", str(home), env={"AWTY_NOW": RUN_AT})
    if mode == "session":
        assert res.returncode == 0, res.stderr
        assert len(rx.requests("/pooled")) == 1
        return
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert "a session lock does not hold between transactions here (a pooler such as " \
        "PgBouncer in transaction mode?)" in res.stderr
    assert rx.requests("/pooled") == []
    shown = json.loads(ok(awty("show", job, "--json", "--home", str(home))).stdout)
    assert shown["state"] == "pending" and shown["lease_until"] is None  # nothing claimed


PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def secure():
    """A server of its own that asks for a password and speaks TLS (a trustme CA)."""
    import trustme

    import pgserver

    ca = trustme.CA()
    try:
        cluster = pgserver.SecureCluster(PASSWORD, ca)
        cluster.start()
    except pgserver.NoServer as e:
        pytest.fail(pgserver.unavailable(str(e)), pytrace=False)
    ca_file = cluster.dir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    yield cluster, ca_file
    cluster.destroy()


@pytest.mark.slow
def test_libpq_parameters_and_passwords_pass_through_and_never_show(tmp_path, secure):
    import trustme

    cluster, ca = secure
    at = f"127.0.0.1:{cluster.port}/postgres"
    tls = f"sslmode=verify-full&sslrootcert={ca}"
    env = {"AWTY_DATABASE_SCHEMA": "tls", "AWTY_NOW": NOW}
    seen = []

    def run(*args, extra=None):
        res = awty(*args, env={**env, **(extra or {})})
        seen.append(res.stdout + res.stderr)
        return res

    home = tmp_path / "home"
    url = f"postgresql://postgres:{PASSWORD}@{at}?{tls}"
    ok(run("init", "--home", str(home), "--database-url", url))
    for command in (["add", "https://example.com/tls", "--in", "1m"], ["list"], ["config"],
                    ["config", "--cluster"], ["crontab"], ["systemd"], ["doctor"],
                    ["export", "--move", url, "-o", str(tmp_path / "x.jsonl")],
                    ["add", "https://example.com/after-move", "--in", "1m"]):
        run(*command, "--home", str(home))
    assert "postgresql://postgres:***@" in "".join(seen)
    # libpq's own ways to give the password: PGPASSWORD, PGPASSFILE (no password in the URL)
    bare = f"postgresql://postgres@{at}?{tls}"
    ok(run("list", "--home", str(tmp_path / "h2"), "--database-url", bare,
           extra={"PGPASSWORD": PASSWORD}))
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{cluster.port}:*:postgres:{PASSWORD}\n")
    passfile.chmod(0o600)
    ok(run("list", "--home", str(tmp_path / "h3"), "--database-url", bare,
           extra={"PGPASSFILE": str(passfile)}))
    # a refused password, a certificate of another CA: one line each, and no password
    for bad, why in ((url.replace(PASSWORD, "wrong-pw"), "password authentication failed"),
                     (url.replace(str(ca), str(tmp_path / "other-ca.pem")), "certificate"),
                     (url.replace(PASSWORD, PASSWORD + " x"), "percent-encoded")):
        trustme.CA().cert_pem.write_to_path(str(tmp_path / "other-ca.pem"))
        res = run("list", "--home", str(tmp_path / "h4"), "--database-url", bad)
        assert res.returncode in (1, 2) and res.stderr.count("\n") == 1, res.stderr
        assert why in res.stderr, res.stderr
    assert not any(PASSWORD in text or "wrong-pw" in text for text in seen), seen
    logs = "".join(p.read_text() for p in tmp_path.rglob("awty.log"))
    assert PASSWORD not in logs
    assert (home / "awty.toml").stat().st_mode & 0o777 == 0o600  # the URL kept for cron


@pytest.mark.slow
def test_pool_size_and_connect_timeout_are_settings(tmp_path, pg):
    import socket
    import time

    url, schema = pg
    from awty.api import Awty

    ok(awty("init", "--home", str(tmp_path / "h"), "--database-url", url,
            env={"AWTY_DATABASE_SCHEMA": schema}))
    with Awty(tmp_path / "h", env={"AWTY_DATABASE_CONNECT_TIMEOUT": "2s"},
              database_pool_size=1) as a:
        assert len(list(a.list())) == 0
        assert (a.store._pool.max_size, a.store._kwargs["connect_timeout"]) == (1, 2)
        assert a.store.spec() == a.store.spec().replace(pool_size=1, connect_timeout=2.0)
    # a server that accepts the connection and never answers: the timeout, not libpq's wait
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        silent = f"postgresql://awty@127.0.0.1:{mute.getsockname()[1]}/awty"
        started = time.monotonic()
        res = awty("list", "--home", str(tmp_path / "m"), "--database-url", silent,
                   env={"AWTY_DATABASE_CONNECT_TIMEOUT": "1s"})
        took = time.monotonic() - started
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert "timeout expired" in res.stderr and took < 20  # (libpq's default: wait for ever)
