"""APScheduler 3 as its user guide configures it: a SQLAlchemy job store on SQLite, a thread
pool executor of 20, misfire_grace_time None (a late job still runs), coalesce off.

    python aps.py schedule DIR URL N DUE     N date-triggered jobs at epoch DUE
    python aps.py one DIR URL DUE            one job (one CLI call)
    python aps.py run DIR                    the scheduler (BlockingScheduler) until SIGTERM
"""

import sys
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore


def scheduler(cls, d: str):
    return cls(jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{d}/jobs.sqlite")},
               executors={"default": ThreadPoolExecutor(20)},
               job_defaults={"coalesce": False, "max_instances": 1, "misfire_grace_time": None},
               timezone=UTC)


def add(d: str, url: str, keys, due: float) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    s = scheduler(BackgroundScheduler, d)
    s.start(paused=True)  # jobs go straight to the store; nothing runs in this process
    at = datetime.fromtimestamp(due, UTC)
    for k in keys:
        s.add_job("_hook:fire", "date", run_date=at, args=[url, k], id=k)
    s.shutdown(wait=False)


def main(argv):
    cmd, d = argv[0], argv[1]
    if cmd == "schedule":
        add(d, argv[2], (str(i) for i in range(int(argv[3]))), float(argv[4]))
    elif cmd == "one":
        add(d, argv[2], [f"one-{datetime.now().timestamp()}"], float(argv[3]))
    elif cmd == "run":
        import signal

        from apscheduler.schedulers.blocking import BlockingScheduler

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        scheduler(BlockingScheduler, d).start()


if __name__ == "__main__":
    main(sys.argv[1:])
