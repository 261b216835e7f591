"""The http executor against a real (scripted) receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from standardwebhooks.webhooks import Webhook

from awty import __version__
from awty.clock import FixedClock, SystemClock
from awty.config import Settings
from awty.executors.http import HttpExecutor, callback_body
from awty.model import Answer, Attempt, Job, Result
from awty.testing.receiver import Receiver, Reply, free_port
import helpers

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
FIRST = datetime(2030, 1, 1, 11, 45, 7, tzinfo=UTC)
KEY = bytes(range(32))
SECRET_TEXT = "whsec_" + base64.b64encode(KEY).decode()
SETTINGS = Settings(per_host_concurrency=8, breaker_threshold=3)
ATTEMPT = Attempt(slot="203001011200", check=2, attempt=1, timeout=5.0)


def make_job(target: str, *, id: str = "01JTESTJOB00000000000000001", payload: str = '{"a":1}',
             headers: dict[str, str] | None = None, entity: str | None = "order",
             key: str | None = "42") -> Job:
    return helpers.make_job(target, id=id, payload_json=payload, headers=headers,
                            entity=entity, key=key, first=FIRST, at=NOW)


def fire(target: str | Job, *, settings: Settings = SETTINGS, clock=None, secret=None,
         attempt: Attempt = ATTEMPT) -> Result:
    """One run on a fresh executor in a fresh event loop."""
    job = make_job(target) if isinstance(target, str) else target

    async def main() -> Result:
        ex = HttpExecutor(settings, clock or FixedClock(NOW), secret)
        try:
            return await ex.run(job, attempt)
        finally:
            await ex.close()

    return asyncio.run(main())


def fire_many(jobs: list[Job], *, settings: Settings = SETTINGS, clock=None, secret=None,
              attempt: Attempt = ATTEMPT, concurrent: bool = False) -> list[Result]:
    async def main() -> list[Result]:
        ex = HttpExecutor(settings, clock or FixedClock(NOW), secret)
        try:
            if concurrent:
                return list(await asyncio.gather(*(ex.run(j, attempt) for j in jobs)))
            return [await ex.run(j, attempt) for j in jobs]
        finally:
            await ex.close()

    return asyncio.run(main())


# --- what is sent ------------------------------------------------------------------------------
def test_body_is_compact_json_with_payload_verbatim():
    job = make_job("http://x/", payload='{"b": [1, 2],  "a":"é"}', entity=None, key='k"1')
    body = callback_body(job, ATTEMPT)
    assert body == (b'{"id":"01JTESTJOB00000000000000001","entity":null,"key":"k\\"1",'
                    b'"payload":{"b": [1, 2],  "a":"\xc3\xa9"},"check":2,"attempt":1,'
                    b'"slot":"203001011200","first_check_at":"2030-01-01T11:45:07Z"}')
    assert json.loads(body)["payload"] == {"b": [1, 2], "a": "é"}


def test_exact_request_headers_and_body(rx):
    job = make_job(rx.url("/hook?x=1&y=two"),
                   headers={"Authorization": "Bearer t0k", "X-Custom": "yes",
                            "Host": "evil", "Content-Length": "1", "webhook-id": "forged",
                            "Webhook-Timestamp": "1", "Content-Type": "text/plain",
                            "Transfer-Encoding": "chunked", "X-Awty-Check": "99",
                            "X-Awty-Job-Id": "forged"})
    r = fire(job, secret=KEY)
    assert r.answer is Answer.DONE and r.status == 200 and r.error is None
    (req,) = rx.requests("/hook")
    assert req.method == "POST" and req.path == "/hook?x=1&y=two"
    assert req.body == callback_body(job, ATTEMPT)
    h = req.headers
    assert h["host"] == f"127.0.0.1:{rx.port}"
    assert h["content-type"] == "application/json"
    assert h["user-agent"] == f"awty/{__version__}"
    assert h["content-length"] == str(len(req.body))
    assert h["webhook-id"] == f"{job.id}_2"  # one message per check: its retries share it
    assert h["x-awty-job-id"] == job.id
    assert h["webhook-timestamp"] == str(int(NOW.timestamp()))  # the attempt's own time
    assert h["x-awty-check"] == "2" and h["x-awty-attempt"] == "1"
    assert h["authorization"] == "Bearer t0k" and h["x-custom"] == "yes"
    assert "transfer-encoding" not in h
    names = [k.lower() for k, _ in req.raw_headers]
    for once in ("host", "content-length", "content-type", "webhook-id", "webhook-timestamp",
                 "webhook-signature", "x-awty-job-id", "x-awty-check"):
        assert names.count(once) == 1, once
    assert h["webhook-signature"].startswith("v1,")
    body = json.loads(req.body)
    assert body == {"id": job.id, "entity": "order", "key": "42", "payload": {"a": 1},
                    "check": 2, "attempt": 1, "slot": "203001011200",
                    "first_check_at": "2030-01-01T11:45:07Z"}


def test_signature_verifies_with_standardwebhooks(rx):
    r = fire(rx.url("/signed"), secret=KEY, clock=SystemClock())
    assert r.answer is Answer.DONE
    (req,) = rx.requests("/signed")
    assert abs(int(req.headers["webhook-timestamp"]) - time.time()) < 5
    got = Webhook(SECRET_TEXT).verify(req.body, req.headers)
    assert got["id"] == "01JTESTJOB00000000000000001"


def test_no_signature_without_secret(rx):
    assert fire(rx.url("/plain")).answer is Answer.DONE
    (req,) = rx.requests("/plain")
    assert "webhook-signature" not in req.headers
    assert req.headers["webhook-id"] == "01JTESTJOB00000000000000001_2"


def test_header_injection_is_refused(rx):
    r = fire(make_job(rx.url("/inj"), headers={"X-A": "1\r\nX-Evil: 1"}))
    assert r.answer is Answer.FAIL and "not a single line" in r.error
    assert rx.requests("/inj") == []


# --- answers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [200, 201, 204])
def test_2xx_done(rx, status):
    rx.script("/ok", status=status, body=b"" if status == 204 else b"thanks")
    r = fire(rx.url("/ok"))
    assert (r.answer, r.status, r.error) == (Answer.DONE, status, None)
    assert r.output == (None if status == 204 else "thanks")
    assert r.duration > 0


def test_recheck_at(rx):
    rx.script("/r", json={"recheck_at": "2030-01-01T15:00:00Z", "note": "not yet"})
    r = fire(rx.url("/r"))
    assert r.answer is Answer.RECHECK and r.status == 200
    assert r.recheck_at == datetime(2030, 1, 1, 15, 0, tzinfo=UTC)


def test_recheck_at_epoch(rx):
    at = int((NOW + timedelta(hours=3)).timestamp())
    rx.script("/r", json={"recheck_at": at})
    r = fire(rx.url("/r"))
    assert r.answer is Answer.RECHECK and r.recheck_at == NOW + timedelta(hours=3)


def test_recheck_in(rx):
    rx.script("/r", status=201, json={"recheck_in": "2h"})
    r = fire(rx.url("/r"))
    assert r.answer is Answer.RECHECK and r.recheck_at == NOW + timedelta(hours=2)


def test_202_retry_after_is_a_recheck(rx):
    rx.script("/r", status=202, headers={"Retry-After": "120"})
    r = fire(rx.url("/r"))
    assert r.answer is Answer.RECHECK and r.status == 202
    assert r.recheck_at == NOW + timedelta(seconds=120)


def test_202_without_retry_after_is_done(rx):
    rx.script("/r", status=202)
    assert fire(rx.url("/r")).answer is Answer.DONE


@pytest.mark.parametrize("body", [{"recheck_at": "soon"}, {"recheck_in": "forever"},
                                  {"recheck_in": -5}])
def test_malformed_recheck_fails(rx, body):
    rx.script("/r", json=body)
    r = fire(rx.url("/r"))
    assert r.answer is Answer.FAIL and "malformed recheck" in r.error and r.status == 200


def test_410_gone(rx):
    rx.script("/g", status=410)
    r = fire(rx.url("/g"))
    assert (r.answer, r.status) == (Answer.GONE, 410)


@pytest.mark.parametrize("status", [500, 502, 503, 408, 425, 429])
def test_retryable_status(rx, status):
    rx.script("/e", status=status, body="busy")
    r = fire(rx.url("/e"))
    assert (r.answer, r.status, r.error, r.output) == (Answer.RETRY, status, f"http {status}",
                                                       "busy")
    assert r.retry_after is None


def test_429_retry_after_seconds(rx):
    rx.script("/e", status=429, headers={"Retry-After": "30"})
    r = fire(rx.url("/e"))
    assert (r.answer, r.status, r.retry_after) == (Answer.RETRY, 429, 30.0)


def test_503_retry_after_http_date(rx):
    rx.script("/e", status=503,
              headers={"Retry-After": format_datetime(NOW + timedelta(seconds=90), usegmt=True)})
    r = fire(rx.url("/e"))
    assert (r.answer, r.retry_after) == (Answer.RETRY, 90.0)


def test_500_then_200(rx):
    rx.script("/seq", status=[500, 200])
    rs = fire_many([make_job(rx.url("/seq")), make_job(rx.url("/seq"))])
    assert [r.answer for r in rs] == [Answer.RETRY, Answer.DONE]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_4xx_fails(rx, status):
    rx.script("/f", status=status)
    r = fire(rx.url("/f"))
    assert (r.answer, r.status, r.error) == (Answer.FAIL, status, f"http {status}")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_not_followed(rx, status):
    rx.script("/moved", status=status, headers={"Location": rx.url("/elsewhere")})
    r = fire(rx.url("/moved"))
    assert r.answer is Answer.FAIL and r.status == status
    assert r.error == f"http {status} (redirects are not followed)"
    assert rx.requests("/elsewhere") == []


# --- guards: deadline, caps --------------------------------------------------------------------
def test_hang_is_cut_at_the_timeout(rx):
    rx.script("/hang", hang=True)
    t = time.monotonic()
    r = fire(rx.url("/hang"), attempt=Attempt("203001011200", 1, 1, timeout=0.5))
    elapsed = time.monotonic() - t
    assert r.answer is Answer.RETRY and r.error == "timeout after 0.5s"
    assert 0.45 <= elapsed < 0.5 + 1.5  # generous: a loaded CI machine, not a speed test
    assert len(rx.requests("/hang")) == 1


def test_trickle_does_not_extend_the_deadline(rx):
    rx.script("/slow", body="x" * 200, trickle=0.02)  # 4 s for the whole body
    t = time.monotonic()
    r = fire(rx.url("/slow"), attempt=Attempt("203001011200", 1, 1, timeout=0.5))
    elapsed = time.monotonic() - t
    assert r.answer is Answer.RETRY and "timeout" in r.error
    assert elapsed < 0.5 + 1.5


def _fire_each(pairs: list[tuple[Job, Attempt]]) -> list[Result]:
    """Each job with its own attempt (its own timeout), all in flight at once, in this order."""
    async def main() -> list[Result]:
        ex = HttpExecutor(SETTINGS, FixedClock(NOW), None)
        try:
            return list(await asyncio.wait_for(
                asyncio.gather(*(ex.run(j, a) for j, a in pairs)), 20))
        finally:
            await ex.close()

    return asyncio.run(main())


def test_a_shorter_timeout_sent_later_is_cut_at_its_own_deadline(rx):
    """Deadlines are watched by one timer: a request sent after another, with a nearer
    deadline, is cut at its own, not at the other's; the other is still cut at its own."""
    rx.script("/hang", hang=True)
    rs = _fire_each([(make_job(rx.url("/hang"), id="01JLONG000000000000000000A"),
                      Attempt("203001011200", 1, 1, timeout=1.2)),
                     (make_job(rx.url("/hang"), id="01JSHORT00000000000000000B"),
                      Attempt("203001011200", 1, 1, timeout=0.2))])
    assert [r.error for r in rs] == ["timeout after 1.2s", "timeout after 0.2s"]
    assert rs[1].duration < 0.9 and rs[0].duration >= 1.1


