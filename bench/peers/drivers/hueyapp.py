"""Huey with SqliteHuey (DIR/huey.db, DIR from PEER_DIR), consumed by
``huey_consumer hueyapp.huey -k thread -w 20`` (thread workers, as its docs recommend for
I/O-bound tasks; other consumer options at their defaults). Tasks are scheduled by
``huey_add.py`` (a module of their own: a task defined in ``__main__`` is not found by the
consumer)."""

import os

from huey import SqliteHuey

import _hook

huey = SqliteHuey(filename=os.path.join(os.environ.get("PEER_DIR", "."), "huey.db"), utc=True,
                  results=False)


@huey.task()
def fire(url, key):
    _hook.fire(url, key)
