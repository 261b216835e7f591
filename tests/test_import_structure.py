"""The shape of awty's imports, read from the source with ``ast`` (issue 13): no import cycle
anywhere in ``awty/``, and nothing below the command line imports it.

An edge A -> B is any ``import`` statement in A naming B, wherever it sits: at the top, inside
a function (a lazy import is still a dependency), or under ``if TYPE_CHECKING``.
``from P import name`` names the module ``P.name`` when that is a module, else ``P``. The
parent packages Python imports on the way are not edges: ``awty.cli.jobs`` importing
``awty.cli.options`` does not make it depend on ``awty/cli/__init__.py``."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

AWTY = Path(__file__).resolve().parent.parent / "awty"

# `python -m awty`: the program's entry point, above the CLI, imported by nothing.
ENTRY_POINTS = {"awty.__main__"}


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return found


def parse(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per text for the whole module (every rule here reads
    the same ~150 files; the checkers only read the trees)."""
    return _parse(path.read_text(), str(path))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def import_statements(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every ``import`` statement in ``path``, wherever it sits (walked once per text)."""
    return _import_statements(path.read_text(), str(path))


@functools.cache
def _import_statements(text: str, filename: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    return tuple(n for n in ast.walk(_parse(text, filename))
                 if isinstance(n, ast.Import | ast.ImportFrom))


def import_graph(root: Path = AWTY) -> dict[str, set[str]]:
    mods = modules(root)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        edges = set()
        for node in import_statements(path):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, is_pkg, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    edges.add(sub if sub in mods else base)
        graph[name] = {e for e in edges if e in mods and e != name}
    return graph


def _absolute(importer: str, is_pkg: bool, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    parts = importer.split(".") if is_pkg else importer.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def importers_of(graph: dict[str, set[str]], package: str) -> dict[str, list[str]]:
    """Modules outside ``package`` importing it or anything in it, with what they import."""
    def inside(module: str) -> bool:
        return module == package or module.startswith(package + ".")

    return {m: sorted(e for e in edges if inside(e)) for m, edges in graph.items()
            if not inside(m) and any(inside(e) for e in edges)}


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_nothing_below_the_cli_imports_it():
    graph = import_graph()
    assert "awty.cli" in graph and "awty.cli.jobs" in graph  # the package is where we look
    outside = importers_of(graph, "awty.cli")
    assert set(outside) <= ENTRY_POINTS, {m: outside[m] for m in set(outside) - ENTRY_POINTS}


# What stands above one slot's run (``awty/run/``): the facade that opens it, and what calls the
# facade. Everything else is below it: the run uses it, never the other way.
ABOVE_THE_RUN = ("awty.api", "awty.cli", "awty.serve")


def test_nothing_below_the_run_imports_it():
    graph = import_graph()
    assert "awty.run.runner" in graph and "awty.run.storeproc" in graph
    outside = importers_of(graph, "awty.run")
    below = {m for m in outside if m not in ENTRY_POINTS
             and not any(m == a or m.startswith(a + ".") for a in ABOVE_THE_RUN)}
    assert not below, {m: outside[m] for m in sorted(below)}


def test_a_jobs_attempts_never_import_the_runner_or_the_catch_up():
    """``attempts`` executes a job from settings, a clock and an executor factory: the one
    slot's run and the catch-up are built on it, never the other way."""
    graph = import_graph()
    assert not graph["awty.run.attempts"] & {"awty.run.runner", "awty.run.catchup"}
    assert "awty.run.runner" not in graph["awty.run.catchup"]


def test_nothing_in_awty_imports_the_test_receiver():
    """``awty.testing`` is shipped for tests and local trials; the product never uses it. The
    one door: ``awty receiver`` runs it (a pipx install has no other way to start it)."""
    graph = import_graph()
    assert "awty.testing.receiver" in graph
    assert importers_of(graph, "awty.testing") == {
        "awty.cli.receiver": ["awty.testing.receiver"]}


# --- the checker itself ----------------------------------------------------------------------
def test_the_checker_finds_a_cycle_and_a_forbidden_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e.f"}, "e.f": set(),
             "awty.x": {"awty.cli.jobs"}, "awty.cli.jobs": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert importers_of(graph, "awty.cli") == {"awty.x": ["awty.cli.jobs"]}


def test_the_checker_reads_lazy_relative_imports(tmp_path):
    pkg = tmp_path / "awty"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def f():\n    from .sub import mod\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("from typing import TYPE_CHECKING\n"
                                        "if TYPE_CHECKING:\n    from .. import other\n")
    (pkg / "other.py").write_text("import awty.sub.mod\nfrom . import __version__\n")
    graph = import_graph(pkg)
    assert graph == {"awty": {"awty.sub.mod"}, "awty.sub": set(),
                     "awty.sub.mod": {"awty.other"}, "awty.other": {"awty.sub.mod", "awty"}}
    assert cycles(graph) == [["awty", "awty.other", "awty.sub.mod"]]


# --- the layers of issue 14 ---------------------------------------------------------------------
# The pure core, lowest first: each imports only the standard library and modules before it.
CORE = ["awty._version", "awty.errors", "awty.record", "awty.model", "awty.ids", "awty.clock", "awty.slots",
        "awty.safeio", "awty.storable",
        "awty.config", "awty.policy"]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
SQL = re.compile(r"\b(SELECT\s+.+\s+FROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                 r"CREATE\s+(TABLE|INDEX)|PRAGMA\s+\w+)\b", re.S)


def external_imports(path: Path) -> set[str]:
    """Top-level names of the non-awty modules a file imports (absolute imports only)."""
    out = set()
    for node in import_statements(path):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"awty"}


