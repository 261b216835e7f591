"""Why a target is missed: the team's latest explanation for each row that may miss its target,
and what was tried. The bench decides met or not from the measurement; this text is printed
beside a miss only (a row that meets its target shows nothing from here). Keep it current when
the code under a row changes."""

from __future__ import annotations

_RUN = (
    "A big run is CPU-bound on the two cores it shares with the receiver: awty's two processes "
    "use ~1.2-1.45 cores (the event loop's ~40 µs a callback, half of it socket system calls; "
    "the store process's claim, history and event rows, deletes). Done: no task per callback, "
    "start marks in a side table, multi-row history inserts, the store's work in a process of "
    "its own, a batch's rows stored in run order (2026-11-24: CLI 100k 11.7-12.5k -> "
    "16.5-17.3k callbacks/s) and (2026-11-24, later) ids of one moment in the order they are "
    "made: a slot's jobs all due at one instant had ids in random order, so the run met their "
    "entity keys in random order and each entity index (future_job's, job_history's) took "
    "~10 µs a job of scattered page writes (in-process store work, 100,000 jobs: 20-24k -> "
    "32-34k jobs/s; CLI 100k, interleaved on a slower day: 9.5-10.1k -> 11.1-12.7k/s). The "
    "bench's keys are order numbers given in order; keys in no order (UUIDs) still pay that "
    "~10 µs an index. Tried and taken out (slower): finish in smaller transactions, "
    "background PASSIVE checkpoints, multi-row job inserts, a larger or smaller WAL between "
    "checkpoints (1,000 or 1,000,000 pages against 8,000), larger finish batches (4,000: no "
    "change); GC tuning changed nothing. Next: leases in a side table (a claim writes no job "
    "row; its UPDATE and decoding are now ~40 % of the store's work), a first-try success's "
    "execution folded into its history row.")
_SERVE = (
    "Measured as the serve process's CPU a request (bench/servecpu.py: utime+stime over 3,000 "
    "POST /v1/jobs, 32 connections; 2,000 requests/s on one core is 0.5 ms). 2026-11-26: "
    "SQLite 1.6-2.1 ms, PostgreSQL 1.8-1.9 ms (1,034 and 514 requests/s at 20:53), system "
    "time 1.4 ms of it: each request's own SQLite transaction and O_TMPFILE envelope, two "
    "thread hops (token, add). Now the adds of requests arriving together are one "
    "transaction, one envelope file a slot and one token check (group commit, "
    "serve/adds.py), and POST /v1/jobs skips Starlette's middleware and router: "
    "interleaved A/B, SQLite 0.44-0.48 ms (group commit) -> 0.36-0.38 ms, PostgreSQL "
    "0.35 ms. What is left: uvicorn's HTTP (~0.11 ms a request here for an app that "
    "echoes its body), validating and storing the job (~45 µs), the answer's JSON.")
_SERVE_BATCH = (
    "A job of a batch costs the serve process 70-90 µs of CPU on SQLite (bench/servecpu.py, "
    "20,000 jobs, 1,000 a request): Awty.add_many's own ~45 µs a job (validation and the "
    "insert: see add_many), ~14 µs for the answer's job document and its JSON, ~5 µs for "
    "parsing the request. 30,000 jobs/s needs 33 µs all told: add_many's validation first.")
_ADD = (
    "Until 2026-11-26 each job had an envelope file of its own, whose creation cost 16-75 µs "
    "of kernel time here (mostly the inode), more than the rest of its add; a helper process "
    "wrote them beside the inserts. Now a batch writes one file per slot it touches "
    "(`slots/<slot>/<first-id>.batch.jsonl`, one envelope a line, after the commit; issue 34 "
    "#1) and the helper is gone: 100,000 jobs over 96 slots are 96 files (~3-5 µs a job). "
    "A/B, 100,000 jobs, the two trees interleaved, 3 rounds, on a loaded machine: add_many "
    "1.1-5.5k -> 4.3-8.0k jobs/s and 2.9-3.9k -> 4.6-14.7k; add --batch 1.5-4.6k -> "
    "4.3-9.1k and 2.6-4.6k -> 4.7-7.1k. What is left is CPU (in-process, 100,000 jobs, a "
    "quieter moment: validation `jobspec.build` 21-28 µs a job, `store.add` 34-39 µs of which "
    "the bare executemany of the same rows is ~20 µs (its five indexes), ordering the batch "
    "5 µs and making the rows 4 µs; the files 3-5 µs). The bare insert alone was ~49k rows/s "
    "there: the 60k jobs/s target is above the schema's own floor on this machine. Next: the "
    "validation's Python.")

