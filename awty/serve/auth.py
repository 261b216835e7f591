"""Who is asking: a Bearer token (``awty token new``) or the console's cookie holding one,
looked up by its SHA-256 on every request, so that a revoke is seen at once by every serve
process; its scopes decide what it may do, its rate how often (``limits``).

The adds (``POST /v1/jobs``, ``/v1/jobs/batch``) take a token found before from this
process's cache instead: their group commit (``adds``) checks every token again in the
group's own transaction (``Store.add``'s ``tokens``) and refuses a revoked one there. What the
cache is asked (scopes, callback prefixes, rate, and for the adds the exec directory, name and
ref) never changes while the token lives (a token made anew under a name has another secret;
``token env`` changes its exec environment only, which a job reads when it runs), so a cached
token differs from the store's there only by being gone."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request

from ..model import ApiToken
from ..tokens import hash_of
from .problems import Problem

COOKIE = "awty_token"
# --no-auth (loopback only): reads and writes, never jobs:exec
NO_AUTH = ApiToken("no-auth", ("jobs:read", "jobs:write", "admin"),
                   datetime(1970, 1, 1, tzinfo=UTC))


def allows(token: ApiToken, scope: str) -> bool:
    """``admin`` holds reading and writing; ``jobs:exec`` is never implied."""
    return scope in token.scopes or (scope != "jobs:exec" and "admin" in token.scopes)


def presented(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def revoked() -> Problem:
    return Problem(401, "unknown or revoked token",
                   headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


# tokens found, by hash (for the adds only: see above); dropped whole past this many
CACHED = 1000


async def authorize(request: Request, scope: str, *, cookie: bool = False,
                    cached: bool = False) -> ApiToken:
    """The token of ``request`` if it may ``scope``; else ``Problem`` 401 or 403.
    ``cached``: a token found before may be taken from this process's cache (the caller
    has it checked again before it acts: ``adds``)."""
    state = request.app.state
    if state.options.no_auth:
        token = NO_AUTH
    else:
        secret = presented(request) or (request.cookies.get(COOKIE) if cookie else None)
        if not secret:
            raise Problem(401, "no token: send Authorization: Bearer TOKEN (`awty token new`)",
                          headers={"WWW-Authenticate": "Bearer"})
        cache: dict[str, ApiToken] = state.tokens
        key = hash_of(secret)
        found = cache.get(key) if cached else None
        if found is None:
            found = await state.backend.run(lambda a: a.token_for(secret))
            if found is None:
                cache.pop(key, None)
                raise revoked()
            if len(cache) >= CACHED:
                cache.clear()
            cache[key] = found
        token = found
        wait = state.limiter.wait(token)
        if wait is not None:
            raise Problem(429, f"token {token.name!r} is over its rate limit ({token.rate}, "
                          "per serve process)", headers={"Retry-After": str(wait)})
    if not allows(token, scope):
        raise Problem(403, f"token {token.name!r} lacks the {scope} scope (it has "
                      f"{', '.join(token.scopes)})")
    return token
