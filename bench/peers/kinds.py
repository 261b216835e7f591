"""The peers awty is measured beside, each as its users run it: how it is installed (its own
venv under the bench's work directory, from PyPI; never an awty dependency), how one job and N
jobs are scheduled (each a process of its own, timed), and what fires them when they are due.

Two ways of being due: ``cron`` peers (awty, the naive runner) are started at the due moment,
as cron starts them, so "due" is the moment their process is started; ``daemon`` peers
(APScheduler, Huey, atd) are running when their jobs' time comes, so "due" is the time the jobs
were scheduled for (atd: a minute boundary, its finest)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..common import AWTY_SCRIPT, SECRET, SECRET_TEXT, clean_env, iso, run_proc, slot_at

DRIVERS = Path(__file__).resolve().parent / "drivers"


@dataclass
class Run:
    """What the bench needs to drive one peer run in directory ``d``."""

    d: Path
    n: int
    url: str
    due: float | None = None  # epoch, daemons only
    procs: list[subprocess.Popen] = field(default_factory=list)


class Peer:
    name = ""
    kind = "daemon"  # or "cron"
    how = ""
    requirements: Sequence[str] = ()
    signed = True

    def __init__(self, venvs: Path, workdir: Path, pg_url: str | None = None):
        self.venv = venvs / self.key
        self.workdir = workdir
        self.pg_given = pg_url  # --pg-url: the PostgreSQL peers' server

    @property
    def key(self) -> str:
        return type(self).__name__.lower()

    def unavailable(self) -> str | None:
        return None

    def versions(self) -> str:
        return ""

    # -- install ----------------------------------------------------------------------------
    def install(self, log) -> None:
        """A venv of its own with ``requirements`` from PyPI, reused while they are the same."""
        if not self.requirements:
            return
        marker = self.venv / "bench-requirements.txt"
        want = "\n".join(self.requirements)
        if marker.exists() and marker.read_text() == want:
            return
        shutil.rmtree(self.venv, ignore_errors=True)
        log(f"installing {self.name} into {self.venv} ({', '.join(self.requirements)})")
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([str(self.venv / "bin" / "pip"), "install", "-q",
                        "--disable-pip-version-check", *self.requirements], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        marker.write_text(want)

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def env(self, r: Run) -> dict[str, str]:
        return clean_env(PEER_SECRET=SECRET_TEXT, PEER_DIR=str(r.d), PYTHONPATH=str(DRIVERS))

    def driver(self, r: Run, *args: str, timeout: float) -> float:
        """Run the peer's driver script with ``args``; its wall seconds (process start
        included)."""
        p = run_proc([self.python, str(DRIVERS / self.script), *args], self.env(r),
                     self.workdir, timeout)
        if p.rc != 0:
            raise RuntimeError(f"{self.name} {args[0]} exited {p.rc}: {p.stderr.strip()[-300:]}")
        return p.wall

    script = ""

    # -- the three steps --------------------------------------------------------------------
    def schedule(self, r: Run, timeout: float) -> float:
        return self.driver(r, "schedule", str(r.d), r.url, str(r.n), str(r.due), timeout=timeout)

    def one(self, r: Run, timeout: float) -> float:
        return self.driver(r, "one", str(r.d), r.url, str(r.due or 4102444800),
                           timeout=timeout)

    def start(self, r: Run) -> None:
        """Start what fires the jobs (daemons: before they are due; cron: at the due moment)."""

    def cleanup(self, r: Run) -> None:
        from ..common import stop_proc

        for p in r.procs:
            stop_proc(p, 15)

    def popen(self, r: Run, cmd: list[str], env: dict[str, str]) -> None:
        from ..common import CHILDREN, die_with_parent

        log = open(r.d / f"{self.key}.log", "wb")
        p = subprocess.Popen(cmd, cwd=str(DRIVERS), env=env, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        log.close()
        CHILDREN.append(p)
        r.procs.append(p)


def _pip_version(py: str, dist: str) -> str:
    try:
        return subprocess.run([py, "-c", f"import importlib.metadata as m; "
                               f"print(m.version({dist!r}))"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


class Awty(Peer):
    name = "awty"
    kind = "cron"
    how = ("`awty add --batch FILE` (one process) schedules; `awty run-slot SLOT` as cron "
           "starts it (a whole CLI process, AWTY_NOW 5 s after the slot boundary) fires; "
           "defaults (concurrency 128, per-host cap as shipped), signed.")

    def slot(self) -> datetime:
        return slot_at(40)

    def awty_env(self, r: Run, now: datetime) -> dict[str, str]:
        return clean_env(AWTY_NOW=iso(now), AWTY_SIGNING_SECRET=SECRET_TEXT)

    def cli(self, r: Run, args: list[str], now: datetime, timeout: float) -> float:
        p = run_proc([str(AWTY_SCRIPT), *args, "--home", str(r.d / "home")],
                     self.awty_env(r, now), self.workdir, timeout)
        if p.rc != 0:
            raise RuntimeError(f"awty {args[0]} exited {p.rc}: {p.stderr.strip()[-300:]}")
        return p.wall

    def schedule(self, r: Run, timeout: float) -> float:
        import json

        slot = self.slot()
        batch = r.d / "batch.jsonl"
        with open(batch, "w") as f:
            for i in range(r.n):
                f.write(json.dumps({"target": r.url, "at": iso(slot), "entity": "order",
                                    "key": str(i),
                                    "payload": {"order": str(i), "status": "placed"}}) + "\n")
        now = slot - timedelta(hours=1)
        self.cli(r, ["init"], now, timeout)
        return self.cli(r, ["add", "--batch", str(batch)], now, timeout)

    def one(self, r: Run, timeout: float) -> float:
        now = self.slot() - timedelta(hours=2)
        if not (r.d / "home").exists():
            self.cli(r, ["init"], now, timeout)
        return self.cli(r, ["add", r.url, "--at", iso(self.slot() + timedelta(days=1))], now,
                        timeout)

    def start(self, r: Run) -> None:
        from awty.slots import slot_id

        self.popen(r, [str(AWTY_SCRIPT), "run-slot", slot_id(self.slot()), "--home",
                       str(r.d / "home")], self.awty_env(r, self.slot() + timedelta(seconds=5)))

    def versions(self) -> str:
        import awty

        return f"awty {awty.__version__}"


class _OnPostgres:
    """A peer whose jobs live in PostgreSQL: the bench's server (``--pg-url``, else the local
    one the pg section finds), a schema of its own per run, dropped after it."""

    pg_url: str | None = None
    pg_given: str | None
    key: str

    def pg_unavailable(self) -> str | None:
        from ..sections.pg import LOCAL_URLS, server_url

        try:
            self.pg_url = server_url(self.pg_given)
        except ImportError:
            return "psycopg is not installed in the bench's venv"
        if self.pg_url is None:
            return f"no PostgreSQL server answers at {self.pg_given or ' or '.join(LOCAL_URLS)}"
        self.tag = os.urandom(3).hex()  # other benches may share the server
        return None

    def schema(self, r: Run) -> str:
        return f"bench_{self.key}_{self.tag}_{r.d.name.rsplit('-', 1)[-1]}"

    def drop(self, r: Run) -> None:
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{self.schema(r)}" CASCADE')


class AwtyPostgres(_OnPostgres, Awty):
    name = "awty (PostgreSQL)"
    how = ("as awty, on a PostgreSQL home (`database_url`, a schema of its own; the server on "
           "these same cores): `awty add --batch FILE` schedules, `awty run-slot SLOT` fires.")

    def unavailable(self) -> str | None:
        return self.pg_unavailable()

    def awty_env(self, r: Run, now: datetime) -> dict[str, str]:
        assert self.pg_url is not None
        return {**super().awty_env(r, now), "AWTY_DATABASE_URL": self.pg_url,
                "AWTY_DATABASE_SCHEMA": self.schema(r)}

    def cleanup(self, r: Run) -> None:
        super().cleanup(r)
        self.drop(r)


class Procrastinate(_OnPostgres, Peer):
    name = "procrastinate"
    script = "procr.py"
    requirements = ("procrastinate>=3", "aiohttp>=3.9")
    how = ("bench/peers/drivers/procr.py: procrastinate on PostgreSQL (PsycopgConnector, a "
           "schema of its own per run; the server on these same cores), jobs deferred with "
           "`schedule_at` in one `batch_defer` by a process of their own, fired by "
           "`procrastinate --app=procr.app worker --concurrency 20` (async tasks run at once "
           "in its event loop; polling interval and listen/notify at their defaults: jobs "
           "scheduled ahead are found by polling, every 5 s); each task posts with aiohttp "
           "(one session per worker); signed.")

    def unavailable(self) -> str | None:
        return self.pg_unavailable()

    def env(self, r: Run) -> dict[str, str]:
        assert self.pg_url is not None
        return {**super().env(r), "PEER_PG_URL": self.pg_url, "PEER_PG_SCHEMA": self.schema(r)}

    def _setup(self, r: Run, timeout: float) -> None:
        """The run's schema, made once and untimed (as `awty init` is for awty)."""
        made = r.d / "schema-made"
        if not made.exists():
            self.driver(r, "setup", str(r.d), timeout=timeout)
            made.touch()

    def schedule(self, r: Run, timeout: float) -> float:
        self._setup(r, timeout)
        return super().schedule(r, timeout)

    def one(self, r: Run, timeout: float) -> float:
        self._setup(r, timeout)
        return super().one(r, timeout)

    def start(self, r: Run) -> None:
        self.popen(r, [str(self.venv / "bin" / "procrastinate"), "--app=procr.app", "worker",
                       "--concurrency", "20"], self.env(r))

    def cleanup(self, r: Run) -> None:
        super().cleanup(r)
        self.drop(r)

    def versions(self) -> str:
        return (f"procrastinate {_pip_version(self.python, 'procrastinate')}, aiohttp "
                f"{_pip_version(self.python, 'aiohttp')}, psycopg "
                f"{_pip_version(self.python, 'psycopg')}")