def sql_strings(path: Path) -> list[str]:
    """String literals that read as SQL, docstrings left out."""
    tree = parse(path)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    return [n.value[:60] for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs and SQL.search(n.value)]


def test_core_modules_import_only_the_stdlib_and_lower_core():
    graph, mods = import_graph(), modules(AWTY)
    for i, name in enumerate(CORE):
        assert name in graph, name
        higher = graph[name] - set(CORE[:i])
        assert not higher, f"{name} imports {sorted(higher)}, not lower core"
        assert external_imports(mods[name][0]) <= STDLIB, name


# Pure time rules of recurring schedules: a claim re-arms a schedule in its own transaction
# (store/schedrules.py), so the store reads them; they import only the core themselves.
SCHEDULE_RULES = ["awty.when", "awty.localzone", "awty.recurrence", "awty.missed"]


def test_the_store_imports_only_the_core():
    graph = import_graph()
    for name in SCHEDULE_RULES:
        outside = graph[name] - set(CORE) - set(SCHEDULE_RULES)
        assert not outside, f"{name} imports {sorted(outside)}"
    for name, edges in graph.items():
        if name.startswith("awty.store"):
            bad = {e for e in edges if not e.startswith("awty.store") and e not in CORE
                   and e not in SCHEDULE_RULES}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_executors_never_import_the_store_the_slot_tree_or_the_runner():
    graph = import_graph()
    banned = ("awty.store", "awty.slottree", "awty.run")
    for name, edges in graph.items():
        if name.startswith("awty.executors"):
            bad = {e for e in edges if e.startswith(banned)}
            assert not bad, f"{name} imports {sorted(bad)}"


# The slot tree follows the store without knowing it: it imports only the core, and the store's
# answers reach it as values or functions. Above it, what keeps a home's files in step.
ABOVE_THE_SLOT_TREE = ("awty.run", "awty.api", "awty.doctor", "awty.transfer")


def test_the_slot_tree_imports_only_the_core():
    graph = import_graph()
    assert "awty.slottree.tree" in graph and "awty.slottree.staging" in graph
    for name, edges in graph.items():
        if name.startswith("awty.slottree"):
            bad = {e for e in edges if not e.startswith("awty.slottree") and e not in CORE}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_only_what_keeps_a_homes_files_imports_the_slot_tree():
    outside = importers_of(import_graph(), "awty.slottree")
    other = {m for m in outside if not any(m == a or m.startswith(a + ".")
                                           for a in ABOVE_THE_SLOT_TREE)}
    assert not other, {m: outside[m] for m in sorted(other)}


@pytest.mark.slow
def test_no_sql_and_no_sqlite3_outside_the_store():
    for name, (path, _) in modules(AWTY).items():
        if name.startswith("awty.store"):
            continue
        assert "sqlite3" not in external_imports(path), name
        assert sql_strings(path) == [], name


def test_the_sql_checker_sees_sql_and_not_docstrings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""SELECT a FROM b in a docstring."""\n'
                 'Q = "SELECT id FROM future_job WHERE x = ?"\n'
                 'M = "select the jobs from the list"\n')
    assert sql_strings(f) == ["SELECT id FROM future_job WHERE x = ?"]


# --- libraries only some commands need ---------------------------------------------------------
# Imported inside the functions that use them, never at a module's top, so that no command's
# start-up pays for them: cronsim (~25 ms) and cron-descriptor (~170 ms with gettext) serve only
# the schedule commands and the claim of a schedule's occurrence.
LAZY = {"cronsim", "cron_descriptor"}


def top_level_imports(path: Path) -> set[str]:
    """Top-level names a module imports when it is imported: statements outside functions,
    ``if TYPE_CHECKING:`` blocks left out."""
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                out.add(node.module.split(".")[0])
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for part in (node.body, node.orelse, node.finalbody,
                             *(h.body for h in node.handlers)):
                    visit(part)
            elif isinstance(node, ast.ClassDef | ast.With):
                visit(node.body)

    visit(parse(path).body)
    return out


def test_the_cron_libraries_are_imported_lazily():
    users = set()
    for name, (path, _) in modules(AWTY).items():
        assert not top_level_imports(path) & LAZY, name
        if external_imports(path) & LAZY:
            users.add(name)
    assert "awty.recurrence" in users  # the check looks where the libraries are used


def test_the_lazy_import_checker(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n    import cronsim\n"
                 "try:\n    from cron_descriptor import x\nexcept ImportError:\n    pass\n"
                 "def f():\n    import json\n")
    assert top_level_imports(f) == {"os", "cron_descriptor"}


def test_tests_share_names_through_helpers_not_conftest():
    """Plain names tests share (T0, db_rows, make_job…) live in tests/helpers.py; conftest.py
    holds fixtures. Importing from conftest works only by accident of pytest's sys.path, and
    which conftest it finds depends on the directory (issue 31 item 4)."""
    import re

    tests = Path(__file__).parent
    allowed = {tests / "store" / "worker.py", tests / "store" / "holder.py"}  # their own dir's
    found = [str(p.relative_to(tests)) for p in tests.rglob("*.py")
             if p not in allowed and re.search(r"^\s*from conftest import", p.read_text(), re.M)]
    assert found == []
