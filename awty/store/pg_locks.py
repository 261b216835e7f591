"""The PostgreSQL slot lock: a shared session advisory lock on a dedicated connection."""

from __future__ import annotations

from typing import Any

import psycopg


class PgSlotLock:
    """A shared session advisory lock on a dedicated connection: runners on every host hold
    it together (the work is shared by SKIP LOCKED claims); it shows who runs the slot."""

    def __init__(self, store: Any, key: int):  # store: the PostgresStore that made it
        self.store, self.key = store, key
        self.conn: psycopg.Connection | None = None

    def acquire(self) -> bool:
        try:
            self.conn = self.store._connect(autocommit=True)
            return bool(self.conn.execute(self.store.sql.slot_lock,
                                          (self.store._slot_class, self.key)).fetchone()[0])
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

