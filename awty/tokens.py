"""``awty serve``'s tokens: what a token is allowed (scopes, callback prefixes, where its exec
jobs run), made and checked here, kept by the store as a SHA-256 only (``Store.token_for``).

Over HTTP, exec and python jobs need ``jobs:exec``, which nothing implies (neither
``jobs:write`` nor ``admin``): a write token must not be a remote shell. Such a job has no
adding shell to take a directory and environment from: it runs in the token's ``exec_dir``
(default: the awty home) with ``exec_env`` as its whole environment (default: a minimal
PATH, HOME and LANG), never the serve process's own environment and its secrets.

The job keeps the directory and a reference to the token (``execenv.token_ref``), never the
environment's values: the runner reads the token's ``exec_env`` when the job runs
(``run_environment``), so a changed value reaches the jobs still pending and a revoked token's
jobs fail rather than run. The values are not filtered by ``exec_env_allow``: that setting
decides what of an adding shell's environment may be written into job rows, and these never
are; the token's owner gave each one for these jobs."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from datetime import datetime

from .errors import InvalidInput
from .model import ApiToken
from .storable import is_storable

SCOPES = ("jobs:read", "jobs:write", "jobs:exec", "admin")
PREFIX = "awty_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
# --rate: N requests a second, minute or hour ("100/s", "6000/min", "1/h")
RATE = re.compile(r"\s*([0-9]{1,9})\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*")
PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
           "hour": 3600}
UNITS = {1: "s", 60: "min", 3600: "h"}


def new_secret() -> str:
    """A fresh token: ``awty_`` and 256 random bits, URL-safe."""
    return PREFIX + secrets.token_urlsafe(32)


def hash_of(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def parse_scopes(text: str | Iterable[str]) -> tuple[str, ...]:
    """``jobs:write,jobs:read`` -> the scopes, in ``SCOPES`` order; ``InvalidInput`` for an
    unknown one or none."""
    given = [s.strip() for s in (text.split(",") if isinstance(text, str) else text)
             if s.strip()]
    unknown = [s for s in given if s not in SCOPES]
    if unknown:
        raise InvalidInput(f"--scope: {', '.join(unknown)} is not a scope (those are "
                           f"{', '.join(SCOPES)})")
    if not given:
        raise InvalidInput(f"--scope: give at least one of {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in given)


def parse_rate(text: str) -> tuple[int, int]:
    """``100/s`` -> (100, 1): at most that many requests in that many seconds;
    ``InvalidInput`` otherwise."""
    m = RATE.fullmatch(text)
    if not m or int(m.group(1)) == 0:
        raise InvalidInput(f"--rate: {text!r} is not N/s, N/min or N/h (N at least 1), "
                           "e.g. 100/s")
    return int(m.group(1)), PERIODS[m.group(2)]


def rate_text(count: int, period: int) -> str:
    return f"{count}/{UNITS[period]}"


def make(name: str, scopes: str | Iterable[str], now: datetime, *,
         allow_callbacks: Iterable[str] = (), exec_dir: str | None = None,
         exec_env: Iterable[str] = (), rate: str | None = None) -> ApiToken:
    """A token's record from what ``awty token new`` was given (``InvalidInput`` for a bad
    name, scope, prefix, NAME=VALUE or rate)."""
    if not NAME.fullmatch(name):
        raise InvalidInput(f"token name {name!r}: letters, digits, '.', '_' or '-' (at most "
                           "64, starting with a letter or digit)")
    prefixes = tuple(allow_callbacks)
    for p in prefixes:
        if not p.startswith(("http://", "https://")) or not is_storable(p):
            raise InvalidInput(f"--allow-callbacks: {p!r} is not an http(s) URL prefix")
    env = parse_env(exec_env)
    if exec_dir is not None and (not exec_dir.startswith("/") or not is_storable(exec_dir)):
        raise InvalidInput(f"--exec-dir: {exec_dir!r} must be an absolute path (UTF-8 text)")
    rate = None if rate is None else rate_text(*parse_rate(rate))
    return ApiToken(name, parse_scopes(scopes), now, None, prefixes, exec_dir, env, rate,
                    secrets.token_hex(8))


def parse_env(items: Iterable[str]) -> dict[str, str]:
    """``--exec-env`` NAME=VALUE items -> the environment; ``InvalidInput`` for a bad one."""
    env: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k or "\0" in item or not is_storable(item):
            raise InvalidInput(f"--exec-env: {item!r} is not NAME=VALUE")
        env[k] = v
    return env


def exec_environment(token: ApiToken, home: str) -> tuple[str, dict[str, str]]:
    """Where an exec or python job added with ``token`` runs, and what it keeps as its
    environment: the reference to the token, read when it runs (``run_environment``)."""
    from .execenv import token_ref

    return token.exec_dir or home, token_ref(token.name, token.ref)


def run_environment(ref: tuple[str, str | None], token: ApiToken | None,
                    where: str) -> dict[str, str]:
    """The whole environment of a job that refers to the token ``ref`` (name, ref), given that
    token as the store has it now (None: none of that name), the job running in ``where``:
    the token's ``exec_env`` (default: a minimal PATH, HOME and LANG). ``LookupError`` when the
    token was revoked (a token of that name made since is another token)."""
    name, made = ref
    if token is None or token.ref != made:
        raise LookupError(f"token {name!r} was revoked: a job added with it does not run "
                          "(its environment went with it; add the job again with a live token)")
    return dict(token.exec_env) or {"PATH": MINIMAL_PATH, "HOME": where, "LANG": "C.UTF-8"}


def check_spec(token: ApiToken, spec: dict[str, object]) -> None:
    """What ``token`` may schedule (before the add's own checks, which the spec then gets as
    at ``awty add``): exec and python jobs only with ``jobs:exec``; http callbacks only under
    the token's ``allow_callbacks`` prefixes, when it has some. ``PermissionError`` says why."""
    kind = spec.get("kind", "http")
    if kind in ("exec", "python") and "jobs:exec" not in token.scopes:
        raise PermissionError(f"kind: {kind} jobs need a token with the jobs:exec scope "
                              f"(token {token.name!r} has {', '.join(token.scopes)})")
    target = spec.get("target")
    if kind == "http" and token.allow_callbacks and isinstance(target, str) and not any(
            target.startswith(p) for p in token.allow_callbacks):
        raise PermissionError(f"target: token {token.name!r} may schedule callbacks only to "
                              f"{', '.join(token.allow_callbacks)}")
