"""Validating a batch of job specs (``add_many``, ``add --batch``, ``POST /v1/jobs/batch``)
at a fraction of one ``jobspec.build`` a job.

A batch's specs mostly share everything but their time, payload and key: one target (or a
few), no headers, the same guards. The parts that depend only on those shared fields (kind,
target and its network rules, headers, cwd and the python module's lookup, entity, guards,
the recorded environment) are checked once per distinct set of them; each job checks only
its own fields (time, payload, key, id, idempotency key). The result is what ``build`` gives
the spec alone: a spec the fast path cannot take as a whole (a refusal anywhere, a field
that cannot be a dict key) goes through ``build`` itself, which then names the first fault
in the order it always has."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, tzinfo

from . import jobspec
from .config import Settings
from .errors import InvalidInput
from .ids import new_id_ms
from .model import Job, Kind, Status

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

# What the shared part of a job depends on; everything else in SPEC_KEYS is the job's own.
SHARED = ("kind", "target", "headers", "cwd", "entity", "max_checks", "max_attempts",
          "horizon", "timeout", "misfire_grace")
_PENDING = Status.PENDING


def _frozen(headers: Any) -> Any:
    """Headers as a dict key: their items in order, with their types."""
    if isinstance(headers, dict):
        return (dict, tuple(headers.items()), tuple(map(type, headers)),
                tuple(map(type, headers.values())))
    if isinstance(headers, list):
        return (list, tuple(headers), tuple(map(type, headers)))
    return headers


class _Shared:
    """The checked shared fields of one distinct set of them."""

    __slots__ = (*SHARED, "env")  # each shared field checked, and the environment they give
    kind: Kind
    target: str
    headers: dict[str, str]
    cwd: str | None
    entity: str | None
    max_checks: int | None
    max_attempts: int | None
    horizon: float | None
    timeout: float | None
    misfire_grace: float | None
    env: dict[str, str] | None


def build_many(specs: Iterable[Any], *, now: datetime, settings: Settings,
               local: tzinfo | None, cwd: str, environ: Mapping[str, str] | None,
               single: bool = False, lines: Sequence[int] | None = None
               ) -> tuple[list[Job], list[str | None]]:
    """The jobs of ``specs`` and their fingerprints, each exactly what ``jobspec.build`` gives
    it alone (same ``now``, ``settings``, ``local``, ``cwd``, ``environ``). A bad spec raises
    ``InvalidInput`` with build's message, after ``line N: `` unless ``single``: N is its
    line in ``lines`` (each spec's, in the file it was read from), else its place from 1."""
    jobs: list[Job] = []
    fps: list[str | None] = []
    memo: dict[Any, Any] = {}  # build's: each distinct time and URL checked once
    shared: dict[Any, _Shared] = {}
    # jobspec.when_key -> first due, slot, the first due's ms (its ids')
    times: dict[Any, tuple[datetime, datetime, int]] = {}
    last = _Shared()  # read only once set: no spec's values are None
    last_values: Any = None
    last_types: Any = None
    keys_ok = jobspec.SPEC_KEYS.issuperset
    payload_text = jobspec.payload_text
    first_and_slot = jobspec._first_and_slot
    text = jobspec._text
    when_key = jobspec.when_key
    for n, spec in enumerate(specs, 1):
        job = None  # None: build's, for the job or its refusal's message
        if type(spec) is dict:  # not a dict subclass, nor no dict
            try:
                values = tuple(map(spec.get, SHARED))
                # a kind given as null is refused, left out it is http: build tells them apart
                if keys_ok(spec) and (values[0] is not None or "kind" not in spec):
                    if values[2] is not None:
                        values = values[:2] + (_frozen(values[2]),) + values[3:]
                    # The types are part of the key: True == 1 == 1.0, but they do not read alike
                    types = tuple(map(type, values))
                    if types[4] is float:  # nor do -0.0 == 0.0: an entity's "-0.0" and "0.0"
                        # (the other fields read -0.0 as 0.0, or refuse both alike)
                        values = values[:4] + (repr(values[4]),) + values[5:]
                    if values == last_values and types == last_types:
                        s = last  # a batch's jobs mostly share them with the one before
                    else:
                        key = (values, types)
                        found = shared.get(key)
                        if found is None:
                            found = shared[key] = _checked_shared(spec, settings, cwd, environ,
                                                                  memo)
                        s = found
                        last, last_values, last_types = s, values, types
                    entity_key = text(spec, "key")
                    if entity_key is None or s.entity is not None:
                        at, within = spec.get("at"), spec.get("in")
                        if type(at) is float or type(within) is float:
                            tkey = when_key(at, within)
                        else:  # when_key's, without a call
                            tkey = (type(at), at, type(within), within)
                        when = times.get(tkey)
                        if when is None:
                            first, slot = first_and_slot(spec, now, settings, local, memo)
                            when = times[tkey] = (first, slot, int(first.timestamp() * 1000))
                        first, slot, ms = when
                        job_id = spec.get("id")
                        headers = s.headers
                        env = s.env
                        # By position (half the cost of by name); the tests hold it to build's
                        job = Job(
                            new_id_ms(ms) if job_id is None else jobspec.checked_id(job_id),
                            s.kind, s.target, payload_text(spec, settings),
                            dict(headers) if headers else {}, s.entity, entity_key,
                            first, slot, 0, 0, _PENDING, s.max_checks, s.horizon, s.timeout,
                            s.max_attempts, s.misfire_grace, text(spec, "idempotency_key"),
                            s.cwd, now, now, None, None, None, None,
                            None if env is None else dict(env))
            except (InvalidInput, TypeError):  # TypeError: a field that is no dict key
                job = None
        if job is not None:
            fp = jobspec.fingerprint(job) if job.idempotency_key else None
        else:
            try:
                job, fp = jobspec.build(spec, now=now, settings=settings, local=local,
                                        cwd=cwd, memo=memo, environ=environ)
            except InvalidInput as e:
                if single:
                    raise InvalidInput(str(e)) from None
                raise InvalidInput(f"line {lines[n - 1] if lines else n}: {e}") from None
        jobs.append(job)
        fps.append(fp)
    return jobs, fps


def _checked_shared(spec: dict[str, Any], settings: Settings, cwd: str,
                    environ: Mapping[str, str] | None, memo: dict[Any, Any]) -> _Shared:
    """The checks ``build`` makes of the shared fields (``InvalidInput`` on any refusal)."""
    s = _Shared()
    s.kind = kind = jobspec.checked_kind(spec.get("kind", "http"), None)
    s.target = target = jobspec._target(kind, spec.get("target"), settings, memo)
    s.headers = jobspec._headers(spec.get("headers"))
    if s.headers and kind is not Kind.HTTP:
        raise InvalidInput("headers")
    s.cwd = jobspec._cwd(spec.get("cwd") or cwd) if kind is not Kind.HTTP else None
    if kind is Kind.PYTHON:
        jobspec._check_call(target, s.cwd or os.getcwd(), memo)
    s.entity = jobspec._text(spec, "entity")
    s.max_checks = jobspec._int(spec, "max_checks", 0)
    s.max_attempts = jobspec._int(spec, "max_attempts", 1)
    s.horizon = jobspec._secs(spec, "horizon")
    s.timeout = jobspec._secs(spec, "timeout")
    s.misfire_grace = jobspec._secs(spec, "misfire_grace")
    s.env = jobspec._job_env(kind, environ, settings)
    return s
