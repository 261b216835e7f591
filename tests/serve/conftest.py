"""``served``: a home on the store under test (``backend``: SQLite and PostgreSQL), a token
with read and write scopes, and a real ``awty serve`` on 127.0.0.1 whose every answer the test
sees is held to its OpenAPI document."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import servekit  # noqa: E402


@pytest.fixture
def served(tmp_path, backend):
    home = tmp_path / "home"
    env = dict(backend.env)
    assert servekit.awty(home, "init", env=env).returncode == 0
    res = servekit.awty(home, "token", "new", "svc", "--scope", "jobs:read,jobs:write",
                        env=env)
    assert res.returncode == 0, res.stderr
    server = servekit.start(home, env, token=res.stdout.strip())
    try:
        doc = server.call("GET", "/v1/openapi.json").body
        server.check = servekit.OpenApiCheck(doc)
        server.extra["backend"] = backend
        yield server
    finally:
        server.stop()
