"""Who is asking: a Bearer token (``awty token new``) or the console's cookie holding one,
looked up by its SHA-256 on every request, so that a revoke is seen at once by every serve
process; its scopes decide what it may do, its rate how often (``limits``)."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request

from ..model import ApiToken
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


async def authorize(request: Request, scope: str, *, cookie: bool = False) -> ApiToken:
    """The token of ``request`` if it may ``scope``; else ``Problem`` 401 or 403."""
    state = request.app.state
    if state.options.no_auth:
        token = NO_AUTH
    else:
        secret = presented(request) or (request.cookies.get(COOKIE) if cookie else None)
        if not secret:
            raise Problem(401, "no token: send Authorization: Bearer TOKEN (`awty token new`)",
                          headers={"WWW-Authenticate": "Bearer"})
        found = await state.backend.run(lambda a: a.token_for(secret))
        if found is None:
            raise Problem(401, "unknown or revoked token",
                          headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        token = found
        wait = state.limiter.wait(token)
        if wait is not None:
            raise Problem(429, f"token {token.name!r} is over its rate limit ({token.rate}, "
                          "per serve process)", headers={"Retry-After": str(wait)})
    if not allows(token, scope):
        raise Problem(403, f"token {token.name!r} lacks the {scope} scope (it has "
                      f"{', '.join(token.scopes)})")
    return token
