"""Turning what a user gives (flags, a batch line, a dropped-in envelope) into a ``Job``.
Every way in goes through ``build``, so every guard at add time lives here, once."""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache

from .config import Settings
from .errors import InvalidInput
from .ids import is_id, new_id
from .model import Job, Kind, Status
from .slots import ceil_second, parse_duration, slot_for
from .storable import is_storable
from .when import parse_when

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

SPEC_KEYS = frozenset({
    "target", "at", "in", "kind", "payload", "payload_json", "entity", "key",
    "idempotency_key", "headers", "max_checks", "horizon", "timeout", "max_attempts",
    "misfire_grace", "id", "cwd",
})
_MAX_TEXT = 1024
DROPIN_REFUSAL = "{kind} jobs may not be dropped in (dropin_kinds allows {allowed})"
# json.dumps with non-default options builds a new encoder per call: build it once.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_COMPACT = _ENCODER.encode
# Its C part, made once: ``encode`` makes a new one per call, with a dict of the containers
# seen to refuse a circular one; without it (None) a circular payload recurses until a
# RecursionError, and then goes through ``encode`` for its message. Half a payload's cost.
_MAKE = getattr(json.encoder, "c_make_encoder", None)  # None: a Python without _json
_FAST = _MAKE and _MAKE(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
                        False, False, False)


def fingerprint(job: Job) -> str:
    """What makes two adds "the same job" for an idempotency key: everything but the time
    (a client retrying "in 2h" a few seconds later asks for the same job)."""
    import hashlib  # only an idempotency key needs it; its import costs every `awty add`

    data = [job.kind.value, job.target, job.payload_json, sorted(job.headers.items()),
            job.entity_name, job.entity_key]
    return hashlib.sha256(json.dumps(data, separators=(",", ":")).encode()).hexdigest()[:32]


def build(spec: dict[str, Any], *, now: datetime, settings: Settings,
          local: tzinfo | None = None, cwd: str | None = None,
          due: datetime | None = None, kinds: Collection[str] | None = None,
          environ: Mapping[str, str] | None = None,
          memo: dict[Any, Any] | None = None,
          kind_refusal: str = DROPIN_REFUSAL) -> tuple[Job, str | None]:
    """Validate one job spec; raises ``InvalidInput`` naming the offending field.
    ``due`` (used for dropped-in envelopes) replaces at/in, and then the job's kind must be one
    of ``kinds`` (default: the ``dropin_kinds`` setting; ``kind_refusal`` says why another is
    refused, with ``{kind}`` and ``{allowed}``). An exec job added (not dropped in)
    records ``environ`` (default: this process's) when ``exec_env`` is on, or when given.
    ``memo``: a dict shared by the builds of one batch (same ``now``, ``settings`` and
    ``local``), which then checks each distinct URL and time once."""
    if not isinstance(spec, dict):
        raise InvalidInput("not a JSON object")
    if not SPEC_KEYS.issuperset(spec):
        unknown = set(spec) - SPEC_KEYS
        raise InvalidInput(f"unknown field(s): {', '.join(map(repr, sorted(unknown)))}")
    if kinds is None and due is not None:
        kinds = settings.dropin_kinds
    kind = checked_kind(spec.get("kind", "http"), kinds, kind_refusal)
    target = _target(kind, spec.get("target"), settings, memo)
    payload_json = payload_text(spec, settings)
    headers = _headers(spec.get("headers"))
    if headers and kind is not Kind.HTTP:
        raise InvalidInput("headers: only http jobs send headers")
    if due is not None:
        first = ceil_second(due)
        slot = slot_for(first, settings.resolution)
    else:
        first, slot = _first_and_slot(spec, now, settings, local, memo)
    job_cwd = _cwd(spec.get("cwd") or cwd) if kind is not Kind.HTTP else None
    if kind is Kind.PYTHON and due is None:
        _check_call(target, job_cwd or os.getcwd(), memo)
    entity, key = _text(spec, "entity"), _text(spec, "key")
    if key is not None and entity is None:
        # a key alone would match any entity's "42": cancel --entity order --key 42 would
        # never find the job, and another entity's 42 would be mistaken for it
        raise InvalidInput("key: given without entity (a key names one entity's instance: "
                           "--entity order --key 42)")
    job_id = spec.get("id")
    job = Job(
        id=new_id(first) if job_id is None else checked_id(job_id), kind=kind, target=target, payload_json=payload_json,
        headers=headers, entity_name=entity, entity_key=key,
        first_check_at=first, next_check_at=slot,
        status=Status.PENDING,
        max_checks=_int(spec, "max_checks", 0), max_attempts=_int(spec, "max_attempts", 1),
        horizon=_secs(spec, "horizon"), timeout=_secs(spec, "timeout"),
        misfire_grace=_secs(spec, "misfire_grace"),
        idempotency_key=_text(spec, "idempotency_key"),
        cwd=job_cwd,
        created_at=now, updated_at=now,
        env=_job_env(kind, environ, settings) if due is None else None,
    )
    # Only an idempotency key needs the fingerprint; hashing every job would cost ~10% of add.
    return job, fingerprint(job) if job.idempotency_key else None


