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
        self._files()
        run_as = _unprivileged()
        if run_as:
            for p in (self.dir, *self.dir.iterdir()):
                shutil.chown(p, run_as)
        self._run([initdb, "-D", str(self.data), *self._auth(), "-U", "postgres",
                   "--no-sync", "-E", "UTF8"], run_as)
        self._run_as = run_as
        self.url = f"postgresql://postgres@/postgres?host={self.socket}"

    def _files(self) -> None:
        """Files the cluster needs in its directory before initdb (owned by its user)."""

    def _auth(self) -> tuple[str, ...]:
        return ("-A", "trust")

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


def _pgbouncer() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).exists()), None)


class Bouncer:
    """PgBouncer (when installed) in front of a database of the session's server, listening on
    127.0.0.1 in the given ``pool_mode``: what a pooler does to session advisory locks."""

    def __init__(self, url: str, mode: str) -> None:
        import socket
        import time

        from psycopg.conninfo import conninfo_to_dict

        exe = _pgbouncer()
        if exe is None:  # install it once, as the browser tests do Chromium
            import debpkg

            try:
                debpkg.install("pgbouncer")
            except debpkg.NotInstalled as e:
                raise NoServer(f"pgbouncer not found and not installed: {e}") from None
            exe = _pgbouncer()
        if exe is None:
            raise NoServer("pgbouncer not found")
        d = conninfo_to_dict(url)
        self.dir = Path(tempfile.mkdtemp(prefix="awty-bouncer-"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        user = d.get("user", "postgres")
        (self.dir / "users.txt").write_text(f'"{user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{d['dbname']} = host={d.get('host', '127.0.0.1')} port={d.get('port', 5432)} "
            f"dbname={d['dbname']} user={user}\n"
            "[pgbouncer]\nlisten_addr = 127.0.0.1\n"
            f"listen_port = {port}\nunix_socket_dir =\nauth_type = trust\n"
            f"auth_file = {self.dir / 'users.txt'}\npool_mode = {mode}\n"
            # a pool of 2 in transaction mode: awty's own connections share it (what the
            # refusal is about); a session mode pool as a server's, room for every connection
            f"default_pool_size = {2 if mode == 'transaction' else 20}\n"
            "ignore_startup_parameters = options,extra_float_digits\n"
            f"logfile = {self.dir / 'log'}\npidfile = {self.dir / 'pid'}\n")
        cmd = [exe, str(self.dir / "pgbouncer.ini")]
        run_as = "postgres" if os.geteuid() == 0 else None
        if run_as:
            shutil.chown(self.dir, run_as)
            for f in self.dir.iterdir():
                shutil.chown(f, run_as)
            cmd[1:1] = ["-u", run_as]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise NoServer("pgbouncer did not start") from None
                time.sleep(0.05)
        self.url = f"postgresql://{user}@127.0.0.1:{port}/{d['dbname']}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class SecureCluster(Cluster):
    """A throw-away cluster that asks for a password (scram-sha-256) and speaks TLS on
    127.0.0.1 with a certificate of ``ca`` (a trustme CA): what libpq's sslmode, sslrootcert,
    PGPASSWORD and PGPASSFILE are for."""

    def __init__(self, password: str, ca) -> None:
        import socket

        self.password, self.ca = password, ca
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        super().__init__()

    def _auth(self) -> tuple[str, ...]:
        return ("-A", "scram-sha-256", f"--pwfile={self.dir / 'pw'}")

    def _files(self) -> None:
        (self.dir / "pw").write_text(self.password + "\n")
        cert = self.ca.issue_cert("127.0.0.1", "localhost")
        cert.cert_chain_pems[0].write_to_path(str(self.dir / "server.crt"))
        cert.private_key_pem.write_to_path(str(self.dir / "server.key"))
        os.chmod(self.dir / "server.key", 0o600)

    def _ctl(self, *args: str) -> None:
        opts = (f"-k {self.socket} -c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c fsync=off -c ssl=on -c ssl_cert_file={self.dir / 'server.crt'} "
                f"-c ssl_key_file={self.dir / 'server.key'}")
        self._run([self.pg_ctl, "-D", str(self.data), "-w", "-t", "60", "-o", opts,
                   "-l", str(self.dir / "log"), *args], self._run_as)
