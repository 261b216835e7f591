"""The runner people write first: a SQLite table of (id, url, due), and a script cron starts
each minute that SELECTs the due rows, POSTs them with 20 threads, then DELETEs them.

    python naive.py schedule DIR URL N DUE     N rows due at epoch DUE (one transaction)
    python naive.py one DIR URL DUE            one row (one CLI call)
    python naive.py run DIR                    one cron run: fire what is due, then exit
"""

import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def db(d: str) -> sqlite3.Connection:
    c = sqlite3.connect(f"{d}/naive.db", timeout=30)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, url TEXT, due REAL)")
    c.execute("CREATE INDEX IF NOT EXISTS jobs_due ON jobs (due)")
    return c


def main(argv):
    cmd, d = argv[0], argv[1]
    c = db(d)
    if cmd == "schedule":
        with c:
            c.executemany("INSERT INTO jobs VALUES (?, ?, ?)",
                          ((str(i), argv[2], float(argv[4])) for i in range(int(argv[3]))))
    elif cmd == "one":
        with c:
            c.execute("INSERT INTO jobs VALUES (?, ?, ?)",
                      (f"one-{time.time()}", argv[2], float(argv[3])))
    elif cmd == "run":
        import _hook

        rows = c.execute("SELECT id, url FROM jobs WHERE due <= ?", (time.time(),)).fetchall()
        with ThreadPoolExecutor(20) as ex:
            list(ex.map(lambda r: _hook.fire(r[1], r[0]), rows))
        with c:
            c.executemany("DELETE FROM jobs WHERE id = ?", ((r[0],) for r in rows))


if __name__ == "__main__":
    main(sys.argv[1:])
