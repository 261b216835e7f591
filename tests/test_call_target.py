"""``add --call module:function`` checks at add time that the module can be found from the
directory ``add`` runs in (the directory the worker puts first on ``sys.path``) and that each
name is a Python name, without importing anything: a typo is exit 2 now, not a failed job in
three hours. The real ``awty`` script, run from a directory holding (or not) the module."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awty.errors import InvalidInput
from helpers import db_rows

AWTY = str(Path(sys.executable).parent / "awty")


@pytest.fixture
def app_dir(tmp_path):
    """An application directory with a package whose import leaves a mark."""
    d = tmp_path / "app"
    (d / "myapp").mkdir(parents=True)
    mark = "import pathlib; pathlib.Path(__file__).with_suffix('.imported').touch()\n"
    (d / "myapp" / "__init__.py").write_text(mark)
    (d / "myapp" / "checks.py").write_text(mark + "def order_shipped(job):\n    return None\n")
    (d / "single.py").write_text(mark + "def f(job):\n    return None\n")
    return d


def add(home, cwd, target, *extra):
    return subprocess.run([AWTY, "add", target, "--call", "--in", "5m", *extra],
                          capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, "AWTY_HOME": str(home)})


@pytest.mark.parametrize("target", ["myapp.checks:order_shipped", "myapp:anything",
                                    "single:f", "json.decoder:JSONDecoder"])
def test_a_module_found_from_the_add_directory_is_accepted_unimported(home, app_dir, target):
    p = add(home, app_dir, target)
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    assert [r["target"] for r in db_rows(home, "future_job")] == [target]
    assert sorted(app_dir.rglob("*.imported")) == []  # not even the package's __init__


@pytest.mark.parametrize("target, module", [
    ("myapp.chekcs:order_shipped", "myapp.chekcs"),
    ("nosuch:f", "nosuch"),
    ("single.sub:f", "single.sub"),  # a module is not a package
    ("json.nosuch:f", "json.nosuch"),
])
def test_a_module_not_found_is_exit_2_naming_it_and_the_directory(home, app_dir, target,
                                                                  module):
    p = add(home, app_dir, target)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"awty: cannot find module {module} from {app_dir}\n"
    assert db_rows(home, "future_job") == []
    assert sorted(app_dir.rglob("*.imported")) == []


def test_the_directory_is_the_one_add_ran_in(home, app_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = add(home, elsewhere, "myapp.checks:order_shipped")
    assert p.returncode == 2
    assert p.stderr == f"awty: cannot find module myapp.checks from {elsewhere}\n"


@pytest.mark.parametrize("target, name", [("myapp.checks:class", "class"),
                                          ("myapp.import:f", "import"),
                                          ("myapp:f.None", "None")])
def test_a_name_that_is_not_a_python_name_is_refused(home, app_dir, target, name):
    p = add(home, app_dir, target)
    assert p.returncode == 2
    assert p.stderr == f"awty: target {target!r}: {name!r} is not a valid Python name\n"


def test_the_api_and_batch_lines_check_too(awty, app_dir, monkeypatch):
    monkeypatch.chdir(app_dir)
    assert awty.add("myapp.checks:order_shipped", kind="python", in_="1m").created
    with pytest.raises(InvalidInput, match=f"^cannot find module nope from {app_dir}$"):
        awty.add("nope:f", kind="python", in_="1m")
    with pytest.raises(InvalidInput, match="^line 2: cannot find module nope from /"):
        awty.add_many([{"target": "single:f", "kind": "python", "in": "1m"},
                       {"target": "nope:f", "kind": "python", "in": "1m", "cwd": "/"}])
    assert sorted(app_dir.rglob("*.imported")) == []
