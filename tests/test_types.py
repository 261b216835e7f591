"""The Python API is typed (issue 15 item 9): mypy passes on ``awty/`` with the settings in
pyproject.toml (strict, every module, no override), and ``mypy --strict`` passes on a user
program calling the API, which also runs and does what it says."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import awty
from awty import Awty
from awty.api import AddResult

ROOT = Path(__file__).resolve().parent.parent
USER_PROGRAM = ROOT / "tests" / "typing" / "user_program.py"


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    # From the repository root, so that pyproject.toml's [tool.mypy] applies.
    return subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_package_type_checks():
    p = mypy()  # files = ["awty"] in pyproject.toml
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Success: no issues found" in p.stdout


@pytest.mark.slow
def test_user_program_passes_mypy_strict():
    p = mypy("--strict", str(USER_PROGRAM))
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_catches_a_mistake_in_a_user_program(tmp_path):
    # The check above could pass by seeing only Any: a wrong use must fail it.
    bad = tmp_path / "bad.py"
    bad.write_text("from awty import Awty\n\n"
                   "def f(a: Awty) -> int:\n"
                   "    return a.add('http://127.0.0.1:9/x', in_='1h').job.id\n")
    p = mypy("--strict", str(bad))
    assert p.returncode == 1, p.stdout + p.stderr
    assert 'Incompatible return value type (got "str", expected "int")' in p.stdout


def _load_user_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("user_program", USER_PROGRAM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_user_program_runs(tmp_path):
    seen = _load_user_program().main(str(tmp_path))
    # in_=timedelta(minutes=30) from 12:00: the 12:30 slot
    assert seen[0].endswith("slot=2030-01-01T12:30:00+00:00")
    # a str id is one id, a list several: two jobs cancelled, not one per character
    assert "cancelled 2" in seen
    assert "get as JSON True" in seen and "cancel as JSON True 1" in seen
    assert "history 2: ['cancelled', 'cancelled']" in seen
    assert "rescheduled to 2030-01-01T13:00:00+00:00" in seen
    assert "run_slot dry_run=True" in seen
    assert "invalid input refused" in seen


def test_durations_accept_timedelta_seconds_and_text(tmp_path):
    from datetime import UTC, datetime, timedelta

    clock = awty.FixedClock(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
    with Awty(tmp_path, clock=clock) as a:
        slots = {a.add("http://127.0.0.1:9/x", in_=v, timeout=timedelta(seconds=5),
                       horizon=timedelta(days=1)).job.next_check_at
                 for v in (timedelta(hours=2), 7200, 7200.0, "2h", "PT2H")}
        assert slots == {datetime(2030, 1, 1, 14, 0, tzinfo=UTC)}
        job = a.list().__next__()
        assert job.timeout == 5 and job.horizon == 86400


def test_fixed_clock_and_result_types_are_exported():
    from awty.clock import FixedClock
    from awty.model import CancelResult, HistoryRow, SlotSummary, StoreStats

    assert awty.FixedClock is FixedClock
    assert awty.AddResult is AddResult
    assert (awty.CancelResult, awty.HistoryRow, awty.SlotSummary, awty.StoreStats) == (
        CancelResult, HistoryRow, SlotSummary, StoreStats)
    for name in awty.__all__:
        getattr(awty, name)  # every advertised name resolves


def test_every_public_method_of_awty_has_a_docstring():
    missing = [name for name, member in inspect.getmembers(Awty)
               if not name.startswith("_")
               and (inspect.isfunction(member) or isinstance(member, property))
               and not inspect.getdoc(member)]
    assert missing == []
    assert Awty.__doc__ and AddResult.__doc__
