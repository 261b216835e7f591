"""The console's login: the token itself in a cookie (HttpOnly, SameSite=Strict, Secure over
TLS), looked up like a Bearer token on every request, and a CSRF token derived from it.

Why the token and not a server-side session: serve keeps no state of its own (any number of
serve processes share one store), so a session table would be one more thing to expire and
replicate; the token is already what the store checks on every request, so a revoke ends a
console login at once on every process. HttpOnly keeps it from page scripts, SameSite=Strict
from other sites' requests, and the CSRF token (an HMAC keyed by the token, so nothing to
store) guards the buttons that change things even where SameSite is not honoured."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from ..model import ApiToken
from .auth import COOKIE, NO_AUTH
from .body import read_bytes

MAX_AGE = 12 * 3600  # a console login lasts a working day; the token itself lasts until revoked


class Session:
    """Who is looking at the console: their token (None: not logged in) and the secret the
    CSRF token is derived from."""

    def __init__(self, token: ApiToken | None, secret: str | None) -> None:
        self.token, self.secret = token, secret

    @property
    def csrf(self) -> str:
        assert self.secret is not None
        return hmac.new(self.secret.encode(), b"awty console csrf", hashlib.sha256).hexdigest()

    def csrf_ok(self, given: str | None) -> bool:
        return self.secret is not None and hmac.compare_digest(self.csrf, given or "")


async def session(request: Request) -> Session:
    state = request.app.state
    if state.options.no_auth:
        if not hasattr(state, "console_secret"):
            state.console_secret = secrets.token_urlsafe(32)
        return Session(NO_AUTH, state.console_secret)
    secret = request.cookies.get(COOKIE)
    if not secret:
        return Session(None, None)
    token = await state.backend.run(lambda a: a.token_for(secret))
    return Session(token, secret if token is not None else None)


def log_in(response: Response, request: Request, secret: str) -> None:
    response.set_cookie(COOKIE, secret, max_age=MAX_AGE, path="/", httponly=True,
                        samesite="strict", secure=_tls(request))


def log_out(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                           secure=_tls(request))


def _tls(request: Request) -> bool:
    return request.url.scheme == "https" or bool(request.app.state.options.certfile)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (the console's own forms), at most serve_max_body bytes."""
    raw = await read_bytes(request)
    try:
        fields = parse_qs(raw.decode(), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in fields.items()}


def local_path(target: str | None) -> str:
    """Where to go after logging in: a path of this site only (never //host or a scheme)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
