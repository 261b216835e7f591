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
    install = readme[readme.index("## Quick start"):readme.index("## Using it")]
    assert "pip install 'awty[postgres]'" in install
