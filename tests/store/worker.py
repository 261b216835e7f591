"""A store client in its own process, for the multi-process PostgreSQL tests.

    python worker.py claim URL SCHEMA OWNER NOW LEASE_S SLOT  # claim/start/finish until empty
    python worker.py hang  URL SCHEMA OWNER NOW LEASE_S SLOT  # claim one batch, start it, wait
    python worker.py add   URL SCHEMA PREFIX COUNT SLOT       # add COUNT jobs + shared keys

Prints one line per batch ("claimed N" / "added N") and "done" at the end.
"""

import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import open_store  # noqa: E402

from awty.model import Answer, End, Job, Kind, Outcome, Result  # noqa: E402

SHARED_KEYS = 50


def job(job_id: str, slot: datetime, key: str | None = None) -> Job:
    return Job(id=job_id, kind=Kind.HTTP, target="http://127.0.0.1:9/cb", payload_json="{}",
               headers={}, entity_name=None, entity_key=None, first_check_at=slot,
               next_check_at=slot, idempotency_key=key, created_at=slot, updated_at=slot)


def main() -> None:
    mode, url, schema = sys.argv[1:4]
    store = open_store("postgres", url, schema)
    if mode == "add":
        prefix, count, slot = sys.argv[4], int(sys.argv[5]), datetime.fromisoformat(sys.argv[6])
        for start in range(0, count, 100):
            batch = [job(f"{prefix}{n:08d}", slot) for n in range(start, min(count, start + 100))]
            shared = [job(f"{prefix}K{k:04d}", slot, key=f"shared-{k}")
                      for k in range(start // 100 % 5 * 10, start // 100 % 5 * 10 + 10)]
            added = store.add(batch + shared, [None] * len(batch) + ["same"] * len(shared))
            print(f"added {sum(a.created for a in added)}", flush=True)
        print("done", flush=True)
        return
    owner, now, lease = sys.argv[4], datetime.fromisoformat(sys.argv[5]), float(sys.argv[6])
    slot = datetime.fromisoformat(sys.argv[7])
    with store.owner_session(owner):
        while True:
            got = store.claim(slot, now=now, owner=owner, lease_until=now + timedelta(
                seconds=lease), limit=100)
            if not got:
                break
            started = set(store.start([j.id for j in got], owner=owner, now=now))
            print(f"claimed {len(got)}", flush=True)
            if mode == "hang":
                sys.stdin.read()  # killed here, its batch claimed and started
            ends = [End(j, Outcome.DONE, "ok", Result(Answer.DONE, status=200))
                    for j in got if j.id in started]
            store.finish(ends, owner=owner, now=now)
    print("done", flush=True)
    store.close()


main()