def rebuild(job: Job, *, now: datetime, settings: Settings, kinds: Collection[str],
            kind_refusal: str) -> tuple[Job, str | None]:
    """A whole job given from outside (``awty import``: an export's pending job, or the job a
    history row keeps) through the checks of ``add`` (``build``: id, kind, target and the
    network rules, payload size, headers, texts, guards), due at its ``first_check_at``,
    only of ``kinds``; what it carries beyond a spec (its slot, counts, times, environment)
    checked and kept, as pending. Returns it with its fingerprint, as ``build``; raises
    ``InvalidInput`` naming the field. ``job`` may hold anything: it was read, not built."""
    spec = {"id": job.id, "kind": getattr(job.kind, "value", job.kind), "target": job.target,
            "payload_json": job.payload_json, "headers": job.headers or None,
            "entity": job.entity_name, "key": job.entity_key,
            "idempotency_key": job.idempotency_key, "max_checks": job.max_checks,
            "horizon": job.horizon, "timeout": job.timeout, "max_attempts": job.max_attempts,
            "misfire_grace": job.misfire_grace, "cwd": job.cwd}
    first = _time(job.first_check_at, "first_check_at")
    built, fp = build({k: v for k, v in spec.items() if v is not None}, now=now,
                      settings=settings, due=first, kinds=kinds, kind_refusal=kind_refusal)
    env = job.env
    if built.kind is Kind.HTTP or env is None:
        env = None
    elif not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in env.items()):
        raise InvalidInput("env: must be an object of NAME: value text")
    else:
        # what add would keep of it: no credential, no NUL; a token's reference as it is
        env = _job_env(built.kind, env, settings)
    last_error = job.last_error
    if last_error is not None:
        if not isinstance(last_error, str):
            raise InvalidInput("last_error: must be text")
        from .store.rules import kept

        last_error = kept(last_error)  # a run wrote it: escaped as runs' texts are
    return built.replace(
        next_check_at=slot_for(_time(job.next_check_at, "next_check_at"), settings.resolution),
        check_count=_count(job.check_count, "check_count"),
        attempt=_count(job.attempt, "attempt"),
        created_at=_time(job.created_at, "created_at", optional=True),
        updated_at=_time(job.updated_at, "updated_at", optional=True),
        last_error=last_error, env=env,
        schedule=_text({"schedule": job.schedule}, "schedule"),
        occurrence=_time(job.occurrence, "occurrence", optional=True)), fp


def _time(value: Any, name: str, optional: bool = False) -> Any:
    if (value is None and optional) or (isinstance(value, datetime)
                                        and value.tzinfo is not None):
        return value
    raise InvalidInput(f"{name}: not a time with a zone")


def _count(value: Any, name: str) -> int:
    n = _int({name: value}, name, 0)
    if n is None:
        raise InvalidInput(f"{name}: missing")
    return n


def build_dropin(data: dict[str, Any], name_id: str | None, *, now: datetime,
                 settings: Settings, slot: datetime,
                 kinds: Collection[str] | None = None) -> tuple[Job, str | None]:
    """A job from an envelope dropped into ``slot`` (its due time), named ``name_id`` by its
    file. Only the kinds in ``kinds`` (default: the ``dropin_kinds`` setting) may be created:
    a file planted in the slot tree must not run a command. Raises ``InvalidInput``."""
    return build(envelope_spec(data, name_id), now=now, settings=settings, due=slot,
                 kinds=settings.dropin_kinds if kinds is None else kinds)


