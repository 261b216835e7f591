"""The ``store`` fixture: every contract test runs once per store (SQLite, PostgreSQL), each on
a fresh store (a temp SQLite file; a fresh schema in the database ``pg_database``, in
tests/conftest.py, makes per test session)."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # contractkit

HOLDER = Path(__file__).with_name("holder.py")


@dataclass
class Case:
    """How to open (another connection to) the store under test."""

    kind: str  # "sqlite" | "postgres"
    where: str  # database file, or PostgreSQL URL
    schema: str | None = None

    def open(self, create: bool = False):
        return open_store(self.kind, self.where, self.schema, create=create)

    def hold(self, owner: str) -> Holder:
        """A real child process holding ``owner``'s session (an alive owner)."""
        return Holder(self, owner)


def open_store(kind: str, where: str, schema: str | None, *, create: bool = False):
    from awty import store

    # The contract tests move time by hand (the `now` of each call): leases in their time.
    # tests/store/test_postgres.py checks the database's own clock, what runners use.
    return store.open(store.StoreSpec(kind, where, schema or "awty", lease_clock="caller"),
                      mode="init" if create else "use")


class Holder:
    def __init__(self, case: Case, owner: str):
        self.owner = owner
        args = [sys.executable, str(HOLDER), case.kind, case.where, case.schema or "", owner]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline().strip()
        if line != "holding":
            self.proc.kill()
            raise RuntimeError(f"holder did not start: {line!r}")

    def kill(self) -> None:
        """SIGKILL: the owner dies without a chance to clean up."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(params=["sqlite", "postgres"])
def case(request, tmp_path) -> Case:
    if request.param == "sqlite":
        yield Case("sqlite", str(tmp_path / "awty.db"))
        return
    db = request.getfixturevalue("pg_database")
    yield Case("postgres", db.url, request.getfixturevalue("pg_schema"))


@pytest.fixture
def store(case):
    s = case.open(create=True)
    yield s
    s.close()


@pytest.fixture
def holders():
    """Holders started by a test, stopped after it whatever happened."""
    started: list[Holder] = []
    yield started
    for h in started:
        h.stop()