def test_a_hang_is_cut_after_the_earliest_deadline_was_answered(rx):
    """The request whose deadline the watch was set for is answered in time: the watch wakes
    at that deadline, finds the other still waiting and is set again for it."""
    rx.script("/hang", hang=True)
    rs = _fire_each([(make_job(rx.url("/ok"), id="01JQUICK00000000000000000A"),
                      Attempt("203001011200", 1, 1, timeout=0.3)),
                     (make_job(rx.url("/hang"), id="01JHANGS00000000000000000B"),
                      Attempt("203001011200", 1, 1, timeout=0.6))])
    assert rs[0].answer is Answer.DONE
    assert rs[1].error == "timeout after 0.6s" and rs[1].duration >= 0.55


def test_delay_within_the_timeout_is_fine(rx):
    rx.script("/late", delay=0.2)
    r = fire(rx.url("/late"), attempt=Attempt("203001011200", 1, 1, timeout=2))
    assert r.answer is Answer.DONE and r.duration >= 0.2


def test_huge_body_is_capped(rx):
    rx.script("/big", body_size=20_000_000)
    settings = Settings(max_response_bytes=1000)
    t = time.monotonic()
    r = fire(rx.url("/big"), settings=settings)
    assert time.monotonic() - t < 2
    assert (r.answer, r.status) == (Answer.DONE, 200)
    assert r.output.startswith("x" * 500) and len(r.output) < 600


