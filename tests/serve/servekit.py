"""A real ``awty serve`` process on 127.0.0.1 for the tests, a small HTTP client, and the check
that holds every response the tests see to ``/v1/openapi.json``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def awty(home: Path, *args: str, env: dict[str, str] | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "awty", "--home", str(home), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any
    raw: bytes


class OpenApiCheck:
    """Every response seen: its status documented for its path and method, its body valid
    against the documented schema, problems as application/problem+json."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.paths = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$"), p)
                      for p in doc["paths"]]
        self.seen: set[tuple[str, str, int]] = set()

    def __call__(self, method: str, path: str, a: Answer) -> None:
        bare = path.split("?")[0]
        matches = [p for rx, p in self.paths if rx.match(bare)]
        # a literal path wins over a template (/v1/jobs/batch over /v1/jobs/{id})
        template = min(matches, key=lambda p: p.count("{"), default=None)
        if template is None:
            assert a.status in (404, 405), (method, path, a.status)
            assert a.headers.get("content-type") == "application/problem+json"
            return
        op = self.doc["paths"][template].get(method.lower())
        if op is None:
            assert a.status == 405, (method, path)
            return
        responses = op["responses"]
        assert str(a.status) in responses, f"{method} {template}: {a.status} undocumented: " \
                                           f"{a.body}"
        self.seen.add((method, template, a.status))
        content = responses[str(a.status)].get("content")
        if not content:
            return
        ctype = a.headers.get("content-type", "").split(";")[0]
        assert ctype in content, (method, template, a.status, ctype)
        schema = {"components": self.doc["components"],
                  "allOf": [content[ctype]["schema"]]}
        jsonschema.validate(a.body, schema, cls=jsonschema.Draft202012Validator)


@dataclass
class Server:
    home: Path
    url: str
    proc: subprocess.Popen[bytes]
    token: str | None
    env: dict[str, str]
    check: OpenApiCheck | None = None
    log: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, *, token: str | None = "",
             headers: dict[str, str] | None = None, raw: bytes | None = None,
             timeout: float = 30) -> Answer:
        hdrs = dict(headers or {})
        tok = self.token if token == "" else token
        if tok:
            hdrs["Authorization"] = f"Bearer {tok}"
        data = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, h, content = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, h, content = e.code, dict(e.headers), e.read()
        h = {k.lower(): v for k, v in h.items()}
        ctype = h.get("content-type", "")
        parsed = (json.loads(content) if "json" in ctype and content else
                  content.decode() if ctype.startswith("text/plain") else content)
        a = Answer(status, h, parsed, content)
        if self.check is not None:
            self.check(method, path, a)
        return a

    def walk(self, path: str, key: str, limit: int) -> list[Any]:
        """Every item of a paged list (``key``), following its ``next`` links from ``path``;
        each page holds at most ``limit``."""
        seen: list[Any] = []
        while path:
            page = self.call("GET", path).body
            assert len(page[key]) <= limit, (path, len(page[key]))
            seen += page[key]
            path = page["next"]
        return seen

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start(home: Path, env: dict[str, str], *args: str, token: str | None = None,
          port: int | None = None, timeout: float = 30) -> Server:
    port = port or free_port()
    log = home.parent / f"serve-{port}.log"
    out = log.open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "awty", "--home", str(home), "serve",
                             "--port", str(port), *args], stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **env})
    s = Server(home, f"http://127.0.0.1:{port}", proc, token, env, log=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"awty serve exited {proc.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    else:
        s.stop()
        raise AssertionError(f"awty serve did not listen: {log.read_text()}")
    return s