def envelope_spec(data: dict[str, Any], name_id: str | None) -> dict[str, Any]:
    """A dropped-in envelope uses the names of a batch line (plus ``id``); the slot it sits in
    is its due time. Fields the runner writes itself (v, next_check_at…) are ignored."""
    spec = {k: v for k, v in data.items()
            if k not in ("v", "first_check_at", "next_check_at", "check_count")}
    if "id" not in spec and name_id and is_id(name_id):
        spec["id"] = name_id
    return spec


def _job_env(kind: Kind, environ: Mapping[str, str] | None,
             settings: Settings) -> dict[str, str] | None:
    """What an added job keeps as its environment: an exec job, what ``capture`` keeps of
    ``environ`` (default: this process's) when ``exec_env`` is on or ``environ`` is given; an
    exec or python job added over HTTP, the reference to its token (``execenv.token_ref``);
    else nothing (it runs in the runner's)."""
    if kind is Kind.HTTP or (environ is None and (kind is Kind.PYTHON or not settings.exec_env)):
        return None
    from .execenv import capture, token_of

    if environ is not None and token_of(environ) is not None:
        return dict(environ)
    if kind is Kind.PYTHON:
        return None
    return capture(os.environ if environ is None else environ, allow=settings.exec_env_allow)


_KINDS = {k.value: k for k in Kind}  # a dict lookup, not an Enum call: batches build many jobs


def checked_kind(value: Any, kinds: Collection[str] | None,
                 refusal: str = DROPIN_REFUSAL) -> Kind:
    """``value`` as a Kind, one of ``kinds`` (None: any); ``refusal`` says why not."""
    kind = _kind(value)
    if kinds is not None and kind.value not in kinds:
        allowed = ", ".join(kinds) or "none"
        raise InvalidInput("kind: " + refusal.format(kind=kind.value, allowed=allowed))
    return kind


def checked_id(value: Any) -> str:
    """A job id given (not made here): awty's id format, nothing else (it names a file)."""
    if not isinstance(value, str) or not is_id(value):
        raise InvalidInput(f"id: {_shown(value)} is not an awty id "
                           "(26 Crockford base32 characters)")
    return value


def _kind(value: Any) -> Kind:
    try:
        return _KINDS[value]
    except (KeyError, TypeError):
        raise InvalidInput(f"kind: {_shown(value)} is not one of http, exec, python") from None


def _shown(value: Any) -> str:
    """``repr(value)`` for a refusal: an int past Python's 4,300 digits has none (ValueError)."""
    try:
        return repr(value)
    except ValueError:
        return "a number of over 4300 digits"


def _first_and_slot(spec: dict[str, Any], now: datetime, settings: Settings,
                    local: tzinfo | None,
                    memo: dict[Any, Any] | None) -> tuple[datetime, datetime]:
    at, within = spec.get("at"), spec.get("in")
    key = ("when", when_key(at, within))
    if memo is not None:
        try:
            return memo[key]  # type: ignore[no-any-return]  # what an earlier call returned
        except (KeyError, TypeError):  # TypeError: unhashable, refused below
            pass
    first = ceil_second(due_time(spec, now, settings, local))
    found = first, slot_for(first, settings.resolution)
    if memo is not None:
        memo[key] = found
    return found


def when_key(at: Any, within: Any) -> Any:
    """What a batch keeps the time of ``at``/``in`` under, read once: the values with their
    types (True == 1 == 1.0, but they do not read alike), a float as its text (-0.0 == 0.0,
    and ``at`` and ``in`` read them alike; kept apart all the same, as an entity's are)."""
    if type(at) is float or type(within) is float:
        return (type(at), repr(at) if type(at) is float else at,
                type(within), repr(within) if type(within) is float else within)
    return (type(at), at, type(within), within)


