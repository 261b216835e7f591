"""Where a ``--call`` target's module is, asked at add time without importing anything: a typo
should be exit 2 when the job is added, not a failed job hours later, and adding a job must
not run the application's import-time code.

The worker (``executors.pyworker``) runs in this interpreter with the job's directory (the one
``add`` ran in) first on ``sys.path``, so the module is looked for there first, then on this
process's ``sys.path``."""

from __future__ import annotations

import keyword
import sys


def bad_name(target: str) -> str | None:
    """The first part of ``module:qualname`` that is not a Python name (``class``, ``1x``),
    else None."""
    module, _, qualname = target.partition(":")
    for part in (*module.split("."), *qualname.split(".")):
        if not part.isidentifier() or keyword.iskeyword(part):
            return part
    return None


def findable(module: str, directory: str) -> bool:
    """Whether ``module`` (dotted) can be imported with ``directory`` first on ``sys.path``.
    ``importlib.util.find_spec("a.b")`` would import ``a`` (its ``__init__`` runs): below the
    top level each package's own search locations are walked instead."""
    from importlib.machinery import PathFinder

    parts = module.split(".")
    spec = PathFinder.find_spec(parts[0], [directory])
    if spec is None:
        if parts[0] in sys.builtin_module_names:
            return len(parts) == 1
        import importlib.util

        try:
            # a top-level name is looked up, not imported; meta-path finders (an editable
            # install's) answer here too
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return False
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec is not None else None
        if locations is None:
            return False  # a module, not a package: it has no submodules
        spec = PathFinder.find_spec(".".join(parts[:i + 1]), list(locations))
    return spec is not None
