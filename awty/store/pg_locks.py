"""The PostgreSQL slot lock: a shared session advisory lock on a dedicated connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from .pg_rows import one

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import Protocol

    from psycopg.rows import TupleRow

    from .pg_sql import Sql

    class _Store(Protocol):
        """What the lock uses of the PostgresStore that made it (which imports this module)."""

        sql: Sql
        _slot_class: int

        def _connect(self, autocommit: bool = False) -> psycopg.Connection[TupleRow]: ...
        def _error(self, e: BaseException, what: str, probe: bool = True) -> Exception: ...
        def _tx(self, what: str) -> AbstractContextManager[psycopg.Cursor[TupleRow]]: ...


class PgSlotLock:
    """A shared session advisory lock on a dedicated connection: runners on every host hold
    it together (the work is shared by SKIP LOCKED claims); it shows who runs the slot."""

    def __init__(self, store: _Store, key: int):
        self.store, self.key = store, key
        self.conn: psycopg.Connection[TupleRow] | None = None

    def acquire(self) -> bool:
        try:
            self.conn = self.store._connect(autocommit=True)
            return bool(one(self.conn.execute(self.store.sql.slot_lock,
                                              (self.store._slot_class, self.key)).fetchone())[0])
        except psycopg.Error as e:
            raise self.store._error(e, "cannot lock the slot") from None

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def holder(self) -> str:
        with self.store._tx("cannot read slot holders") as cur:
            rows = cur.execute(self.store.sql.slot_holders,
                               (self.store._slot_class, self.key)).fetchall()
        return ", ".join(f"pid {pid} ({addr})" for pid, addr, _ in rows) or "nobody"