def test_huge_error_body_is_capped(rx):
    rx.script("/big", status=500, body_size=5_000_000)
    r = fire(rx.url("/big"), settings=Settings(max_response_bytes=100))
    assert (r.answer, r.status) == (Answer.RETRY, 500)
    assert "cut" in r.error


def test_capped_connection_is_not_reused(rx):
    rx.script("/big", body_size=1_000_000)
    rs = fire_many([make_job(rx.url("/big")), make_job(rx.url("/ok"))],
                   settings=Settings(max_response_bytes=1000))
    assert [r.answer for r in rs] == [Answer.DONE, Answer.DONE]
    assert rx.connections == 2


# --- connection failures and the breaker --------------------------------------------------------
def test_connection_closed_without_answer_is_retryable(rx):
    rx.script("/close", close=True)
    r = fire(rx.url("/close"))
    assert r.answer is Answer.RETRY and r.status is None
    assert "connection closed" in r.error


def test_connection_refused_is_retryable():
    r = fire(f"http://127.0.0.1:{free_port()}/x")
    assert (r.answer, r.error, r.deferred) == (Answer.RETRY, "connection refused", False)


def test_not_http_is_retryable():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    import threading

    def garbage():
        c, _ = srv.accept()
        c.recv(65536)
        c.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        time.sleep(0.2)
        c.close()

    th = threading.Thread(target=garbage, daemon=True)
    th.start()
    try:
        r = fire(f"http://127.0.0.1:{port}/x", attempt=Attempt("203001011200", 1, 1, 2.0))
    finally:
        th.join(2)
        srv.close()
    assert r.answer is Answer.RETRY and "malformed HTTP response" in r.error


