"""docs/several-hosts.md (linked from README), followed as a newcomer would: every command of
its step-by-step blocks is run as written (the example URL and callback replaced by the test's),
on a real PostgreSQL server, with two hosts (two homes) and a receiver. Cron's line is taken
from the crontab `awty crontab --install` wrote and run as cron runs it: with no AWTY_*
variable, so only what init kept in awty.toml points it at the database.

The `pip install` step is checked against pyproject.toml's extras (the suite runs with them
installed) rather than run."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from helpers import pg_url

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "several-hosts.md").read_text()
EXAMPLE_URL = "postgresql://awty@db.internal/awty"
EXAMPLE_HOOK = "https://app.internal/hooks/order"
ADD_AT = "2026-11-22T10:07:12Z"
FIRE_AT = "2026-11-22T12:15:05Z"  # the slot of a job added at ADD_AT --in 2h has passed


def steps() -> list[list[str]]:
    """The commands of the guide's step blocks, a list per block, in order."""
    section = GUIDE[GUIDE.index("# Running on several hosts"):]
    section = section[:section.index("What each step does, in detail")]
    blocks = re.findall(r"^```text\n(.*?)^```", section, flags=re.S | re.M)
    return [[ln.strip() for ln in b.splitlines() if ln.strip()] for b in blocks]


def test_the_steps_are_the_ones_this_test_follows():
    assert steps() == [
        ["pip install 'awty[postgres]'"],
        [f"awty init --database-url {EXAMPLE_URL}"],
        ["awty crontab --install"],
        [f"awty add {EXAMPLE_HOOK} --in 2h --payload '{{\"order\": 42}}'"],
        ["awty doctor"],
        [f"awty export --move {EXAMPLE_URL} --output home.jsonl",
         f"awty init --database-url {EXAMPLE_URL}", "awty import home.jsonl"],
    ]


@pytest.fixture
def schemas(pg_database):
    names = [f"hosts_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    yield names
    import psycopg

    with psycopg.connect(pg_database.url, autocommit=True) as c:
        for name in names:
            c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.slow
def test_a_newcomer_follows_the_steps_on_two_hosts(tmp_path, pg_database, schemas, rx,
                                                   fake_crontab):
    url = pg_url(pg_database.url)
    schema, moved_schema = schemas
    install, init, cron, add, doctor, move = steps()
    host_a, host_b, old = tmp_path / "host-a", tmp_path / "host-b", tmp_path / "old-home"
    work = tmp_path / "work"
    work.mkdir()

    def run(line: str, home: Path, *, env: dict[str, str] | None = None,
            schema_of_home: str = schema) -> subprocess.CompletedProcess[str]:
        line = line.replace(EXAMPLE_URL, url).replace(EXAMPLE_HOOK, rx.url("/hooks/order"))
        args = shlex.split(line)
        assert args[0] == "awty"
        res = subprocess.run(
            [sys.executable, "-m", "awty", *args[1:]], capture_output=True, text=True,
            cwd=work, timeout=120, env={**os.environ, "AWTY_HOME": str(home),
                                        "AWTY_DATABASE_SCHEMA": schema_of_home, **(env or {})})
        assert res.returncode == 0, (line, home.name, res.stdout, res.stderr)
        return res

    # 1. the extra the step names is the package's, with the driver and its pool
    [pip] = install
    extra = re.fullmatch(r"pip install 'awty\[(\w+)\]'", pip).group(1)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"][extra]
    assert {d.split(">=")[0] for d in deps} == {"psycopg[binary]", "psycopg-pool"}
    # 2. each host, once: the first creates the schema and the cluster's signing secret,
    # which the next host's home gets (0600) before its init
    for home in (host_a, host_b):
        if home is host_b:
            home.mkdir(mode=0o700)
            (home / "signing.secret").write_bytes((host_a / "signing.secret").read_bytes())
            (home / "signing.secret").chmod(0o600)
        done = run(init[0], home)
        assert "unsigned" not in done.stderr, done.stderr
        kept = tomllib.loads((home / "awty.toml").read_text())
        assert kept == {"database_url": url, "database_schema": schema,
                        "signing_secret_file": str(home / "signing.secret")}
    # 3. host A runs the slots
    run(cron[0], host_a)
    table = fake_crontab.read_text()
    [slot_line] = [ln for ln in table.splitlines() if " run-slot " in ln]
    assert f'# jobs in {url}, schema "{schema}"' in table
    # 4. host B adds
    run(add[0], host_b, env={"AWTY_NOW": ADD_AT})
    # cron on host A, as cron runs the line: a shell, no AWTY_* in its environment
    command = slot_line.split(None, 5)[5]
    fired = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                           timeout=120, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                                             "AWTY_NOW": FIRE_AT})
    assert fired.returncode == 0, fired.stderr
    [request] = rx.requests("/hooks/order")
    assert json.loads(request.body)["payload"] == {"order": 42}
    assert request.signature_error((host_b / "signing.secret").read_text().strip()) is None
    assert not (host_a / "awty.db").exists() and not (host_b / "awty.db").exists()
    # 5. doctor on the runner host: all good
    checked = run(doctor[0], host_a, env={"AWTY_NOW": FIRE_AT})
    assert "all good" in checked.stdout, checked.stdout
    # 6. an existing SQLite home (no database_url yet) moves onto its own schema
    subprocess.run([sys.executable, "-m", "awty", "add", rx.url("/left"), "--in", "3h",
                    "--home", str(old)], check=True, capture_output=True, timeout=120)
    for line in move:
        run(line, old, schema_of_home=moved_schema)
    listed = run("awty list --json", old, schema_of_home=moved_schema)
    assert [j["target"] for j in json.loads(listed.stdout)] == [rx.url("/left")]
    fenced = subprocess.run([sys.executable, "-m", "awty", "add", rx.url("/x"), "--in", "1h",
                             "--home", str(old), "--database-url", ""],
                            capture_output=True, text=True, timeout=120)
    assert fenced.returncode == 1 and "this home moved to" in fenced.stderr
