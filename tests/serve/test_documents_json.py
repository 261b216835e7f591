"""``documents.job_json`` (serve's add answers) is ``job_dict``'s JSON, byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awty.documents import _COMPACT, job_dict, job_json
from awty.model import Job, Kind, Status

T0 = datetime(2026, 11, 27, 10, 7, 12, tzinfo=UTC)
times = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                     timezones=st.just(UTC))
texts = st.text(max_size=12)
numbers = st.none() | st.integers(0, 10**12) | st.floats(0, 1e9, allow_nan=False)
payloads = st.recursive(st.none() | st.booleans() | st.integers() | texts
                        | st.floats(allow_nan=False, allow_infinity=False),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(texts, inner, max_size=3), max_leaves=8)


def job(**kw: object) -> Job:
    base: dict[str, object] = dict(
        id="01KAZQ8Y4M7D9N6B5V3C2X1Z0A", kind=Kind.HTTP, target="https://x.test/hook",
        payload_json="null", headers={}, entity_name=None, entity_key=None,
        first_check_at=T0, next_check_at=T0, created_at=T0, updated_at=T0)
    base.update(kw)
    return Job(**base)  # type: ignore[arg-type]


def same(j: Job) -> None:
    assert job_json(j) == _COMPACT(job_dict(j))
    assert json.loads(job_json(j, '"state":"x",', ',"n":[]')) == {
        "state": "x", **job_dict(j), "n": []}


def test_a_plain_job() -> None:
    same(job())


def test_every_field_set() -> None:
    same(job(kind=Kind.EXEC, target="echo \"é\"\n", payload_json='{"a":[1,2.5,"ü"]}',
             headers={"Authorization": "Bearer x", "X-Trace": "t\u2028", "Api-Key": "k"},
             entity_name="order", entity_key="42\t", check_count=3, attempt=2,
             status=Status.IN_FLIGHT, max_checks=5, horizon=86400.0, timeout=2.5,
             max_attempts=4, misfire_grace=0.0, idempotency_key="k-\x00-1",
             lease_until=T0, last_error="HTTP 500: \"no\"\\"))


@pytest.mark.slow  # a property over many jobs: ~4 s
@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(Kind), status=st.sampled_from(Status), target=texts,
       payload=payloads, headers=st.dictionaries(texts, texts, max_size=3),
       entity=st.none() | texts, key=st.none() | texts, first=times, next_=times,
       created=st.none() | times, lease=st.none() | times, n=st.lists(numbers, min_size=5,
                                                                      max_size=5),
       counts=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
       idem=st.none() | texts, error=st.none() | texts)
def test_any_job(kind: Kind, status: Status, target: str, payload: object,
                 headers: dict[str, str], entity: str | None, key: str | None,
                 first: datetime, next_: datetime, created: datetime | None,
                 lease: datetime | None, n: list[float | None], counts: tuple[int, int],
                 idem: str | None, error: str | None) -> None:
    max_checks = n[0] if n[0] is None else int(n[0])
    max_attempts = n[3] if n[3] is None else int(n[3])
    same(job(kind=kind, status=status, target=target, payload_json=_COMPACT(payload),
             headers=headers, entity_name=entity, entity_key=key, first_check_at=first,
             next_check_at=next_, created_at=created, updated_at=created, lease_until=lease,
             check_count=counts[0], attempt=counts[1], max_checks=max_checks, horizon=n[1],
             timeout=n[2], max_attempts=max_attempts, misfire_grace=n[4],
             idempotency_key=idem, last_error=error))
