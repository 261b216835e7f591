"""``StoreSpec``: where a store is and how to reach it (``store.open`` takes one)."""

from __future__ import annotations

from pathlib import Path

from ..record import Record, _draft, _seal

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from ..config import Settings


class StoreSpec(Record):
    """Where a store is and how to reach it: picklable, no connection in it (a run's store
    process opens the same store from it). ``where`` is the SQLite file or the PostgreSQL URL;
    ``locks`` the directory of SQLite's lock files (default: ``locks`` beside the file)."""

    __slots__ = ("kind", "where", "schema", "busy_timeout", "locks", "pool_size",
                 "connect_timeout", "lease_clock")
    kind: str  # "sqlite" | "postgres"
    where: str
    schema: str
    busy_timeout: float
    locks: str | None
    pool_size: int
    connect_timeout: float
    lease_clock: str  # PostgreSQL: "server" (lease times are the server's), "caller" (tests)

    def __new__(cls, kind: str, where: str, schema: str = "awty", busy_timeout: float = 5.0,
                locks: str | None = None, pool_size: int = 4,
                connect_timeout: float = 5.0, lease_clock: str = "server") -> StoreSpec:
        if kind not in ("sqlite", "postgres"):
            raise ValueError(f"unknown store kind {kind!r}")
        s = _draft(cls)
        s.kind = kind
        s.where = str(where)
        s.schema = schema
        s.busy_timeout = busy_timeout
        s.locks = None if locks is None else str(locks)
        s.pool_size = pool_size
        s.connect_timeout = connect_timeout
        s.lease_clock = lease_clock
        return _seal(s, cls)

    @classmethod
    def of(cls, settings: Settings, home: Path) -> StoreSpec:
        """The store a home's settings name: PostgreSQL when ``database_url`` is set, else
        ``home/awty.db``."""
        if settings.database_url:
            return cls("postgres", settings.database_url, settings.database_schema,
                       pool_size=settings.database_pool_size,
                       connect_timeout=settings.database_connect_timeout)
        return cls("sqlite", str(Path(home) / "awty.db"), busy_timeout=settings.busy_timeout)
