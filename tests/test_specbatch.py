"""``specbatch.build_many`` (a batch's validation, its shared parts checked once) against
``jobspec.build`` of each spec alone: the same jobs, or the same refusal of the same line."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awty import jobspec
from awty.config import Settings
from awty.errors import InvalidInput
from awty.specbatch import build_many

NOW = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)
URL = "https://example.com/"
ID = "01JD4X00000000000000000000"
ENVIRON = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

TARGETS = {"http": [URL, "https://example.org/a?b=1", f" {URL} "], "exec": ["echo hi"],
           "python": ["json.decoder:JSONDecoder"]}
# What a batch sends: each value build takes, some equal to another of another type
# (1 == 1.0 == True) or of the same (-0.0 == 0.0) that build reads apart.
GOOD = {
    "headers": [None, {}, {"X-A": "1"}, {"X-A": "1", "X-B": "2"}, {"X-B": "2", "X-A": "1"},
                ["X-A: 1"], ("X-A: 1",)],
    "cwd": [None, "", "/tmp", "/"],
    "entity": ["order", 1, 1.0, "1.0", 0.0, -0.0],
    "max_checks": [None, 0, 1, 1.0, "3"],
    "max_attempts": [None, 1, 3, 3.0, "3"],
    "horizon": [None, "1h", 60, 60.5],
    "timeout": [None, "30s", 30, 1, 1.5],
    "misfire_grace": [None, "5m", 300, 7],
    "at": ["2026-11-23T10:00:00Z", "2026-11-22T10:15:00Z", 1, 1.0, "now"],
    "in": ["1m", 60, 60.0, 0, 0.0, -0.0, "90s"],
    "key": [None, "1", 1, 1.0, "1.0"],
    "idempotency_key": ["k1", "k2", 5],
    "id": [ID],
    "payload_json": ['{"a":1}', "[1, 2]", None],
}
# ... and what it refuses (each alone would, too).
BAD = {
    "kind": [None, "ftp", 1, True], "target": ["ftp://example.com/", "example.com/hook",
                                               "no_such_mod:fn", "", None, 5],
    "headers": [{"X-A": 1}, {"X-A": True}, {"Host": "x"}, ["bad"], "str", {"X-A": ["x"]}],
    "cwd": [5, "a\0b"], "entity": [True, "", "x" * 2000, [1]],
    "max_checks": [True, 2.5, -1, [1]], "max_attempts": [True, 0], "horizon": [True, 0, "x"],
    "timeout": [-1, {}], "misfire_grace": [True],
    "at": [True, "2020-01-01T00:00:00Z", "soon", 0.0, -0.0], "in": ["-1m", True, [1]],
    "payload": [float("nan"), "x" * 70_000], "payload_json": ["not json", 5],
    "key": [True, "", "a\0"], "idempotency_key": ["", True], "id": ["nope"], "bogus": [1],
}
SHARED_FIELDS = ("headers", "cwd", "entity", "max_checks", "max_attempts", "horizon",
                 "timeout", "misfire_grace")
PAYLOADS = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                        | st.text(max_size=5),
                        lambda c: st.lists(c, max_size=3)
                        | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=6)


def _spoiled(draw, spec):
    """Now and then one field of ``spec`` given a value build refuses."""
    if not draw(st.integers(0, 5)):
        name = draw(st.sampled_from(sorted(BAD)))
        spec[name] = draw(st.sampled_from(BAD[name]))
    return spec


@st.composite
def shared_part(draw):
    kind = draw(st.sampled_from([None, "http", "exec", "python"]))
    part = {} if kind is None else {"kind": kind}
    part["target"] = draw(st.sampled_from(TARGETS[kind or "http"]))
    for name in SHARED_FIELDS:
        if (name != "headers" or kind in (None, "http")) and draw(st.booleans()):
            part[name] = draw(st.sampled_from(GOOD[name]))
    return _spoiled(draw, part)


@st.composite
def batches(draw):
    """A few shared parts (as a batch has: one target, one set of guards…), each job one of
    them with its own time, payload and key; a field now and then refused."""
    parts = draw(st.lists(shared_part(), min_size=1, max_size=3))
    specs = []
    for _ in range(draw(st.integers(1, 8))):
        spec = dict(draw(st.sampled_from(parts)))
        when = draw(st.sampled_from(["at", "in"]))
        spec[when] = draw(st.sampled_from(GOOD[when]))
        if draw(st.booleans()):
            spec["payload"] = draw(PAYLOADS)
        for name in ("key", "idempotency_key", "id", "payload_json"):
            if not draw(st.integers(0, 3 if name == "key" else 9)):
                spec[name] = draw(st.sampled_from(GOOD[name]))
        if spec.get("key") is not None and spec.get("entity") is None \
                and draw(st.integers(0, 5)):
            spec["entity"] = "order"
        specs.append(_spoiled(draw, spec))
    return specs


def alone(specs, environ, single=False):
    """What each build alone gives, or the refusal of the first bad spec."""
    out = []
    for n, spec in enumerate(specs, 1):
        try:
            out.append(jobspec.build(spec, now=NOW, settings=Settings(), local=UTC,
                                     cwd="/tmp", environ=environ))
        except InvalidInput as e:
            return str(e) if single else f"line {n}: {e}"
    return out


def batched(specs, environ, single=False):
    try:
        jobs, fps = build_many(specs, now=NOW, settings=Settings(), local=UTC, cwd="/tmp",
                               environ=environ, single=single)
    except InvalidInput as e:
        return str(e)
    return list(zip(jobs, fps, strict=True))


def comparable(result, specs):
    """Jobs as dicts; a made id (random) only checked for its form."""
    if isinstance(result, str):
        return result
    out = []
    for (job, fp), spec in zip(result, specs, strict=True):
        d = job.as_dict()
        if spec.get("id") is None:
            assert jobspec.checked_id(d.pop("id"))
        out.append((d, fp))
    return out


@pytest.mark.slow  # a property over 400 batches: ~2 s
@settings(max_examples=400, deadline=None)
@given(batches(), st.sampled_from([None, ENVIRON]), st.booleans())
def test_a_batch_gives_what_each_spec_alone_gives(specs, environ, single):
    want = comparable(alone(specs, environ, single), specs)
    assert comparable(batched(specs, environ, single), specs) == want


def test_a_valid_batch_of_one_shape_is_each_alone():
    specs = [{"target": URL, "at": f"2026-11-23T10:{i % 60:02d}:00Z", "payload": {"n": i},
              "entity": "order", "key": str(i), "headers": {"X-A": "1"}, "max_attempts": 3}
             for i in range(200)]
    got = batched(specs, None)
    assert comparable(got, specs) == comparable(alone(specs, None), specs)
    jobs = [j for j, _ in got]
    assert len({j.id for j in jobs}) == 200
    # each job its own headers: one job's dict is not another's
    assert jobs[0].headers == jobs[1].headers and jobs[0].headers is not jobs[1].headers


def test_ids_of_one_moment_go_up_in_the_order_given():
    specs = [{"target": URL, "at": "2026-11-23T10:00:00Z", "key": str(i), "entity": "e"}
             for i in range(50)]
    ids = [j.id for j, _ in batched(specs, None)]
    assert ids == sorted(ids)


GOOD_LINE = {"target": URL, "in": "1m", "entity": "order", "max_checks": 1, "key": "7"}


@pytest.mark.parametrize("change, message", [
    ({"entity": None}, "line 3: key: given without entity"),
    ({"kind": None}, "line 3: kind: None"),  # given as null: not left out (http)
    ({"max_checks": True}, "line 3: max_checks: True is not a whole number"),  # True == 1
    ({"payload": float("nan")}, "line 3: payload: cannot be stored as JSON"),
    (None, "line 3: not a JSON object"),
])
def test_a_bad_line_after_good_ones_of_its_shape_is_named(change, message):
    bad = "not a dict" if change is None else dict(GOOD_LINE, **change)
    with pytest.raises(InvalidInput, match=message):
        build_many([GOOD_LINE, dict(GOOD_LINE), bad, GOOD_LINE], now=NOW, settings=Settings(),
                   local=UTC, cwd="/tmp", environ=None)


def test_a_circular_payload_is_refused_as_build_refuses_it():
    loop: list = []
    loop.append(loop)
    with pytest.raises(InvalidInput, match="line 1: payload: .*Circular reference"):
        build_many([{"target": URL, "in": "1m", "payload": loop}], now=NOW,
                   settings=Settings(), local=UTC, cwd="/tmp", environ=None)


def _read(read, line):
    try:
        return "ok", read(line)
    except RecursionError:
        return "RecursionError"
    except ValueError as e:
        return "ValueError", str(e)


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.builds(lambda spec, tail: json.dumps(spec) + tail,
              st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3),
                              max_size=3),
              st.sampled_from(["", "\n", " \t\r\n", "\x0b\n", "\u2028", "{}", " x", "\ufeff"])),
    st.text(alphabet='{}[]":, \t\n\r\x0b\u2028\ufeffaN0.-\\eu', max_size=12)))
def test_a_batch_line_reads_as_json_loads_reads_it(line):
    # add --batch reads each line with json's C scanner: what json.loads takes, and no more
    from awty.cli.addjob import _json_line

    assert _read(_json_line, line) == _read(json.loads, line)



@pytest.mark.parametrize("field, values", [
    ("entity", [0.0, -0.0]),  # str() reads them "0.0" and "-0.0"
    ("at", [-0.0, 0.0]),  # both refused alike (a number reads as its text, -0.0 as 0.0's)
])
def test_minus_zero_is_not_taken_for_zero(field, values):
    # -0.0 == 0.0, both floats: a cache keyed on value and type took one for the other
    specs = [{"target": URL, field: v} | ({} if field == "at" else {"in": "1m"})
             for v in values]
    assert comparable(batched(specs, None), specs) == comparable(alone(specs, None), specs)


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from([None, ENVIRON]),
       st.lists(st.sampled_from([{}, {"X-A": "1"}, {"X-A": "2"}, {"X-B": "2", "X-A": "1"}]),
                min_size=8, max_size=8))
def test_a_batch_of_one_dict_changed_between_items_is_each_as_it_was(specs, environ, hs):
    # A caller that fills one dict (and one dict of headers) again for each item, and hands
    # them over as it goes: each job is what its spec was when given, whatever came after.
    import copy

    spec: dict = {}
    headers: dict = {}
    given_ = []

    def fed():
        for s, h in zip(specs, hs):
            spec.clear()
            spec.update(s)
            if s.get("kind", "http") == "http" and "headers" not in s:
                spec["headers"] = h  # the jobs' one change: their headers
            if isinstance(spec.get("headers"), dict):
                headers.clear()
                headers.update(spec["headers"])
                spec["headers"] = headers
            given_.append(copy.deepcopy(spec))
            yield spec

    got = batched(fed(), environ)  # compared once all are given: each job's own dicts
    assert comparable(got, given_) == comparable(alone(given_, environ), given_)


@pytest.mark.parametrize("single", [False, True])
def test_a_spec_that_is_no_object_is_refused_as_build_refuses_it(single):
    # one added alone (single: add, serve's add of one) is named without a line, as build names it
    specs = [GOOD_LINE, "not a dict"]
    want = "not a JSON object" if single else "line 2: not a JSON object"
    assert batched(specs, None, single) == alone(specs, None, single) == want


@pytest.mark.parametrize("field, value", [
    *((f, 10 ** 5000) for f in ("entity", "key", "idempotency_key", "kind", "id")),
    ("headers", [10 ** 5000]), ("headers", {10 ** 5000: "x"})],
    ids=["entity", "key", "idempotency_key", "kind", "id", "header", "header_name"])
def test_a_number_past_pythons_digit_limit_is_refused_naming_its_field(field, value):
    # str() and repr() of an int over 4,300 digits raise ValueError (Python's limit)
    spec = {"target": URL, "in": "1m", "entity": "order", field: value}
    field = field.rstrip("s")  # a header's refusal names the header
    with pytest.raises(InvalidInput, match=f"^{field}: "):
        jobspec.build(spec, now=NOW, settings=Settings(), local=UTC, cwd="/tmp")
    assert batched([spec], None).startswith(f"line 1: {field}: ")


def test_at_minus_zero_is_refused_as_zero_is():
    # A number `at` reads as its text (0 is the hour, 9-11 digits epoch seconds): 0.0 is no
    # time, and -0.0 (== 0.0) read as "now - 0.0 seconds", now
    def refusal(at):
        with pytest.raises(InvalidInput) as e:
            jobspec.build({"target": URL, "at": at}, now=NOW, settings=Settings(), local=UTC)
        return str(e.value)

    assert refusal(-0.0) == refusal(0.0)
