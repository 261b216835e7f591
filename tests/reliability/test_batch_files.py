"""A batch writes one envelope file per slot it touches (issue 34 #1):
``slots/<slot>/<first-id>.batch.jsonl``, one envelope a line, written atomically. The slot tree
stays the operator's view: ``ls`` shows the files, doctor counts the jobs in them, the
reconciler reads both forms, and a cancelled or finished job of a batch file is settled lazily
(the file goes once none of its jobs is pending in its slot). Through the real CLI, on SQLite
(a PostgreSQL home has no slot tree). The SIGKILL mid-batch case is in test_crash.py."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0
from relkit import cli_env, envelope_ids, query, run_cli, write_batch

from awty.slots import parse_slot_id

pytestmark = pytest.mark.reliability


def _ok(args: list[str], env: dict[str, str]):
    p = run_cli(args, env)
    assert p.returncode == 0, p.stderr
    return p


def _files(home: Path) -> dict[str, list[str]]:
    """slot id -> the file names in it."""
    root = home / "slots"
    return {d.name: sorted(os.listdir(d)) for d in sorted(root.iterdir()) if d.is_dir()}


def _batch(home: Path, tmp_path: Path, rx, per_slot: dict[str, int], tag: str = "b") -> list[str]:
    """``add --batch`` of ``per_slot[in]`` jobs due ``in`` from T0; returns their ids."""
    lines = [{"target": rx.url(f"/{tag}/{when}/{i}"), "in": when, "entity": "order",
              "key": f"{tag}{when}{i}"} for when, n in per_slot.items() for i in range(n)]
    path = tmp_path / f"{tag}.jsonl"
    write_batch(path, lines)
    p = _ok(["add", "--batch", str(path), "--json"], cli_env(home, T0))
    return [j["id"] for j in json.loads(p.stdout)]


def _doctor(home: Path, *extra: str) -> dict[str, dict]:
    p = run_cli(["doctor", "--json", *extra], cli_env(home, T0))
    return {f["check"]: f for f in json.loads(p.stdout)["findings"]}


def _run(home: Path, sid: str):
    return _ok(["run-slot", sid, "--json"],
               cli_env(home, parse_slot_id(sid) + timedelta(seconds=5)))


def test_a_batch_writes_one_file_per_slot_and_an_add_one(home, tmp_path, rx):
    _ok(["init"], cli_env(home, T0))
    ids = _batch(home, tmp_path, rx, {"20m": 30, "40m": 5, "2h": 1})
    one = json.loads(_ok(["add", rx.url("/one"), "--in", "20m", "--json"],
                         cli_env(home, T0)).stdout)["id"]
    files = _files(home)
    assert len(files) == 3
    rows = {i: s for i, s in query(home, "SELECT id, next_check_at FROM future_job")}
    for sid, names in files.items():
        slot_ids = sorted(i for i, s in rows.items() if s.replace("-", "").replace(
            ":", "").replace("T", "")[:12] == sid)
        batch = [n for n in names if n.endswith(".batch.jsonl")]
        single = [n for n in names if n.endswith(".json")]
        if len(slot_ids) - (one in slot_ids) >= 2:
            # the batch's jobs of this slot in one file, named by the smallest id
            assert len(batch) == 1 and batch[0] == f"{min(set(slot_ids) - {one})}.batch.jsonl"
            path = home / "slots" / sid / batch[0]
            assert (path.stat().st_mode & 0o777) == 0o600
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            assert sorted(x["id"] for x in lines) == sorted(set(slot_ids) - {one})
            assert all(x["v"] == 1 and x["target"].startswith(rx.url("/b/")) for x in lines)
            assert single == ([f"{one}.json"] if one in slot_ids else [])
        else:
            assert batch == [] and single == [f"{slot_ids[0]}.json"]  # one job: <id>.json
    assert sorted(envelope_ids(home)) == sorted([*ids, one])
    f = _doctor(home)["envelopes"]
    assert f["status"] == "ok" and "35 of them in 2 batch file(s)" in f["detail"]


@pytest.mark.slow
def test_cancel_one_job_of_a_batch_file_then_all(home, tmp_path, rx):
    _ok(["init"], cli_env(home, T0))
    ids = _batch(home, tmp_path, rx, {"20m": 6})
    (sid, names), = _files(home).items()
    first = min(ids)
    # the job the file is named by: the file stays (five of its jobs are pending)
    assert run_cli(["cancel", first], cli_env(home, T0)).returncode == 0
    assert _files(home) == {sid: names}
    assert _doctor(home)["orphans"]["status"] == "ok"
    other = sorted(ids)[1]
    assert run_cli(["cancel", other], cli_env(home, T0)).returncode == 0
    run = json.loads(_run(home, sid).stdout)
    assert run["ran"] == 4 and run["outcomes"] == {"done": 4}
    sent = [r.headers["x-awty-job-id"] for r in rx.requests()]
    assert sorted(sent) == sorted(set(ids) - {first, other})
    hist = dict(query(home, "SELECT id, outcome FROM job_history"))
    assert hist[first] == hist[other] == "cancelled" and len(hist) == 6
    assert not (home / "slots" / sid).exists()  # the slot ran: its directory retired whole
    # every job of a batch file cancelled: the file goes at once, and its slot with it
    more = _batch(home, tmp_path, rx, {"50m": 3}, tag="c")
    assert len(_files(home)) == 1
    assert run_cli(["cancel", *more], cli_env(home, T0)).returncode == 0
    assert _files(home) == {} and envelope_ids(home) == []
    assert all(f["status"] == "ok" for k, f in _doctor(home).items() if k in (
        "envelopes", "orphans", "drop-ins"))


@pytest.mark.slow
def test_a_dropped_in_batch_file_is_imported_whole(home, tmp_path, rx):
    _ok(["init"], cli_env(home, T0))
    _ok(["add", rx.url("/real"), "--in", "20m"], cli_env(home, T0))
    (sid, _), = _files(home).items()
    sd = home / "slots" / sid
    (sd / "mine.batch.jsonl").write_text("".join(
        json.dumps({"target": rx.url(f"/dropped/{i}"), "payload": {"i": i}}) + "\n"
        for i in range(3)))
    f = _doctor(home)["drop-ins"]
    assert "mine.batch.jsonl (3 job(s))" in f["detail"]
    run = json.loads(_run(home, sid).stdout)
    assert run["imported"] == 3 and run["outcomes"] == {"done": 4}
    assert sorted(r.path for r in rx.requests()) == [
        "/dropped/0", "/dropped/1", "/dropped/2", "/real"]
    assert not sd.exists()


@pytest.mark.slow
def test_a_dropped_in_batch_file_with_a_bad_line_is_set_aside_whole(home, tmp_path, rx):
    proof = tmp_path / "ran"
    _ok(["init"], cli_env(home, T0))
    _ok(["add", rx.url("/real"), "--in", "20m"], cli_env(home, T0))
    (sid, _), = _files(home).items()
    sd = home / "slots" / sid
    (sd / "x.batch.jsonl").write_text(
        json.dumps({"target": rx.url("/fine")}) + "\n"
        + json.dumps({"kind": "exec", "target": f"touch {proof}"}) + "\n")
    run = json.loads(_run(home, sid).stdout)
    assert run["imported"] == 0 and run["rejected"] == 1 and run["outcomes"] == {"done": 1}
    assert [r.path for r in rx.requests()] == ["/real"] and not proof.exists()
    reason = (home / "rejected" / sid / "x.batch.jsonl.reason").read_text()
    assert reason.startswith("line 2: kind: exec jobs may not be dropped in")
    assert (home / "rejected" / sid / "x.batch.jsonl").exists()


@pytest.mark.slow
def test_a_replayed_batch_file_is_an_orphan_and_doctor_says_so(home, tmp_path, rx):
    """A batch file whose jobs all ended (put back after its slot ran) is removed, never run
    again; doctor counts it as an orphan and --repair removes it; a lost one is missing
    envelopes, which --repair writes."""
    _ok(["init"], cli_env(home, T0))
    _batch(home, tmp_path, rx, {"20m": 4, "50m": 3})
    files = _files(home)
    (sid, names), (sid2, names2) = files.items()
    kept = (home / "slots" / sid / names[0]).read_bytes()
    _run(home, sid)
    assert len(rx.requests()) == 4
    (home / "slots" / sid).mkdir(mode=0o700)
    (home / "slots" / sid / names[0]).write_bytes(kept)
    f = _doctor(home)["orphans"]
    assert f["status"] == "problem" and f"{sid}/{names[0]} (4 job(s), none pending here)" in \
        f["detail"]
    os.unlink(home / "slots" / sid2 / names2[0])
    f = _doctor(home)["envelopes"]
    assert f["detail"].startswith("3 pending job(s) without an envelope")
    fixed = _doctor(home, "--repair")
    assert fixed["orphans"]["status"] == fixed["envelopes"]["status"] == "repaired"
    assert not (home / "slots" / sid).exists() and len(os.listdir(home / "slots" / sid2)) == 3
    # put back once more, the slot's next run removes it without sending anything
    (home / "slots" / sid).mkdir(mode=0o700)
    (home / "slots" / sid / names[0]).write_bytes(kept)
    run = json.loads(_run(home, sid).stdout)
    assert run["ran"] == 0 and run["orphans_removed"] == 1 and len(rx.requests()) == 4


@pytest.mark.slow
def test_reschedule_out_of_a_batch_file(home, tmp_path, rx):
    """A job moved to another slot leaves its batch file's line behind: the file stays while
    another of its jobs is pending in the slot, and goes (with the slot) when the last one
    moves; doctor finds nothing amiss at any step."""
    _ok(["init"], cli_env(home, T0))
    ids = sorted(_batch(home, tmp_path, rx, {"20m": 2}))
    (sid, names), = _files(home).items()
    _ok(["reschedule", ids[0], "--in", "3h"], cli_env(home, T0))
    assert _files(home)[sid] == names
    clean = ("envelopes", "orphans", "wrong slot", "drop-ins")
    assert all(f["status"] == "ok" for k, f in _doctor(home).items() if k in clean)
    _ok(["reschedule", ids[1], "--in", "3h"], cli_env(home, T0))
    assert sid not in _files(home) and sorted(envelope_ids(home)) == sorted(ids)
    assert all(f["status"] == "ok" for k, f in _doctor(home).items() if k in clean)
