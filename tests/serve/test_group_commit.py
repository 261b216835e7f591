"""serve's group commit (awty/serve/adds.py): adds that arrive together share a transaction,
yet each request is all or nothing on its own and answered as if it had come alone; a token
the adds took from their cache is refused at once once revoked, on every serve process."""

from __future__ import annotations

import threading

import pytest

import servekit
from helpers import tree_jobs

HOOK = "http://127.0.0.1:9/group"


def at_once(served, calls):
    """Every call from a thread of its own, released together; their answers in order."""
    out = [None] * len(calls)
    go = threading.Barrier(len(calls))

    def one(i, call):
        go.wait()
        out[i] = call()

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def post(served, body, key=None):
    headers = {"Idempotency-Key": key} if key else None
    return lambda: served.call("POST", "/v1/jobs", body, headers=headers)


@pytest.mark.slow
def test_adds_arriving_together_are_answered_each_as_alone(served):
    good = [post(served, {"target": HOOK, "in": "2h", "payload": {"n": i}}) for i in range(16)]
    same = [post(served, {"target": HOOK, "in": "2h"}, key="same") for _ in range(4)]
    clash = [post(served, {"target": HOOK, "in": "1h", "payload": {"v": 1}}, key="clash"),
             post(served, {"target": HOOK, "in": "1h", "payload": {"v": 2}}, key="clash")]
    bad = [post(served, {"target": HOOK, "in": "soon"}) for _ in range(2)]
    batch = [lambda: served.call("POST", "/v1/jobs/batch",
                                 [{"target": HOOK, "in": "2h", "key": str(i), "entity": "b"}
                                  for i in range(5)]),
             lambda: served.call("POST", "/v1/jobs/batch",
                                 [{"target": HOOK, "in": "2h"}, {"target": HOOK, "in": "x"}])]
    got = at_once(served, good + same + clash + bad + batch)
    g, s, c, b, (ok_batch, bad_batch) = (got[:16], got[16:20], got[20:22], got[22:24],
                                         got[24:])
    assert [a.status for a in g] == [201] * 16
    assert sorted(a.status for a in s) == [200, 200, 200, 201]
    assert len({a.body["id"] for a in s}) == 1
    assert sorted(a.status for a in c) == [201, 409]
    assert [(a.status, a.body["field"]) for a in b] == [(400, "in")] * 2
    assert ok_batch.status == 201 and ok_batch.body["created"] == 5
    assert (bad_batch.status, bad_batch.body["index"]) == (400, 1)
    # every job answered 201 is in the store, and in its slot's envelope on SQLite; no other
    created = ([a.body["id"] for a in g] + [s[0].body["id"]]
               + [a.body["id"] for a in c if a.status == 201]
               + [j["id"] for j in ok_batch.body["jobs"]])
    listed = served.walk("/v1/jobs?limit=100", "jobs", 100)
    assert sorted(j["id"] for j in listed) == sorted(created)
    if served.extra["backend"].kind == "sqlite":
        assert sorted(j.split("/")[1] for j in tree_jobs(served.home)) == sorted(created)


@pytest.mark.slow
def test_a_revoked_write_token_is_refused_at_once_by_every_process(served):
    env, home = served.env, served.home
    writer = servekit.awty(home, "token", "new", "writer", "--scope", "jobs:write",
                           env=env).stdout.strip()
    second = servekit.start(home, env)
    try:
        second.check = served.check
        for s in (served, second):  # each process has the token in its cache now
            assert s.call("POST", "/v1/jobs", {"target": HOOK, "in": "1h"},
                          token=writer).status == 201
        assert servekit.awty(home, "token", "revoke", "writer", env=env).returncode == 0
        for s in (served, second):
            for path, body in (("/v1/jobs", {"target": HOOK, "in": "1h"}),
                               ("/v1/jobs/batch", [{"target": HOOK, "in": "1h"}])):
                refused = s.call("POST", path, body, token=writer)
                assert refused.status == 401, refused.body
                assert refused.headers["www-authenticate"].startswith("Bearer")
        assert len(served.walk("/v1/jobs?limit=100", "jobs", 100)) == 2
    finally:
        second.stop()


@pytest.mark.slow  # starts a real awty serve on each store: 3-4 s of setup on a busy machine
def test_add_parts_each_part_alone_in_one_transaction(served):
    """The library's side, where grouping is certain: a bad part gets its error and the others
    are stored; a clash the store refuses sends each part on its own, as if one by one."""
    from awty.api import AddPart, Awty
    from awty.errors import Conflict, InvalidInput

    def job(**f):
        return {"target": HOOK, "in": "2h", **f}

    with Awty(served.home, env={}, **served.extra["backend"].kw) as a:
        got = a.add_parts([AddPart([job(payload=1)], single=True),
                           AddPart([job(), job(**{"in": "x"})]),
                           AddPart([job(key="k", entity="e"), job(key="j", entity="e")])])
        assert len(got[0]) == 1 and got[0][0].created
        assert isinstance(got[1], InvalidInput) and str(got[1]).startswith("line 2: in")
        assert [r.created for r in got[2]] == [True, True]
        got = a.add_parts([AddPart([job(idempotency_key="i", payload=1)], single=True),
                           AddPart([job(idempotency_key="i", payload=1)], single=True),
                           AddPart([job(idempotency_key="i", payload=2)], single=True),
                           AddPart([job(payload=3)], single=True)])
        assert [r[0].created for r in (got[0], got[1], got[3])] == [True, False, True]
        assert got[0][0].job.id == got[1][0].job.id
        assert isinstance(got[2], Conflict)
        assert sorted(str(j.payload) for j in a.list()) == ["1", "1", "3", "None", "None"]


@pytest.mark.slow  # a PostgreSQL schema per store, two Awty on it
def test_add_parts_refuses_a_revoked_tokens_parts_in_the_same_transaction(tmp_path, backend):
    """The tokens serve's adds took from their cache are checked again in the add's own
    transaction (AddPart.token): a part of a token revoked by another process (another Awty
    here) stores nothing and gets Revoked; the other parts of the same call go in, a clash
    among them still sending each on its own."""
    from awty.api import AddPart, Awty
    from awty.errors import Conflict, Revoked
    from awty.tokens import hash_of

    def part(token, *payloads, key=None):
        return AddPart([{"target": HOOK, "in": "2h", "payload": p,
                         **({"idempotency_key": key} if key else {})} for p in payloads],
                       single=len(payloads) == 1, token=hash_of(token))

    home = tmp_path / "home"
    with Awty(home, env={}, **backend.kw) as a, Awty(home, env={}, **backend.kw) as other:
        _, kept = a.new_token("kept", "jobs:write")
        _, gone = a.new_token("gone", "jobs:write")
        got = a.add_parts([part(kept, 1), part(gone, 2)])
        assert [len(r) for r in got] == [1, 1]
        assert all(t.last_used_at is not None for t in a.tokens())  # noted by the add
        other.revoke_token("gone")
        got = a.add_parts([part(kept, 3), part(gone, 4, 5), part(kept, 6),
                           AddPart([{"target": HOOK, "in": "2h", "payload": 7}])])
        assert isinstance(got[1], Revoked)
        assert [len(got[i]) for i in (0, 2, 3)] == [1, 1, 1]
        got = a.add_parts([part(gone, 8), part(kept, 9, key="k"), part(kept, 10, key="k")])
        assert isinstance(got[0], Revoked) and isinstance(got[2], Conflict)
        assert [r.created for r in got[1]] == [True]
        assert sorted(str(j.payload) for j in a.list()) == ["1", "2", "3", "6", "7", "9"]
