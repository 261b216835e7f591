import json
import os
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.errors import Conflict, InvalidInput, JobNotFound
from awty.model import Outcome
from awty.slots import slot_for, slot_id
from helpers import T0, db_rows, tree_files, tree_jobs


def test_add_in_2h_lands_in_row_and_slot_dir(awty, home):
    res = awty.add("https://example.com/hook", in_="2h", payload={"order": 42},
                   entity="order", key="42")
    due = T0 + timedelta(hours=2)
    assert res.created and res.slot == slot_for(due, 15)
    rows = db_rows(home, "future_job")
    assert len(rows) == 1
    row = rows[0]
    assert row["id"] == res.job.id
    assert row["first_check_at"] == "2026-11-22T12:07:12Z"
    assert row["next_check_at"] == "2026-11-22T12:15:00Z"
    assert res.job.first_check_at == due
    assert json.loads(row["payload"]) == {"order": 42}
    assert row["status"] == "pending" and row["check_count"] == 0
    assert tree_files(home) == [f"202611221215/{res.job.id}.json"]
    env = json.loads((home / "slots" / "202611221215" / f"{res.job.id}.json").read_text())
    assert env["id"] == res.job.id and env["target"] == "https://example.com/hook"
    assert env["payload"] == {"order": 42}


def test_home_and_db_permissions_under_permissive_umask(home, clock):
    old = os.umask(0)
    try:
        with Awty(home, clock=clock, env={}) as a:
            a.add("https://example.com/", in_="1h")
    finally:
        os.umask(old)
    assert (home.stat().st_mode & 0o777) == 0o700
    assert ((home / "awty.db").stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize("kwargs, message", [
    ({"at": "2026-11-22T09:00:00Z"}, "in the past"),
    ({"in_": "2h", "payload_json": "{not json"}, "not JSON"),
    ({"in_": "2h", "payload": "x" * 5000}, "over the limit"),
    ({"in_": "400d"}, "max_delay"),
    ({"in_": "2h", "at": "now"}, "either"),
    ({}, "missing time"),
    ({"in_": "soon"}, "not a duration"),
    ({"in_": "2h", "headers": ["Host: evil"]}, "set by awty"),
    ({"in_": "2h", "headers": ["X-A: b\r\nX-B: c"]}, "single line"),
    ({"in_": "2h", "max_checks": -1}, "max_checks"),
])
def test_bad_input_changes_nothing(awty, home, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        awty.add("https://example.com/", **kwargs)
    assert db_rows(home, "future_job") == []
    assert tree_files(home) == []


@pytest.mark.parametrize("target, message", [
    ("ftp://example.com/x", "http"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://[fe80::1]/x", "link-local"),
    ("not a url", "URL"),
    ("example.com/x", "http"),
])
def test_bad_targets_refused(awty, target, message):
    with pytest.raises(InvalidInput, match=message):
        awty.add(target, in_="1h")


def test_allow_list_and_private_networks(home, clock):
    a = Awty(home, clock=clock, env={}, allowed_callbacks="https://hooks.example.com/",
             deny_private_networks=True)
    a.add("https://hooks.example.com/x", in_="1h")
    with pytest.raises(InvalidInput, match="allow"):
        a.add("https://other.example.com/x", in_="1h")
    b = Awty(home, clock=clock, env={}, deny_private_networks=True)
    with pytest.raises(InvalidInput):
        b.add("http://127.0.0.1:8080/x", in_="1h")
    with pytest.raises(InvalidInput):
        b.add("http://10.1.2.3/x", in_="1h")


def test_idempotency_key(awty, home):
    first = awty.add("https://example.com/", in_="2h", payload={"a": 1}, idempotency_key="k1")
    again = awty.add("https://example.com/", in_="2h", payload={"a": 1}, idempotency_key="k1")
    assert again.job.id == first.job.id and not again.created
    with pytest.raises(Conflict, match="different job"):
        awty.add("https://example.com/", in_="2h", payload={"a": 2}, idempotency_key="k1")
    assert len(db_rows(home, "future_job")) == 1
    # Still honoured after the job ended.
    awty.cancel([first.job.id])
    after = awty.add("https://example.com/", in_="2h", payload={"a": 1}, idempotency_key="k1")
    assert after.job.id == first.job.id and not after.created


def test_cancel_by_id_removes_row_and_file_and_writes_history(awty, home):
    res = awty.add("https://example.com/", in_="2h")
    cancelled = awty.cancel([res.job.id, "01NOSUCHJOB0000000000000000"])
    assert cancelled.cancelled == [res.job.id]
    assert cancelled.missing == ["01NOSUCHJOB0000000000000000"] and cancelled.running == []
    assert db_rows(home, "future_job") == []
    assert tree_files(home) == []
    hist = db_rows(home, "job_history")
    assert [(h["id"], h["outcome"]) for h in hist] == [(res.job.id, "cancelled")]
    shown = awty.get(res.job.id)
    assert shown.ended[-1].outcome is Outcome.CANCELLED


def test_cancel_entity(awty, home):
    a = awty.add("https://example.com/", in_="2h", entity="order", key="1")
    awty.add("https://example.com/", in_="3h", entity="order", key="1")
    c = awty.add("https://example.com/", in_="2h", entity="order", key="2")
    d = awty.add("https://example.com/", in_="2h", entity="invoice", key="1")
    gone = awty.cancel_entity("order", "1")
    assert len(gone.cancelled) == 2 and a.job.id in gone.cancelled
    left = {r["id"] for r in db_rows(home, "future_job")}
    assert left == {c.job.id, d.job.id}
    assert len(awty.cancel_entity("order").cancelled) == 1
    assert {r["id"] for r in db_rows(home, "future_job")} == {d.job.id}
    assert len(tree_files(home)) == 1


def test_reschedule_moves_row_and_file(awty, home):
    res = awty.add("https://example.com/", in_="2h")
    moved = awty.reschedule(res.job.id, in_="1d")
    assert moved.next_check_at == slot_for(T0 + timedelta(days=1), 15)
    assert moved.first_check_at == res.job.first_check_at  # immutable
    assert tree_files(home) == [f"{slot_id(moved.next_check_at)}/{res.job.id}.json"]
    with pytest.raises(JobNotFound):
        awty.reschedule("01NOSUCHJOB0000000000000000", in_="1h")


def test_add_many_all_or_nothing(awty, home):
    specs = [{"target": "https://example.com/a", "in": "1h"},
             {"target": "https://example.com/b", "in": "2h", "payload": [1, 2]},
             {"target": "ftp://bad", "in": "1h"}]
    with pytest.raises(InvalidInput, match="line 3"):
        awty.add_many(specs)
    assert db_rows(home, "future_job") == [] and tree_files(home) == []
    res = awty.add_many(specs[:2] + [{"target": "echo hi", "kind": "exec", "at": "now"}])
    assert len(res) == 3 and len(db_rows(home, "future_job")) == 3
    assert len(tree_files(home)) == 3


def test_a_big_batch_keeps_its_order_and_leaves_the_cache_as_it_was(awty, home, monkeypatch):
    from awty.store import sqlite_write

    monkeypatch.setattr(sqlite_write, "BIG_BATCH", 2)  # the widened-cache path, on few jobs
    before = awty.store.conn.execute("PRAGMA cache_size").fetchone()[0]
    specs = [{"target": "https://example.com/", "in": f"{h}h", "entity": "e", "key": str(h)}
             for h in (3, 1, 2, 1)]
    res = awty.add_many(specs)
    assert [r.job.entity_key for r in res] == ["3", "1", "2", "1"]  # as given, not id order
    assert sorted(r["id"] for r in db_rows(home, "future_job")) == sorted(r.job.id for r in res)
    assert len(tree_jobs(home)) == 4 and len(tree_files(home)) == 3  # two in one batch file
    dup = [{"target": "https://example.com/", "in": "1h", "id": res[0].job.id},
           {"target": "https://example.com/", "in": "1h"}]
    with pytest.raises(Conflict):
        awty.add_many(dup)
    assert len(db_rows(home, "future_job")) == 4 and len(tree_jobs(home)) == 4
    assert awty.store.conn.execute("PRAGMA cache_size").fetchone()[0] == before


def test_a_key_needs_an_entity(awty, home):
    with pytest.raises(InvalidInput, match="^key: given without entity"):
        awty.add("https://example.com/", in_="1h", key="42")
    with pytest.raises(InvalidInput, match="^line 2: key: given without entity"):
        awty.add_many([{"target": "https://example.com/", "in": "1h"},
                       {"target": "https://example.com/", "in": "1h", "key": "42"}])
    assert db_rows(home, "future_job") == []


def test_list_filters_and_order(awty):
    b = awty.add("https://example.com/", in_="3h", entity="e")
    a = awty.add("https://example.com/", in_="1h")
    assert [j.id for j in awty.list()] == [a.job.id, b.job.id]
    assert [j.id for j in awty.list(entity="e")] == [b.job.id]
    assert [j.id for j in awty.list(slot=a.slot)] == [a.job.id]


def test_unknown_config_key_is_an_error(home, clock):
    home.mkdir(parents=True)
    (home / "awty.toml").write_text("resolutoin = 5\n")
    with pytest.raises(InvalidInput, match="unknown setting 'resolutoin'"):
        Awty(home, clock=clock, env={})
    (home / "awty.toml").write_text("resolution = 7\n")
    with pytest.raises(InvalidInput, match="divide the hour"):
        Awty(home, clock=clock, env={})


def test_env_overrides_file_and_flags_override_env(home, clock):
    home.mkdir(parents=True)
    (home / "awty.toml").write_text("resolution = 5\nmax_checks = 3\n")
    a = Awty(home, clock=clock, env={"AWTY_RESOLUTION": "10"})
    assert a.settings.resolution == 10 and a.settings.max_checks == 3
    b = Awty(home, clock=clock, env={"AWTY_RESOLUTION": "10"}, resolution=1)
    assert b.settings.resolution == 1


def test_ids_in_any_case_and_unique_prefixes(awty, home):
    jobs = [awty.add("https://example.com/", in_="2h").job for _ in range(3)]
    j = jobs[0]
    assert awty.get(j.id.lower()).id == j.id
    # ids of one moment differ by a random step of up to 32 bits: 24 characters leave out the
    # last 10 bits, so a prefix this long is unique (20 characters, 30 bits, were not always)
    assert awty.get(j.id[:24].lower()).id == j.id  # a unique prefix
    with pytest.raises(InvalidInput, match="ambiguous") as e:
        awty.get(j.id[:6])  # created the same millisecond: the first characters are shared
    assert all(x.id in str(e.value) for x in jobs)
    with pytest.raises(InvalidInput, match="too short"):
        awty.get(j.id[:5])
    with pytest.raises(JobNotFound):
        awty.get("7ZZZZZZZZZ")
    moved = awty.reschedule(jobs[1].id[:24].lower(), in_="1d")
    assert moved.id == jobs[1].id
    res = awty.cancel(jobs[2].id.lower())  # one id as a str
    assert res.cancelled == [jobs[2].id]
    assert [x.id for x in awty.retry(jobs[2].id[:24])] == [jobs[2].id]
    assert awty.count() == 3 and awty.count(until=j.next_check_at) == 2


def test_cli_ambiguous_prefix_is_exit_2_listing_candidates(awty, home):
    from typer.testing import CliRunner

    from awty.cli import app

    jobs = [awty.add("https://example.com/", in_="2h").job for _ in range(2)]
    res = CliRunner().invoke(app, ["show", jobs[0].id[:8].lower(), "--home", str(home)],
                             env={"AWTY_NOW": "2026-11-22T10:07:12Z"})
    assert res.exit_code == 2, res.output
    assert "ambiguous" in res.output and jobs[0].id in res.output and jobs[1].id in res.output


# --- plain results a web handler can serialise (issue 30, item 14) -----------------------------
def test_cancel_results_are_ids_of_one_kind_and_serialise(awty):
    a = awty.add("https://example.com/", in_="2h", entity="order", key="1").job
    b = awty.add("https://example.com/", in_="2h", entity="order", key="1").job
    res = awty.cancel_entity("order", "1")  # (running jobs: the store contract tests)
    assert sorted(res.cancelled) == sorted([a.id, b.id]) and res.running == []
    assert res.missing == []
    assert all(isinstance(x, str) for x in res.cancelled + res.running + res.missing)
    assert json.loads(json.dumps(res.as_dict())) == {
        "cancelled": res.cancelled, "running": [], "missing": []}
    assert res.jobs[a.id].entity_key == "1"  # the jobs behind the ids, for who needs them
    again = awty.cancel([a.id, "01NOSUCHJOB0000000000000000"])
    assert again.as_dict() == {"cancelled": [], "running": [],
                               "missing": [a.id, "01NOSUCHJOB0000000000000000"]}


def test_get_returns_one_type_pending_or_ended(awty):
    from awty import JobView

    job = awty.add("https://example.com/", in_="2h", payload={"n": 1}).job
    view = awty.get(job.id)
    assert isinstance(view, JobView) and view.state == "pending" and view.job == job
    assert view.ended == [] and view.id == job.id
    doc = json.loads(json.dumps(view.as_dict()))
    assert doc["state"] == "pending" and doc["payload"] == {"n": 1} and doc["id"] == job.id
    awty.cancel(job.id)
    view = awty.get(job.id)
    assert isinstance(view, JobView) and view.state == "ended" and view.job is None
    assert [h.outcome for h in view.ended] == [Outcome.CANCELLED]
    doc = json.loads(json.dumps(view.as_dict()))
    assert doc["state"] == "ended" and doc["outcome"] == "cancelled"


def test_a_naive_datetime_is_local_time_everywhere(home, clock):
    from datetime import datetime as dt, timezone

    berlin = timezone(timedelta(hours=1))  # the zone the Awty reads wall times in
    with Awty(home, clock=clock, env={}, tz=berlin) as a:
        naive = dt(2026, 11, 22, 13, 7, 12)  # 12:07:12 UTC
        aware = naive.replace(tzinfo=berlin)
        j1 = a.add("https://example.com/", at=naive).job
        j2 = a.add("https://example.com/", at=aware).job
        assert j1.first_check_at == j2.first_check_at == aware
        slot = dt(2026, 11, 22, 13, 15)  # the 12:15 UTC slot, as local wall time
        assert {j.id for j in a.list(slot=slot)} == {j1.id, j2.id}
        assert a.count(until=slot) == 2 and a.count(until=dt(2026, 11, 22, 13, 0)) == 0
        a.cancel(j1.id)
        assert [h.id for h in a.history(since=dt(2026, 11, 22, 11, 0))] == [j1.id]
        assert a.history(since=dt(2026, 11, 22, 11, 8)) == []  # 10:08 UTC: after the cancel
        clock.set(aware + timedelta(minutes=10))  # past the slot's boundary
        assert a.run_slot(slot, dry_run=True).outcomes == {"would_fire": 1}


@pytest.mark.slow
def test_one_awty_shared_by_a_web_apps_threads(home, clock, backend):
    """What a Flask or FastAPI app does with one ``Awty`` per process: many worker threads
    adding, reading and cancelling at once, the first calls racing to open the store."""
    from concurrent.futures import ThreadPoolExecutor

    a = Awty(home, clock=clock, env={}, **backend.kw)
    try:
        def handler(i: int) -> dict:
            added = a.add("https://example.com/hook", in_="2h", entity="order", key=str(i),
                          payload={"i": i})
            view = a.get(added.job.id)
            assert view.job is not None and view.job.payload == {"i": i}
            assert sum(1 for _ in a.list(entity="order", key=str(i))) == 1
            if i % 2:
                assert a.cancel_entity("order", str(i)).cancelled == [added.job.id]
            return json.loads(json.dumps(a.get(added.job.id).as_dict()))

        with ThreadPoolExecutor(16) as pool:
            docs = list(pool.map(handler, range(200)))
        assert [d["state"] for d in docs] == ["pending" if i % 2 == 0 else "ended"
                                              for i in range(200)]
        assert a.count() == 100 and len(a.history(outcome="cancelled")) == 100
    finally:
        a.close()


def test_add_parts_each_part_its_own_environment_and_directory(awty, tmp_path):
    # serve's group commit: the parts of two tokens, the same specs (the same dicts even),
    # each part's jobs built for it alone (its token's directory and environment), not from
    # what the part before it shared with them
    from awty import jobspec
    from awty.api import AddPart

    specs = [{"target": "echo hi", "kind": "exec", "in": "1h"},
             {"target": "https://example.com/", "in": "1h"}]
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_env, b_env = {"PATH": "/a", "GREETING": "a"}, {"PATH": "/b", "GREETING": "b"}
    got = awty.add_parts([AddPart(specs, str(a_dir), a_env), AddPart(specs, str(b_dir), b_env)])
    for results, cwd, env in ((got[0], a_dir, a_env), (got[1], b_dir, b_env)):
        for r, spec in zip(results, specs, strict=True):
            alone, _ = jobspec.build(spec, now=awty.clock.now(), settings=awty.settings,
                                     local=awty.tz, cwd=str(cwd), environ=env)
            assert r.job.replace(id=alone.id) == alone
        assert results[0].job.env["GREETING"] == env["GREETING"]
        assert awty.get(results[0].job.id).job.cwd == str(cwd)