def _target(kind: Kind, value: Any, settings: Settings,
            memo: dict[Any, Any] | None = None) -> str:
    if memo is not None and kind is Kind.HTTP:
        try:
            return memo["url", value]  # type: ignore[no-any-return]  # only checked ones
        except (KeyError, TypeError):
            pass
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("target: missing (a URL, a shell command or module:function)")
    if len(value) > 8192:
        raise InvalidInput("target: longer than 8192 characters")
    if not is_storable(value):
        raise InvalidInput("target: contains a NUL or bytes that are not UTF-8 text")
    if kind is Kind.HTTP:
        if "://" not in value:
            _refuse_non_url(value.strip())
        checked = _checked_url(value.strip(), settings)
        if memo is not None:
            memo["url", value] = checked
        return checked
    if kind is Kind.PYTHON and not _py_target(value.strip()):
        raise InvalidInput(f"target: {value!r} is not package.module:function")
    return value


def _refuse_non_url(text: str) -> None:
    """A target without ``scheme://`` given as a URL is most often a command or a function
    that lost its ``--exec``/``--call``: say which, rather than only "not a URL"."""
    import re

    from .netguard import _short

    host = re.fullmatch(r"([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)(:\d+)?(/\S*)?", text)
    if _py_target(text):
        hint = "--call"
    elif host and (host[3] or "." in host[1] and not re.search(r"\.(sh|py|rb|pl)\b", text)):
        local = host[1] == "localhost" or re.fullmatch(r"[\d.]+", host[1])
        hint = f"{'http' if local else 'https'}://{text} (or --exec for a command)"
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]*:\S", text):
        return  # another scheme (mailto:, file:): check_url says which ones are allowed
    else:
        hint = "--exec"
    raise InvalidInput(f"target {_short(text)!r}: not a URL; did you mean {hint}?")


def _check_call(target: str, directory: str, memo: dict[Any, Any] | None) -> None:
    """A python job added (not dropped in): its names are Python names and its module can be
    found from ``directory``, where the worker will look (``pyfind``)."""
    from . import pyfind

    target = target.strip()
    name = pyfind.bad_name(target)
    if name is not None:
        raise InvalidInput(f"target {target!r}: {name!r} is not a valid Python name")
    module = target.partition(":")[0]
    key = ("module", module, directory)
    found = memo.get(key) if memo is not None else None
    if found is None:
        found = pyfind.findable(module, directory)
        if memo is not None:
            memo[key] = found
    if not found:
        raise InvalidInput(f"cannot find module {module} from {directory}")


def _py_target(text: str) -> bool:
    from .wire import PY_TARGET

    return PY_TARGET.match(text) is not None


@lru_cache(maxsize=1024)
def _checked_url(url: str, settings: Settings) -> str:
    # Cached: a batch usually sends many jobs to a few URLs; refusals raise and are not cached.
    from .netguard import check_url

    return check_url(url, settings)


def payload_text(spec: dict[str, Any], settings: Settings) -> str:
    """The payload of ``spec`` (``payload_json`` text, else ``payload``) as stored: compact JSON,
    storable, within ``max_payload_bytes``."""
    if "payload_json" in spec and spec["payload_json"] is not None:
        raw = spec["payload_json"]
        try:
            value = json.loads(raw)
        except (ValueError, TypeError) as e:
            raise InvalidInput(f"payload: not JSON ({e})") from None
        except RecursionError:
            raise InvalidInput("payload: JSON nested too deeply") from None
    else:
        value = spec.get("payload")
    try:
        try:
            text = "".join(_FAST(value, 0)) if _FAST else _COMPACT(value)
        except (ValueError, TypeError, RecursionError):
            text = _COMPACT(value)  # raises again, with the message of the refusal
        # a lone surrogate ("\ud800") cannot be stored: encode() refuses it here
        size = len(text) if text.isascii() else len(text.encode())
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"payload: cannot be stored as JSON ({e})") from None
    except RecursionError:
        raise InvalidInput("payload: JSON nested too deeply") from None
    if size > settings.max_payload_bytes:
        raise InvalidInput(f"payload: {size} bytes is over the limit of "
                           f"{settings.max_payload_bytes} (max_payload_bytes)")
    return text


