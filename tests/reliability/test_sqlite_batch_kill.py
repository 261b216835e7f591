"""A large ``add --batch`` on SQLite is inserted by a writer thread while it is validated
(``SQLiteStore.add_chunks``): a process SIGKILLed with that thread at work stores none of
its batch and writes no envelope, and the same file then adds whole."""

from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from awty import api
from awty.api import Awty
from awty.clock import FixedClock
from helpers import T0
from relkit import cli_env, run_cli, spawn, wait_until, write_batch


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_batch_killed_mid_insert_stores_nothing(home, backend, tmp_path):
    n = 6 * api._CHUNK
    path = tmp_path / "batch.jsonl"
    write_batch(path, ({"target": "http://127.0.0.1:9/cb", "in": f"{1 + i % 90}m",
                        "payload": {"i": i}, "entity": "order", "key": str(i)}
                       for i in range(n)))
    env = cli_env(home, T0)
    assert run_cli(["init"], env).returncode == 0

    def writing(pid: int) -> bool:
        # the writer thread exists once the first chunk is handed to it, and the add's
        # transaction holds the write lock
        try:
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except FileNotFoundError:
            return False
        if threads < 2:
            return False
        c = sqlite3.connect(home / "awty.db", timeout=0, isolation_level=None)
        try:
            c.execute("BEGIN IMMEDIATE")
            c.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            c.close()

    def held() -> tuple[int, list[str]]:
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            return a.count(), [f for _, _, fs in os.walk(home / "slots") for f in fs]

    for _ in range(2):
        proc = spawn(["add", "--batch", str(path)], env)
        hit = wait_until(lambda: writing(proc.pid), 60, 0.001)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert hit, "the insert was never seen under way"
        assert held() == (0, [])
    p = run_cli(["add", "--batch", str(path)], env)
    assert p.returncode == 0, p.stderr
    count, files = held()
    assert count == n and files