def test_breaker_opens_after_threshold_and_defers(rx):
    dead = f"http://127.0.0.1:{free_port()}"
    jobs = [make_job(f"{dead}/{i}", id=f"01JDEAD{i:019d}") for i in range(6)]
    jobs.append(make_job(rx.url("/alive")))  # another host is not affected
    rs = fire_many(jobs)
    assert [r.error for r in rs[:3]] == ["connection refused"] * 3
    assert not any(r.deferred for r in rs[:3])
    for r in rs[3:6]:
        assert r.answer is Answer.RETRY and r.deferred
        assert r.error == "host 127.0.0.1 unreachable: deferred (circuit open)"
    assert rs[6].answer is Answer.DONE and not rs[6].deferred


def test_breaker_trips_on_a_ratio_not_a_streak(rx):
    """Failures interleaved with a success on one endpoint: never three in a row, yet three of
    four failed, at least half: the endpoint's breaker opens (a streak rule never would)."""
    rx.script("/flaky", Reply(hang=True), Reply(hang=True), Reply(status=200),
              Reply(hang=True), Reply(status=200))
    a = Attempt("203001011200", 1, 1, timeout=0.2)
    rs = fire_many([make_job(rx.url("/flaky")) for _ in range(6)] + [make_job(rx.url("/ok"))],
                   attempt=a)
    assert [r.answer for r in rs[:4]] == [Answer.RETRY, Answer.RETRY, Answer.DONE,
                                          Answer.RETRY]
    assert not any(r.deferred for r in rs[:4])
    assert rs[4].deferred and rs[5].deferred
    assert rs[4].error == "endpoint 127.0.0.1/flaky failing: deferred (circuit open)"
    assert rs[6].answer is Answer.DONE  # another path of the same host is not condemned


