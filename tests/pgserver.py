"""A PostgreSQL server for tests: a fresh database per test session on the local server, or a
throw-away cluster started with ``initdb``/``pg_ctl`` on a unix socket in a temp dir.

``session_database()`` is what the store fixtures use; ``Cluster`` is also used directly by
tests that must restart the server (never the shared local server).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

# Where a local server usually answers (trust auth, as on CI and the dev machines).
_LOCAL_URLS = (
    "postgresql://postgres@/test?host=/var/run/postgresql",
    "postgresql://postgres@127.0.0.1:5432/test",
    "postgresql://root@127.0.0.1:5432/test",
)


class NoServer(Exception):
    """Neither the local server nor a throw-away cluster could be used."""


def _answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as c:
            c.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _with_db(url: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(url), "dbname": dbname})


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / name).exists():
            return str(d / name)
    return None


class Cluster:
    """A PostgreSQL cluster of our own in a temp dir, listening on a unix socket only."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if not initdb or not self.pg_ctl:
            raise NoServer("initdb/pg_ctl not found")
        self.dir = Path(tempfile.mkdtemp(prefix="awty-pg-"))
        self.data = self.dir / "data"
        self.socket = self.dir / "sock"
        self.socket.mkdir()
        run_as = _unprivileged()
        if run_as:
            shutil.chown(self.dir, run_as)
            shutil.chown(self.socket, run_as)
        self._run([initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres",
                   "--no-sync", "-E", "UTF8"], run_as)
        self._run_as = run_as
        self.url = f"postgresql://postgres@/postgres?host={self.socket}"

    @staticmethod
    def _run(cmd: list[str], user: str | None) -> None:
        if user:
            cmd = ["runuser", "-u", user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            raise NoServer(f"{' '.join(cmd)}: {(out.stderr or out.stdout).strip()[-300:]}")

    def _ctl(self, *args: str) -> None:
        opts = f"-k {self.socket} -c listen_addresses='' -c fsync=off"
        self._run([self.pg_ctl, "-D", str(self.data), "-w", "-t", "30", "-o", opts,
                   "-l", str(self.dir / "log"), *args], self._run_as)

    def start(self) -> Cluster:
        self._ctl("start")
        return self

    def stop(self) -> None:
        self._ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def destroy(self) -> None:
        try:
            self.stop()
        except NoServer:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def _unprivileged() -> str | None:
    """initdb refuses to run as root: run the cluster as the postgres user when we are root."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise NoServer("running as root and no unprivileged user to run initdb")


class SessionDatabase:
    """A database created for one test session, dropped at its end."""

    def __init__(self) -> None:
        import psycopg

        self.cluster: Cluster | None = None
        admin = next((u for u in _LOCAL_URLS if _answers(u)), None)
        if admin is None:
            try:
                self.cluster = Cluster().start()
            except NoServer:
                raise
            admin = self.cluster.url
        self.admin = admin
        self.name = f"awty_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{self.name}"')
        self.url = _with_db(admin, self.name)

    def drop(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.admin, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            if self.cluster:
                self.cluster.destroy()


def unavailable(reason: str) -> str:
    return (f"PostgreSQL tests need a server: {reason}. Start the local server "
            "(127.0.0.1:5432, trust auth) or install initdb/pg_ctl.")


def own_cluster():
    """For a fixture (``yield from``): a cluster of the test's own, destroyed afterwards, so
    that restarting it never disturbs the shared local server; the test fails, saying why,
    when none can be started."""
    import pytest

    try:
        c = Cluster().start()
    except NoServer as e:
        pytest.fail(unavailable(str(e)), pytrace=False)
    try:
        yield c
    finally:
        c.destroy()
