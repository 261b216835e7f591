"""procrastinate (a PostgreSQL job queue), as its users run it: jobs deferred with
``schedule_at`` by a process of their own, fired by ``procrastinate --app=procr.app worker``
(async tasks, ``--concurrency 20``: the worker runs that many jobs at once in one event loop;
polling and listen/notify at their defaults). The task posts with aiohttp (one session per
worker process), signed like every peer's callback.

    python procr.py schedule DIR URL N DUE    N jobs due at DUE (epoch), one batch_defer
    python procr.py one DIR URL DUE           one job (one CLI call)
    python procr.py setup DIR                 make this run's schema (untimed)
    python procr.py drop DIR                  drop it

The database is PEER_PG_URL; each run keeps its tables in a schema of its own
(PEER_PG_SCHEMA)."""

import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from datetime import UTC, datetime

import procrastinate

_SECRET = base64.b64decode(os.environ.get("PEER_SECRET", "whsec_")[6:])
SCHEMA = os.environ.get("PEER_PG_SCHEMA", "procrastinate_peer")
app = procrastinate.App(connector=procrastinate.PsycopgConnector(
    conninfo=os.environ.get("PEER_PG_URL", ""),
    kwargs={"options": f"-c search_path={SCHEMA}"}))
_session = None


@app.task(name="fire")
async def fire(url: str, key: str) -> None:
    import aiohttp

    global _session
    if _session is None:
        _session = aiohttp.ClientSession()
    body = json.dumps({"id": key, "payload": {"order": key, "status": "placed"}}).encode()
    ts = str(int(time.time()))
    mac = hmac.new(_SECRET, f"{key}.{ts}.".encode() + body, hashlib.sha256).digest()
    async with _session.post(url, data=body, timeout=aiohttp.ClientTimeout(total=30), headers={
            "Content-Type": "application/json", "webhook-id": key, "webhook-timestamp": ts,
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}) as r:
        r.raise_for_status()


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(os.environ["PEER_PG_URL"], autocommit=True) as c:
        c.execute(sql)


async def _setup() -> None:
    _admin(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def _defer(url: str, keys: list[str], at: datetime) -> None:
    async with app.open_async():
        await fire.configure(schedule_at=at).batch_defer_async(
            *({"url": url, "key": k} for k in keys))


def main(argv):
    cmd, d = argv[0], argv[1]
    if d != os.environ.get("PEER_DIR"):
        raise SystemExit("PEER_DIR must name DIR")
    if cmd == "drop":
        _admin(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        return
    if cmd == "setup":
        asyncio.run(_setup())
        return
    at = datetime.fromtimestamp(float(argv[-1]), UTC)
    if cmd == "schedule":
        asyncio.run(_defer(argv[2], [str(i) for i in range(int(argv[3]))], at))
    elif cmd == "one":
        asyncio.run(_defer(argv[2], [f"one-{datetime.now().timestamp()}"], at))


if __name__ == "__main__":
    main(sys.argv[1:])