WHY: dict[str, str] = {
    "sched_ratio": "Tried (151ebad, BENCHMARKS.md history 2026-11-26 20:25): an occurrence "
    "claimed on time skips the missed-run decision; the next occurrence is found once per rule "
    "and nominal time, its job built once per template, nominal time and slot (the others are "
    "its row with their id and name); one compare-and-set UPDATE per (from, to); multi-row "
    "inserts. A/B in one sitting: 0.51x -> 0.71x; the claim alone 11x -> 2.9-3.6x the one-off "
    "claim on SQLite, 4.7-7.4x -> 2.5-2.9x on PostgreSQL. Left: inserting the next occurrences "
    "(a row and five index entries each) and their new ids, in the claim's transaction. Next: "
    "measure the store process's share of a run (py-spy) to see whether the claim is the bound.",
    "sched_add_ratio": "Tried (8d9eaf5, BENCHMARKS.md history 2026-11-26 20:25): `schedule "
    "add` takes `awty add`'s quick path (no Typer) and shows one schedule: A/B in one sitting "
    "2.79x -> 1.87x (127 against 68 ms). Left: importing cron-descriptor for the rule in words "
    "it prints (typing_extensions, inspect, logging, gettext, locale: ~80 % of the imports it "
    "adds to `add`'s). Next: the rule's words without that import (a cache by expression, or "
    "the words kept with the schedule), or cron-descriptor upstream importing less.",
    "add_many": _ADD,
    "add_batch": _ADD + " `add --batch` adds reading and parsing the JSON lines.",
    "add_many_bare": "The bare script inserts finished rows; add_many also validates each spec "
    "(~25 µs a job), makes its id, orders the batch and makes its rows (~9 µs) and writes "
    "its batch files (~4 µs) beside the same executemany (see add_many).",
    "add_batch_bare": "As add_many / bare, plus the CLI's start-up and reading and parsing the "
    "JSON lines.",
    "ratio_bare": _RUN + " At 10,000 jobs the store process starts after the first full "
    "claim, so part of the run is still on one core.",
    "cli_rate": _RUN,
    "cli_ratio": _RUN,
    "add_median": "Start-up: the interpreter (~12 ms), the standard library modules the add "
    "path needs, and opening the home.",
    "add_pass": "What an add imports beyond the interpreter's start: pathlib (~13 ms "
    "cumulative here with re, enum, functools, fnmatch, urllib.parse and ipaddress; re and "
    "json are needed anyway), render (json, datetime), api (slot tree, threading), sqlite3, "
    "netguard; then opening the home and one insert. `typing` (~2.6 ms) was dropped "
    "2026-11-26 (awty.clock's Protocol is mypy's only). Next: an add path without pathlib.",
    "pg_one_add_ratio": "Importing psycopg: ~60-100 ms on a quiet day here, ~150-330 ms loaded "
    "(psycopg.pq and psycopg_binary, whose version module reads importlib.metadata; asyncio; "
    "psycopg.errors' classes and regexes), all inside psycopg's own __init__. Done "
    "2026-11-26: a one-shot `awty add` opens one plain connection and never imports "
    "psycopg_pool (interleaved, loaded: 318 -> 286 ms median, PostgreSQL / SQLite 4.6 -> "
    "4.1x). Next: an add that does not need psycopg at all.",
    "pg_slot_ratio": "CPU on the two shared cores: a 10,000-job run on PostgreSQL is ~60 "
    "transactions (claims of 1,000, ~40 starts, 10 finishes of a DELETE and two COPYs: history "
    "and executions), and the server spends ~45-65 µs a job on them (claim ~10, start ~8, "
    "finish ~30: the history row's four index entries, the execution row's three) beside psycopg's "
    "~30-40 µs in the store process, where SQLite's whole store work is ~60 µs in that process "
    "(store-level, CPU from /proc, a loaded machine: BENCHMARKS.md history 2026-11-26 "
    "22:30). Durability differs: SQLite runs WAL with synchronous=NORMAL (a "
    "commit is not flushed: safe across a crash of the process, a power cut may lose the last "
    "transactions); the bench's PostgreSQL is as installed, synchronous_commit=on (each commit "
    "flushed, ~0.3-0.7 ms fdatasync here), which is the operator's setting and is left so. "
    "Done 2026-11-26 (perf34): future_job at fillfactor 40 (migration 6: a claim's and a "
    "start's row versions all HOT, 54% before; server CPU of claim+start+finish 53-84 -> 47-48 "
    "µs a job), and the store process answers starts, claims and results on three threads "
    "and connections (a start waited behind a 1,000-row write or claim: start latency median "
    "42-62 -> 26-38 ms on the loaded machine); interleaved in-process runs, loaded machine: "
    "ratio median 0.63 -> 1.18 (most of it the threads: at fillfactor 70 with them, 1.09). "
    "Next: a first-try success's execution folded "
    "into its history row (one COPY'd row and three index entries fewer a job), leases in a "
    "side table.",
    "pg_add": "COPY into PostgreSQL on the same 2 cores as the server; the 60k jobs/s target is "
    "round 3's (issue 34), above what the rows' validation leaves (see add_many).",
    "cli_first_10000": "Start-up: importing asyncio and uvloop (~35–40 ms) before anything "
    "is sent.",
    "cli_first_100000": "Start-up: importing asyncio and uvloop (~35–40 ms) before anything "
    "is sent.",
    "catchup_ratio": "The one-slot run it is compared with got faster this round (a batch's "
    "rows in run order; 10.4 -> 6.1 s for 96,000 jobs) while each missed slot keeps a fixed "
    "cost: its own slot lock, owner session, connections, reconciling, and a pipeline that "
    "fills and drains. Done 2026-11-24: a catch-up's slots share one event loop and one store "
    "process (per slot, one never came up in slots of a batch or less: the 96 slots ran on one "
    "core), and once nothing is left to claim results are written whenever no write is under "
    "way (a slot's last results had waited for its last answer: ~25 ms per 1,000-job slot); "
    "in-process, interleaved: ratio 1.50 -> 1.30 -> 1.18x. Later the same day ids of one moment "
    "in the order made sped up the one big slot (its keys in order: 6.6-8.7 -> 5.4-7.9 s, "
    "alternated runs) and not the 96 small ones (8.0-11.4 and 8.2-10.6 s: a missed slot's 1,000 "
    "keys are one narrow range, whose few index pages were touched together in any order): "
    "ratio 1.10-1.31 -> 1.33-1.57x. Then (17:48 run: 1.51x) a catch-up's slots share one set of "
    "executors (a slot's first requests go out on the connections the slot before it left open: "
    "~5 ms a slot) and a slot whose store calls go to the store process claims its next batch "
    "at once (held back, its first chunk was sent ~15 ms before the rest came): in-process, "
    "interleaved, 1.50-1.65 -> 1.22-1.29x; a 1,000-job slot 83-99 -> 64-70 ms. Then (22:25 run: "
    "1.15x; 22:53: 1.08x) the slots overlap: a slot is opened (claims a batch) once the slot "
    "before has a claim back empty, starts its first chunk once that one has started its last, "
    "and sends once that one has nothing left to send, while its "
    "last results are written (between a slot's last answer and the next slot's first request: "
    "~9 -> 1.2-1.4 ms median); in-process, interleaved, 6 rounds each: catch-up 4.34-5.17 -> "
    "4.11-4.63 s, ratio median 1.24 -> 1.11x. In slow sittings (2026-11-25 00:23: bare client "
    "half the speed of 22:53's) full runs read 1.23-1.28x, and so did the code before the "
    "review's fixes: interleaved, that tree 1.02-1.21x, this one 1.03-1.17x. What is left is "
    "CPU: the two cores are shared "
    "by the loop, the store process and the receiver, and a missed slot's fixed work "
    "(reconciling, retiring its directory, its lock and owner session) now runs beside the "
    "next slot's sending.",
    "flat_ratio": "The WAL checkpoint in close() writes back the pages a run touched; ids of "
    "the first due time keep a slot's rows together in the id index.",
    "flat_last_ratio": "A slot's rows sit together in every index (ids of the first due time, "
    "the entity index led by next_check_at); what is left is the noise of 40 ms runs.",
    "serve_add": _SERVE,
    "serve_add_p99": _SERVE,
    "pg_serve_add": _SERVE + " On PostgreSQL the server's own CPU (on the same two cores) "
    "comes on top of serve's, which bench/servecpu.py does not count.",
    "pg_serve_add_p99": _SERVE,
    "serve_batch": _SERVE_BATCH,
    "pg_serve_batch": _SERVE_BATCH,
    "rss": "The runner's own peak (taken by bench/launch.py; until 2026-11-24 the bench took "
    "it from its own os.wait4, and a child's ru_maxrss keeps what it was before exec, a copy of "
    "the bench: 139–171 MB after the earlier sections, whatever awty used). What a big run "
    "holds: the claimed and started jobs, the run's id sets (claimed, reconciled), results "
    "waiting to be written (at most two batches), and a malloc arena per thread (store, "
    "record, reconcile). Next: fewer threads once the store process is up.",
}


def explain(key: str, label: str) -> str:
    why = WHY.get(key)
    return f"**{label}**: " + (why if why else "no explanation recorded yet (bench/whynot.py).")
