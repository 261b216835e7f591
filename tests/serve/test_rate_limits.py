"""Per-token rate limits (`awty token new --rate`): stored with the token on both stores, shown by
`token list`, enforced by a real serve process as 429 problem+json with Retry-After."""

from __future__ import annotations

import json

import pytest

import servekit
from awty.model import ApiToken
from awty.serve.limits import Limiter
from awty.tokens import parse_rate

HOOK = "http://127.0.0.1:9/hook"


def _token(s, name, *args):
    res = servekit.awty(s.home, "token", "new", name, "--scope", "jobs:read,jobs:write", *args,
                        env=s.env)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.mark.slow
def test_a_token_over_its_rate_gets_429_with_retry_after(served):
    limited = _token(served, "limited", "--rate", "3/h")
    # stored with the token (both stores) and shown by token list, table and JSON
    listed = json.loads(servekit.awty(served.home, "token", "list", "--json",
                                      env=served.env).stdout)
    assert {t["name"]: t["rate"] for t in listed} == {"limited": "3/h", "svc": None}
    table = servekit.awty(served.home, "token", "list", env=served.env).stdout
    assert "rate" in table.splitlines()[0]
    assert [ln.split()[-2] for ln in table.splitlines()[1:]] == ["3/h", "-"]

    body = {"target": HOOK, "in": "2h"}
    answers = [served.call("POST", "/v1/jobs", body, token=limited) for _ in range(3)]
    assert [a.status for a in answers] == [201, 201, 201]
    over = served.call("POST", "/v1/jobs", body, token=limited)
    assert over.status == 429, over.body
    assert over.headers["content-type"] == "application/problem+json"
    assert "'limited' is over its rate limit (3/h" in over.body["detail"]
    # a token every 20 minutes: the next one is 1,200 s away (less the time the test took)
    assert 1100 <= int(over.headers["retry-after"]) <= 1200
    # reads count too; nothing was stored by the refused add
    assert served.call("GET", "/v1/jobs", token=limited).status == 429
    pending = served.call("GET", "/v1/jobs").body["jobs"]
    assert len(pending) == 3
    # another token, without a limit, is not held back
    assert all(served.call("GET", "/v1/slots").status == 200 for _ in range(10))
    assert ("POST", "/v1/jobs", 429) in served.check.seen


@pytest.mark.slow
def test_a_bad_rate_is_one_line_and_makes_no_token(tmp_path):
    home = tmp_path / "home"
    assert servekit.awty(home, "init").returncode == 0
    for bad in ("100", "0/s", "10/day", "x/s", "-1/s"):
        res = servekit.awty(home, "token", "new", "t", "--scope", "jobs:read", "--rate", bad)
        assert res.returncode == 2, (bad, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "--rate" in res.stderr, res.stderr
    assert json.loads(servekit.awty(home, "token", "list", "--json").stdout) == []
    ok = servekit.awty(home, "token", "new", "t", "--scope", "jobs:read", "--rate",
                       "6000/minute", "--json")
    assert json.loads(ok.stdout)["rate"] == "6000/min"


def test_the_bucket_holds_the_count_and_refills_evenly():
    now = [100.0]
    lim = Limiter(lambda: now[0])
    tok = ApiToken("t", ("jobs:read",), None, rate="4/s")  # type: ignore[arg-type]
    assert [lim.wait(tok) for _ in range(5)] == [None, None, None, None, 1]
    now[0] += 0.25  # one request's worth
    assert (lim.wait(tok), lim.wait(tok)) == (None, 1)
    now[0] += 60  # never more than the count saved up
    assert [lim.wait(tok) for _ in range(5)] == [None] * 4 + [1]
    hourly = ApiToken("h", ("jobs:read",), None, rate="2/h")  # type: ignore[arg-type]
    assert [lim.wait(hourly) for _ in range(3)] == [None, None, 1800]
    # the same name made anew with another rate starts a bucket of that rate
    again = ApiToken("h", ("jobs:read",), None, rate="3/h")  # type: ignore[arg-type]
    assert [lim.wait(again) for _ in range(4)] == [None, None, None, 1200]
    assert lim.wait(ApiToken("free", ("jobs:read",), None)) is None  # type: ignore[arg-type]
    assert parse_rate(" 100 / s ") == (100, 1) and parse_rate("5/m") == (5, 60)