def _headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    items: list[tuple[Any, Any]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = []
        for h in value:
            if not isinstance(h, str) or ":" not in h:
                raise InvalidInput(f"header: {_shown(h)} is not 'Name: value'")
            name, _, v = h.partition(":")
            items.append((name.strip(), v.strip()))
    else:
        raise InvalidInput("headers: must be an object of name: value")
    from . import wire  # a plain job has no headers: its start-up skips the header rules

    out: dict[str, str] = {}
    for name, v in items:
        if not isinstance(name, str):  # wire's refusal, without repr() of a huge int
            raise InvalidInput(f"header: {_shown(name)} is not a valid header name")
        refusal = wire.header_refusal(name, v)
        if refusal is None and not is_storable(v):
            refusal = f"the value of {name} is not UTF-8 text"
        if refusal is not None:
            raise InvalidInput(f"header: {refusal}")
        out[name] = v
    if len(out) > wire.MAX_HEADERS:
        raise InvalidInput(f"headers: at most {wire.MAX_HEADERS}")
    return out


def due_time(spec: dict[str, Any], now: datetime, settings: Settings,
             local: tzinfo | None) -> datetime:
    """The due time from ``at`` or ``in``, with the add-time guards (not in the past, not
    beyond max_delay). Used by add and by reschedule."""
    at, within = spec.get("at"), spec.get("in")
    if at is not None and within is not None:
        raise InvalidInput("give either at or in, not both")
    if at is None and within is None:
        raise InvalidInput("missing time: give --at WHEN or --in DURATION")
    if within is not None:
        try:
            due = now + timedelta(seconds=parse_duration(within))
        except (ValueError, OverflowError) as e:
            raise InvalidInput(f"in: {e}") from None
        is_now = parse_duration(within) == 0
    else:
        if not isinstance(at, str | int | float) or isinstance(at, bool):
            raise InvalidInput(f"at: {at!r} is not a time")
        # A number reads as its text, -0.0 as 0.0's: its "-0.0" would read "now - 0.0 s"
        try:  # (str() of an int past Python's 4,300 digits raises ValueError)
            text = at if isinstance(at, str) else str(at + 0.0 if isinstance(at, float) else at)
            due = parse_when(text, now, local)
        except (ValueError, OverflowError) as e:
            raise InvalidInput(f"at: {e}") from None
        is_now = text.strip().lower() == "now"
    if due < now and not is_now:
        raise InvalidInput(f"at: {due.isoformat()} is in the past (now is {now.isoformat()})")
    if (due - now).total_seconds() > settings.max_delay:
        raise InvalidInput(f"at: more than max_delay ({settings.max_delay / 86400:g} days) ahead")
    return max(due, now)


def _text(spec: dict[str, Any], name: str) -> str | None:
    value = spec.get(name)
    if value is None:
        return None
    if type(value) is str and 0 < len(value) <= _MAX_TEXT and is_storable(value):
        return value  # the usual: the checks below, in the order that costs least
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            value = str(value)
        except ValueError:  # an int past Python's 4,300 digits: far over _MAX_TEXT anyway
            value = None
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT \
            or not is_storable(value):
        raise InvalidInput(f"{name}: must be a non-empty string of at most {_MAX_TEXT} characters"
                           " (UTF-8 text, no NUL)")
    return value


def filter_text(name: str, value: str | None) -> str | None:
    """A filter on stored text (``list --entity``). What no job can hold would match nothing;
    it is refused here rather than failing in the store (SQLite cannot encode a lone
    surrogate, PostgreSQL takes no NUL)."""
    if value is not None and not is_storable(value):
        raise InvalidInput(f"{name}: must be UTF-8 text without NUL")
    return value


def _cwd(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 4096 or not is_storable(value):
        raise InvalidInput("cwd: must be a directory path (UTF-8 text, no NUL)")
    return value


def _int(spec: dict[str, Any], name: str, minimum: int) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # JSON's 3.0 is a whole number
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput(f"{name}: {value!r} is not a whole number")
    try:
        n = int(value)
    except ValueError:
        raise InvalidInput(f"{name}: {value!r} is not a whole number") from None
    if n < minimum or n > 1_000_000:
        raise InvalidInput(f"{name}: must be between {minimum} and 1000000")
    return n


def _secs(spec: dict[str, Any], name: str) -> float | None:
    value = spec.get(name)
    if value is None:
        return None
    try:
        secs = parse_duration(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidInput(f"{name}: {e}") from None
    if secs <= 0 or secs > 10 * 365 * 86400:
        raise InvalidInput(f"{name}: must be more than 0 and at most 10 years")
    return secs
