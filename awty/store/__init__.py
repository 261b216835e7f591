"""The store seam: ``base.Store`` is the contract, ``sqlite.SQLiteStore`` the embedded default,
``postgres.PostgresStore`` the store for several hosts. ``open(spec)`` is the one way to open
either: every caller (the facade, the store process, doctor, tests, the bench) describes the
store as a ``StoreSpec`` and gets a ``Store`` back. Importing this package imports neither
implementation (nor psycopg, nor sqlite3)."""

from __future__ import annotations

from pathlib import Path

from ..errors import StoreError
from .spec import StoreSpec

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from .base import Store

__all__ = ["DRIVER_MISSING", "MODES", "StoreSpec", "open"]

DRIVER_MISSING = "PostgreSQL needs the driver: pip install 'awty[postgres]'"
# How a store is opened: "use" (what commands do: SQLite creates and migrates its file;
# PostgreSQL finds its schema, which only `awty init` makes), "init" (PostgreSQL creates or
# migrates the schema too), "read" (nothing created or migrated: doctor's look, a store
# process opening what its parent already opened).
MODES = ("use", "init", "read")


def open(spec: StoreSpec, *, mode: str = "use",  # noqa: A001 - its verb
         one_shot: bool = False) -> Store:
    """The store ``spec`` describes, opened in ``mode`` (``MODES``). A PostgreSQL spec without
    the driver installed raises ``StoreError(DRIVER_MISSING)``: one line, never a traceback.
    ``one_shot``: for a command that makes a few calls and exits (``awty add``): PostgreSQL
    opens one plain connection, no pool."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if spec.kind == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(Path(spec.where), busy_timeout=spec.busy_timeout,
                           create=mode != "read", migrate=mode != "read",
                           locks=None if spec.locks is None else Path(spec.locks))
    if one_shot and mode == "use":
        # one `awty add`: libpq without psycopg's import, the rest by the store below
        from .pg_light import open_light

        light = open_light(spec, lambda: _postgres(spec, mode, one_shot))
        if light is not None:
            return light
    return _postgres(spec, mode, one_shot)


def _postgres(spec: StoreSpec, mode: str, one_shot: bool) -> Store:
    try:
        from .postgres import PostgresStore
    except ImportError as e:
        if _is_driver(e):
            raise StoreError(DRIVER_MISSING) from None
        raise
    try:
        return PostgresStore(spec.where, schema=spec.schema, create=mode == "init",
                             pool_size=spec.pool_size, connect_timeout=spec.connect_timeout,
                             lease_clock=spec.lease_clock, pool=not one_shot)
    except ImportError as e:  # psycopg_pool, imported once a pool is wanted
        if _is_driver(e):
            raise StoreError(DRIVER_MISSING) from None
        raise


def _is_driver(e: ImportError) -> bool:
    """psycopg or psycopg_pool missing, or psycopg present without a libpq it can load."""
    name = (e.name or "").split(".")[0]
    return name in ("psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c") or \
        "libpq" in str(e) or "pq wrapper" in str(e)