@pytest.mark.slow
def test_breaker_a_few_failures_among_many_successes_never_trip(rx):
    """One failure in five, far past the threshold in count: below half, nothing is deferred."""
    replies = [Reply(hang=True) if i % 5 == 0 else Reply(status=200) for i in range(40)]
    rx.script("/mostly", *replies)
    a = Attempt("203001011200", 1, 1, timeout=0.2)
    rs = fire_many([make_job(rx.url("/mostly")) for _ in range(40)], attempt=a)
    assert sum(r.answer is Answer.RETRY for r in rs) == 8
    assert not any(r.deferred for r in rs)


def test_timeouts_on_many_paths_condemn_the_host(rx):
    """A host that hangs on every path (one job per path, as /orders/<id> targets are): the
    endpoints never see the threshold, the host's breaker does."""
    rx.reply = lambda req: Reply(hang=True)
    a = Attempt("203001011200", 1, 1, timeout=0.2)
    rs = fire_many([make_job(rx.url(f"/o/{i}")) for i in range(6)], attempt=a)
    assert [r.deferred for r in rs] == [False, False, False, True, True, True]
    assert rs[3].error == "host 127.0.0.1 unreachable: deferred (circuit open)"


def test_breaker_defers_queued_jobs_of_a_dead_host():
    dead = f"http://127.0.0.1:{free_port()}/x"
    settings = Settings(per_host_concurrency=1, breaker_threshold=2)
    rs = fire_many([make_job(dead, id=f"01JQ{i:022d}") for i in range(20)], settings=settings,
                   concurrent=True)
    assert sum(not r.deferred for r in rs) == 2
    assert all(r.answer is Answer.RETRY for r in rs)


# --- SSRF at fire time ------------------------------------------------------------------------
def test_link_local_target_refused_at_fire_time():
    r = fire("http://169.254.169.254/latest/meta-data/")
    assert r.answer is Answer.FAIL and "link-local" in r.error


def test_allow_list_checked_at_fire_time(rx):
    r = fire(rx.url("/a"), settings=Settings(allowed_callbacks=("https://hooks.example.com/",)))
    assert r.answer is Answer.FAIL and "outside the allowed callbacks" in r.error
    assert rx.requests() == []


def test_private_target_refused_at_fire_time(rx):
    r = fire(rx.url("/a"), settings=Settings(deny_private_networks=True))
    assert r.answer is Answer.FAIL and "loopback" in r.error
    assert rx.requests() == []


