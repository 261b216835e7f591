"""The store contract (awty/store/base.py), checked against every store. serve's tokens (awty
token): kept by hash, their options, revoked at once, their ref. Each test calls ``Store``
methods directly, on a fresh store per test (see conftest.py); the suite's vocabulary is
contractkit.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awty.errors import Conflict
from contractkit import NOW


def test_tokens_are_kept_by_hash_with_their_options_and_revoked_at_once(store, case):
    from awty.model import ApiToken

    t = ApiToken("svc", ("jobs:read", "jobs:write"), NOW, None, ("https://a.example/",),
                 "/srv/jobs", {"PATH": "/bin"})
    store.add_token(t, "h1")
    with pytest.raises(Conflict, match="a token named 'svc' exists"):
        store.add_token(ApiToken("svc", ("admin",), NOW), "h2")
    [got] = store.tokens()
    assert (got.name, got.scopes, got.allow_callbacks, got.exec_dir, got.exec_env) == (
        "svc", ("jobs:read", "jobs:write"), ("https://a.example/",), "/srv/jobs",
        {"PATH": "/bin"})
    assert got.created_at == NOW and got.last_used_at is None
    assert store.token_for("nope", NOW) is None
    assert store.token_for("h1", NOW).name == "svc"
    # the last use is written at most once a minute (a token's every request is no write)
    store.token_for("h1", NOW + timedelta(seconds=30))
    assert store.tokens()[0].last_used_at == NOW
    store.token_for("h1", NOW + timedelta(minutes=2))
    assert store.tokens()[0].last_used_at == NOW + timedelta(minutes=2)
    other = case.open()  # another process's connection sees the revoke at once
    try:
        assert other.token_for("h1", NOW) is not None
        # a new environment for its jobs (read when they run): seen by the other at once,
        # everything else of the token kept
        changed = store.set_token_env("svc", {"PATH": "/usr/bin", "DB": "postgresql://x"})
        assert changed is not None and changed.exec_env == {"PATH": "/usr/bin",
                                                             "DB": "postgresql://x"}
        seen = other.token_named("svc")
        assert (seen.scopes, seen.allow_callbacks, seen.exec_dir, seen.exec_env) == (
            ("jobs:read", "jobs:write"), ("https://a.example/",), "/srv/jobs",
            {"PATH": "/usr/bin", "DB": "postgresql://x"})
        assert other.token_for("h1", NOW).exec_env == seen.exec_env
        assert store.set_token_env("nope", {}) is None and store.token_named("nope") is None
        assert store.revoke_token("svc") and not store.revoke_token("svc")
        assert other.token_for("h1", NOW) is None and other.tokens() == []
        assert other.token_named("svc") is None
    finally:
        other.close()


def test_a_tokens_ref_is_kept_and_tells_a_new_token_of_its_name_apart(store):
    from awty import tokens

    first = tokens.make("ops", "jobs:exec", NOW)
    store.add_token(first, "h1")
    assert first.ref and store.token_named("ops").ref == first.ref
    store.revoke_token("ops")
    store.add_token(tokens.make("ops", "jobs:exec", NOW), "h2")
    assert store.token_named("ops").ref not in (None, first.ref)


def test_an_add_checks_the_tokens_it_is_given_in_its_own_transaction(store, case):
    # serve's adds re-check the tokens they took from their cache in the add itself: a token
    # revoked by another process stops the whole add, nothing of it stored; the last use of
    # the others is noted there as token_for notes it (at most once a minute)
    from awty.errors import Revoked
    from awty.model import ApiToken
    from contractkit import mk

    store.add_token(ApiToken("a", ("jobs:write",), NOW), "ha")
    store.add_token(ApiToken("b", ("jobs:write",), NOW), "hb")
    one, two, three = mk(), mk(), mk()
    assert [x.job.id for x in store.add([one], [None], tokens={"ha", "hb"}, now=NOW)] == [one.id]
    assert {t.name: t.last_used_at for t in store.tokens()} == {"a": NOW, "b": NOW}
    other = case.open()
    try:
        assert other.revoke_token("b")
        with pytest.raises(Revoked) as refused:
            store.add([two, three], [None, None], tokens={"ha", "hb", "nope"},
                      now=NOW + timedelta(minutes=2))
        assert refused.value.hashes == {"hb", "nope"}
        assert store.get(two.id) is None and store.get(three.id) is None
        assert store.tokens()[0].last_used_at == NOW  # the refused add noted nothing
        store.add([two], [None], tokens={"ha"}, now=NOW + timedelta(seconds=30))
        assert store.get(two.id) is not None and store.tokens()[0].last_used_at == NOW
        store.add([three], [None], tokens={"ha"}, now=NOW + timedelta(minutes=2))
        assert other.tokens()[0].last_used_at == NOW + timedelta(minutes=2)
    finally:
        other.close()