class Naive(Peer):
    name = "naive cron + SQL"
    kind = "cron"
    script = "naive.py"
    requirements = ("requests>=2.31",)
    how = ("bench/peers/drivers/naive.py: rows (id, url, due) in SQLite (WAL); the run cron "
           "would start SELECTs the due rows, POSTs them with 20 threads (requests, one "
           "Session per thread), then DELETEs them; signed.")

    def start(self, r: Run) -> None:
        self.popen(r, [self.python, str(DRIVERS / self.script), "run", str(r.d)], self.env(r))

    def versions(self) -> str:
        return f"requests {_pip_version(self.python, 'requests')}"


class APScheduler(Peer):
    name = "APScheduler 3"
    script = "aps.py"
    requirements = ("apscheduler>=3.10,<4", "sqlalchemy>=2", "requests>=2.31")
    how = ("bench/peers/drivers/aps.py: SQLAlchemyJobStore on SQLite, ThreadPoolExecutor(20) "
           "(the user guide's configuration), misfire_grace_time None, coalesce off; jobs "
           "added with `date` triggers by a process of their own (scheduler started paused), "
           "fired by a BlockingScheduler process started after them; each job posts with "
           "requests (one Session per thread); signed.")

    def start(self, r: Run) -> None:
        self.popen(r, [self.python, str(DRIVERS / self.script), "run", str(r.d)], self.env(r))

    def versions(self) -> str:
        return (f"APScheduler {_pip_version(self.python, 'apscheduler')}, SQLAlchemy "
                f"{_pip_version(self.python, 'sqlalchemy')}")