def test_resolved_address_is_checked_before_connecting(rx):
    """A name that resolves to a refused address (DNS rebinding) is refused at connect time,
    and resolution happens once per host."""
    calls = []

    async def main() -> list[Result]:
        loop = asyncio.get_running_loop()

        async def fake_getaddrinfo(host, port, **kw):
            host = host.decode() if isinstance(host, bytes) else host  # the executor's: bytes
            calls.append(host)
            ip = "169.254.169.254" if host == "rebind.example" else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

        loop.getaddrinfo = fake_getaddrinfo  # type: ignore[method-assign]
        ex = HttpExecutor(SETTINGS, FixedClock(NOW), None)
        try:
            return [await ex.run(make_job(u), ATTEMPT) for u in (
                "http://rebind.example/x", "http://rebind.example/y",
                f"http://named.example:{rx.port}/ok", f"http://named.example:{rx.port}/ok")]
        finally:
            await ex.close()

    rs = asyncio.run(main())
    assert [r.answer for r in rs] == [Answer.FAIL, Answer.FAIL, Answer.DONE, Answer.DONE]
    assert "169.254.169.254" in rs[0].error and "link-local" in rs[0].error
    assert calls == ["rebind.example", "named.example"]
    reqs = rx.requests("/ok")
    assert len(reqs) == 2 and reqs[0].headers["host"] == f"named.example:{rx.port}"


def test_unresolvable_host_is_retryable():
    async def main() -> Result:
        loop = asyncio.get_running_loop()

        async def fail_getaddrinfo(host, port, **kw):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        loop.getaddrinfo = fail_getaddrinfo  # type: ignore[method-assign]
        ex = HttpExecutor(SETTINGS, FixedClock(NOW), None)
        try:
            return await ex.run(make_job("http://nowhere.invalid/x"), ATTEMPT)
        finally:
            await ex.close()

    r = asyncio.run(main())
    assert r.answer is Answer.RETRY and "cannot resolve host nowhere.invalid" in r.error


# --- connections ------------------------------------------------------------------------------
def test_keep_alive_reuses_connections(rx):
    rs = fire_many([make_job(rx.url("/ka"), id=f"01JKA{i:021d}") for i in range(50)])
    assert all(r.answer is Answer.DONE for r in rs)
    assert len(rx.requests("/ka")) == 50
    assert rx.connections == 1


def test_connection_close_header_is_honoured(rx):
    rx.script("/cc", headers={"Connection": "close"})
    rs = fire_many([make_job(rx.url("/cc")) for _ in range(3)])
    assert all(r.answer is Answer.DONE for r in rs)
    assert rx.connections == 3


def test_server_closed_idle_connection_is_retried_transparently(rx):
    rx.script("/stale", close_if_reused=True)
    rs = fire_many([make_job(rx.url("/stale")) for _ in range(3)])
    assert [r.answer for r in rs] == [Answer.DONE] * 3
    # each reuse was dropped unanswered, then sent again on a fresh connection
    assert len(rx.requests("/stale")) == 5
    assert rx.connections == 3


def test_server_closing_after_answer_is_handled(rx):
    rx.script("/ca", close_after=True)
    rs = fire_many([make_job(rx.url("/ca")) for _ in range(5)])
    assert [r.answer for r in rs] == [Answer.DONE] * 5
    assert len(rx.requests("/ca")) >= 5


def test_fresh_connection_closed_is_not_retried(rx):
    rx.script("/close", close=True)
    r = fire(rx.url("/close"))
    assert r.answer is Answer.RETRY
    assert len(rx.requests("/close")) == 1


def test_200_concurrent_jobs_all_delivered(rx):
    jobs = [make_job(rx.url("/many"), id=f"01JMANY{i:019d}") for i in range(200)]
    rs = fire_many(jobs, concurrent=True, secret=KEY)
    assert all(r.answer is Answer.DONE for r in rs), {r.error for r in rs}
    reqs = rx.requests("/many")
    assert sorted(r.job_id for r in reqs) == sorted(j.id for j in jobs)
    assert rx.connections <= SETTINGS.per_host_concurrency


