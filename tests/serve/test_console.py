"""The console's rules over plain HTTP (the browser walk is test_console_browser): reading
needs a jobs:read token through the login form's cookie, the buttons need jobs:write and the
CSRF token, a login only ever redirects within the site, and the console is no part of the
OpenAPI document."""

from __future__ import annotations

import http.client
import re
from urllib.parse import urlencode, urlsplit

import pytest

import servekit


def fetch(server, method, path, form=None, cookie=None):
    """One request, redirects not followed (the console's own answers are what is tested)."""
    u = urlsplit(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Cookie": f"awty_token={cookie}"} if cookie else {}
    body = None
    if form is not None:
        body = urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    conn.close()
    return out


def csrf_of(html):
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


@pytest.mark.slow
def test_login_cookie_csrf_and_scopes(served):
    token = served.token
    job = served.call("POST", "/v1/jobs", {"target": "http://127.0.0.1:9/h", "in": "2h",
                                           "entity": "order", "key": "7"}).body
    # not logged in: to the login form, remembering where
    status, h, _ = fetch(served, "GET", f"/jobs/{job['id']}")
    assert (status, h["location"]) == (303, f"/login?next=%2Fjobs%2F{job['id']}")
    status, _, html = fetch(served, "POST", "/login", {"token": "awty_nope", "next": "/"})
    assert status == 401 and "unknown or revoked token" in html
    # the cookie: the token itself, HttpOnly, SameSite=Strict, never Secure over plain HTTP
    status, h, _ = fetch(served, "POST", "/login", {"token": token, "next": f"/jobs/{job['id']}"})
    assert (status, h["location"]) == (303, f"/jobs/{job['id']}")
    cookie = h["set-cookie"]
    assert cookie.startswith(f"awty_token={token};") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Secure" not in cookie
    # a login never sends the browser off the site
    for evil in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        _, h, _ = fetch(served, "POST", "/login", {"token": token, "next": evil})
        assert h["location"] == "/"
    status, h, html = fetch(served, "GET", f"/jobs/{job['id']}", cookie=token)
    assert status == 200 and job["id"] in html and "order" in html
    assert "default-src 'none'" in h["content-security-policy"]
    assert "script" not in html.lower()  # no script at all
    for page in ("/", "/jobs", "/history?entity=order", "/schedules"):
        status, _, html = fetch(served, "GET", page, cookie=token)
        assert status == 200, page
    status, _, html = fetch(served, "GET", "/history?since=whenever", cookie=token)
    assert status == 400 and 'id="error"' in html
    # a button without the CSRF token (or another session's) changes nothing
    _, _, page = fetch(served, "GET", f"/jobs/{job['id']}", cookie=token)
    for bad in ({}, {"csrf": "0" * 64}):
        status, _, html = fetch(served, "POST", f"/jobs/{job['id']}/cancel", bad, cookie=token)
        assert status == 403 and "CSRF" in html
    assert served.call("GET", f"/v1/jobs/{job['id']}").body["state"] == "pending"
    # a read-only token sees the page without buttons, and its POST is refused
    reader = servekit.awty(served.home, "token", "new", "reader", "--scope", "jobs:read",
                           env=served.env).stdout.strip()
    _, _, page = fetch(served, "GET", f"/jobs/{job['id']}", cookie=reader)
    assert 'id="cancel"' not in page and "read only" in page
    status, _, html = fetch(served, "POST", f"/jobs/{job['id']}/cancel",
                            {"csrf": csrf_of(page)}, cookie=reader)
    assert status == 403 and "jobs:write" in html
    # with the token's own CSRF token the button works
    _, _, page = fetch(served, "GET", f"/jobs/{job['id']}", cookie=token)
    status, h, _ = fetch(served, "POST", f"/jobs/{job['id']}/cancel", {"csrf": csrf_of(page)},
                         cookie=token)
    assert (status, h["location"]) == (303, f"/jobs/{job['id']}?done=cancel")
    shown = served.call("GET", f"/v1/jobs/{job['id']}").body
    assert (shown["state"], shown["outcome"]) == ("ended", "cancelled")
    # a writer without jobs:read cannot log in; a revoked token is logged out at once
    writer = servekit.awty(served.home, "token", "new", "writer", "--scope", "jobs:write",
                           env=served.env).stdout.strip()
    status, _, html = fetch(served, "POST", "/login", {"token": writer, "next": "/"})
    assert status == 403 and "jobs:read" in html
    assert servekit.awty(served.home, "token", "revoke", "reader",
                         env=served.env).returncode == 0
    status, h, _ = fetch(served, "GET", "/", cookie=reader)
    assert (status, h["location"]) == (303, "/login?next=%2F")


@pytest.mark.slow
def test_console_pages_are_not_in_the_openapi_document(served):
    paths = served.check.doc["paths"]
    assert all(p.startswith("/v1/") or p in ("/healthz", "/readyz", "/metrics") for p in paths)