class Huey(Peer):
    name = "Huey"
    script = "huey_add.py"
    requirements = ("huey>=2.5", "requests>=2.31")
    how = ("bench/peers/drivers/hueyapp.py and huey_add.py: SqliteHuey (WAL, its default), "
           "tasks scheduled with `task.schedule(eta=…)` by a process of their own, consumed by "
           "`huey_consumer hueyapp.huey -k thread -w 20` (thread workers, one of the two "
           "worker types its docs suggest for I/O-bound tasks; polling and scheduler interval at their defaults: "
           "workers poll from 0.1 s backing off ×1.15 to 10 s, the schedule is read every "
           "second); each task posts with requests; signed.")

    def start(self, r: Run) -> None:
        self.popen(r, [str(self.venv / "bin" / "huey_consumer"), "hueyapp.huey", "-k",
                       "thread", "-w", "20"], self.env(r))

    def versions(self) -> str:
        return f"Huey {_pip_version(self.python, 'huey')}"


class At(Peer):
    name = "at"
    how = ("`at -t` from the `at` package (atd), one job per callback, each a shell "
           "command: `openssl dgst -hmac` signs, `curl` posts (a new process per job: what "
           "`at` offers); scheduled by a shell loop of `at` calls, due at a minute boundary "
           "(atd's finest); the jobs left after a run that did not finish are removed by their "
           "ids (nobody else's).")

    def unavailable(self) -> str | None:
        for tool in ("at", "atq", "atrm", "curl", "openssl"):
            if not shutil.which(tool):
                return f"`{tool}` is not installed"
        if not _atd_running():
            return "atd is not running"
        return None

    def versions(self) -> str:
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "at"],
                                 capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        return f"at {out or '?'}"

    def _job(self, r: Run, key: str) -> str:
        body = ('{"id": "%s", "payload": {"order": "%s", "status": "placed"}}' % (key, key))
        hexkey = SECRET.hex()
        return (f"b={shlex.quote(body)}; ts=$(date +%s); "
                f"sig=$(printf '%s' \"{key}.$ts.$b\" | openssl dgst -sha256 -mac HMAC "
                f"-macopt hexkey:{hexkey} -binary | base64); "
                f"curl -s -o /dev/null -H 'Content-Type: application/json' "
                f"-H 'webhook-id: {key}' -H \"webhook-timestamp: $ts\" "
                f"-H \"webhook-signature: v1,$sig\" --data \"$b\" {shlex.quote(r.url)}")

    def _script(self, r: Run, keys: Sequence[str], due: float) -> Path:
        when = datetime.fromtimestamp(due, UTC).astimezone().strftime("%Y%m%d%H%M.%S")
        path = r.d / f"at-{len(keys)}.sh"
        with open(path, "w") as f:
            for k in keys:
                f.write(f"at -t {when} 2>>{shlex.quote(str(self._ids(r)))} <<'EOF'\n"
                        f"{self._job(r, k)}\nEOF\n")
        return path

    @staticmethod
    def _ids(r: Run) -> Path:
        return r.d / "at-jobs.txt"  # what `at` says on stderr: "job 12 at …"

    def _sh(self, path: Path, timeout: float) -> float:
        p = run_proc(["/bin/sh", str(path)], clean_env(), self.workdir, timeout)
        if p.rc != 0:
            raise RuntimeError(f"at exited {p.rc}: {p.stderr.strip()[-300:]}")
        return p.wall

    def schedule(self, r: Run, timeout: float) -> float:
        return self._sh(self._script(r, [str(i) for i in range(r.n)], r.due), timeout)

    def one(self, r: Run, timeout: float) -> float:
        # one `at` call, timed alone (the far-future job is removed at once)
        import time

        t0 = time.perf_counter()
        p = subprocess.run(["at", "-t", "209901010000"], input=self._job(r, "one"), text=True,
                           capture_output=True, env=clean_env(), timeout=timeout)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"at exited {p.returncode}: {p.stderr.strip()[-300:]}")
        with open(self._ids(r), "a") as f:
            f.write(p.stderr)
        self.cleanup(r)
        return wall

    def cleanup(self, r: Run) -> None:
        try:
            ours = {w[1] for w in (line.split() for line in self._ids(r).read_text().splitlines())
                    if len(w) > 1 and w[0] == "job"}
        except OSError:
            return
        queued = {line.split()[0] for line in subprocess.run(
            ["atq"], capture_output=True, text=True, timeout=60).stdout.splitlines()
            if line.strip()}
        jobs = sorted(ours & queued)
        for i in range(0, len(jobs), 500):
            subprocess.run(["atrm", *jobs[i:i + 500]], capture_output=True, timeout=60)


def _atd_running() -> bool:
    for pidfile in ("/run/atd.pid", "/var/run/atd.pid"):
        try:
            pid = int(Path(pidfile).read_text().split()[0])
            os.kill(pid, 0)
            return True
        except (OSError, ValueError, IndexError):
            continue
    try:
        return subprocess.run(["pidof", "atd"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


PEERS = (Awty, AwtyPostgres, Procrastinate, Naive, APScheduler, Huey, At)