def test_per_host_concurrency_is_bounded(rx):
    rx.script("/slow", delay=0.1)
    settings = Settings(per_host_concurrency=3)
    rs = fire_many([make_job(rx.url("/slow")) for _ in range(9)], settings=settings,
                   concurrent=True)
    assert all(r.answer is Answer.DONE for r in rs)
    assert rx.connections == 3


def _recording_sockets(monkeypatch) -> list[str]:
    """The executor's sockets note each connect and each send, in order (asyncio's own loop
    connects and writes through the socket object's methods)."""
    from awty.executors import http

    events: list[str] = []

    class Recording(socket.socket):
        def connect(self, address):
            events.append("connect")
            return super().connect(address)

        def send(self, data, *flags):
            events.append("send")
            return super().send(data, *flags)

    shim = type(socket)("socket")
    shim.__dict__.update(vars(socket))
    shim.socket = Recording
    monkeypatch.setattr(http, "socket", shim)
    return events


def test_first_request_goes_out_before_the_pool_opens_its_other_connections(rx, monkeypatch):
    """A host with no connection: one is opened, its request written, then the others open
    (the first callback does not wait for per_host_concurrency connects)."""
    events = _recording_sockets(monkeypatch)
    rx.script("/first", delay=0.2)  # every request in flight at once: each needs a connection
    rs = fire_many([make_job(rx.url("/first"), id=f"01JFIRST{i:018d}") for i in range(6)],
                   settings=Settings(per_host_concurrency=6), concurrent=True)
    assert all(r.answer is Answer.DONE for r in rs)
    assert events[:2] == ["connect", "send"]
    assert events.count("connect") == 6 and events.count("send") == 6
    assert rx.connections == 6


def test_first_connection_refused_the_others_still_try(monkeypatch):
    """The connection opened first fails: the attempts that waited for it try their own, and
    each reports its own error (none is lost waiting)."""
    events = _recording_sockets(monkeypatch)
    dead = f"http://127.0.0.1:{free_port()}/x"
    rs = fire_many([make_job(dead, id=f"01JREF{i:020d}") for i in range(4)],
                   settings=Settings(per_host_concurrency=4, breaker_threshold=10),
                   concurrent=True)
    assert [r.error for r in rs] == ["connection refused"] * 4
    assert events == ["connect"] * 4


def test_waiting_for_the_first_connection_counts_in_each_deadline(monkeypatch):
    """A host whose TLS handshake never answers (a listener nobody accepts from): the attempt
    waiting for the first connection is cut at its own deadline, before the first's, without
    a connect of its own; one whose deadline is later than the first's tries its own once
    the first timed out, and is cut at its own deadline (nothing waits past it)."""
    events = _recording_sockets(monkeypatch)
    silent = socket.create_server(("127.0.0.1", 0))
    url = f"https://127.0.0.1:{silent.getsockname()[1]}/x"
    try:
        rs = _fire_each([(make_job(url, id="01JFIRST00000000000000000A"),
                          Attempt("203001011200", 1, 1, timeout=0.6)),
                         (make_job(url, id="01JSOON000000000000000000B"),
                          Attempt("203001011200", 1, 1, timeout=0.2)),
                         (make_job(url, id="01JLATER00000000000000000C"),
                          Attempt("203001011200", 1, 1, timeout=1.0))])
    finally:
        silent.close()
    assert [r.error for r in rs] == ["timeout after 0.6s", "timeout after 0.2s",
                                     "timeout after 1s"]
    assert rs[1].duration < 0.45 and 0.55 <= rs[0].duration < 0.95 <= rs[2].duration
    assert events.count("connect") == 2  # the first's, then the later one's own


def test_executor_created_outside_the_loop_binds_lazily(rx):
    ex = HttpExecutor(SETTINGS, FixedClock(NOW), None)

    async def main() -> Result:
        try:
            return await ex.run(make_job(rx.url("/lazy")), ATTEMPT)
        finally:
            await ex.close()

    assert asyncio.run(main()).answer is Answer.DONE


def test_works_on_uvloop(rx):
    uvloop = pytest.importorskip("uvloop")
    jobs = [make_job(rx.url("/uv"), id=f"01JUV{i:021d}") for i in range(20)]

    async def main() -> list[Result]:
        ex = HttpExecutor(SETTINGS, FixedClock(NOW), KEY)
        try:
            return list(await asyncio.gather(*(ex.run(j, ATTEMPT) for j in jobs)))
        finally:
            await ex.close()

    rs = uvloop.run(main())
    assert all(r.answer is Answer.DONE for r in rs)
    assert len(rx.requests("/uv")) == 20


def test_a_run_on_uvloop_never_loads_the_idna_codec(rx):
    """Resolving and connecting give uvloop the host as bytes: text it would encode with the
    idna codec, whose first use imports it with unicodedata and stringprep (~1 ms before a
    run's first callback)."""
    pytest.importorskip("uvloop")
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import asyncio, sys, uvloop
from datetime import UTC, datetime
from awty.clock import FixedClock
from awty.config import Settings
from awty.executors.http import HttpExecutor
from awty.model import Attempt
import helpers

assert "encodings.idna" not in sys.modules, "loaded before the run: the test proves nothing"
async def main():
    ex = HttpExecutor(Settings(), FixedClock(datetime(2030, 1, 1, tzinfo=UTC)), b"k" * 32)
    try:
        return await ex.run(helpers.make_job({rx.url("/uv")!r}), Attempt("x", 1, 1, 5.0))
    finally:
        await ex.close()
r = uvloop.run(main())
assert r.answer.value == "done", r
print(sorted(m for m in ("encodings.idna", "unicodedata", "stringprep") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).parent, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert len(rx.requests("/uv")) == 1


def test_request_to_a_reply_sequence_object(rx):
    rx.script("/s", Reply(status=503, headers={"Retry-After": "5"}), Reply(status=410))
    rs = fire_many([make_job(rx.url("/s")) for _ in range(3)])
    assert [(r.answer, r.retry_after) for r in rs] == [
        (Answer.RETRY, 5.0), (Answer.GONE, None), (Answer.GONE, None)]


# --- https ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and localhost (needs the openssl command)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl command not available")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return str(cert), str(key)


def test_https_with_a_trusted_certificate(tls_cert, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", tls_cert[0])  # what create_default_context() trusts
    with Receiver(tls=tls_cert) as rx:
        rx.script("/tls", json={"recheck_in": "1h"})
        named = f"https://localhost:{rx.port}/tls"
        rs = fire_many([make_job(rx.url("/tls")), make_job(rx.url("/tls")), make_job(named)],
                       secret=KEY)
        assert [r.answer for r in rs] == [Answer.RECHECK] * 3, [r.error for r in rs]
        assert len(rx.requests("/tls")) == 3
        assert rx.connections == 2  # one per host name, reused
        assert rx.requests("/tls")[2].headers["host"] == f"localhost:{rx.port}"


def test_https_untrusted_certificate_fails_at_once(tls_cert, monkeypatch):
    """A certificate failure is permanent (issue 15): FAIL, no retry cycle (tests/test_tls.py)."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with Receiver(tls=tls_cert) as rx:
        r = fire(rx.url("/tls"))
        assert r.answer is Answer.FAIL and "certificate verification failed" in r.error


def test_unencodable_payload_fails_without_raising(rx):
    r = fire(make_job(rx.url("/u"), payload='"\ud800"'))
    assert r.answer is Answer.FAIL and "UTF-8" in r.error
    assert rx.requests() == []
