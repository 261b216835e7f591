"""TLS (issue 15, item 8): a certificate failure is permanent, the job fails in the run that met
it with the reason in history; ``ca_file`` (or SSL_CERT_FILE) trusts a private CA. A real TLS
receiver on 127.0.0.1 with certificates from a test CA (trustme), through the real runner."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from helpers import db_rows

from awty.api import Awty
from awty.testing.receiver import Receiver


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    import trustme

    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    good = ca.issue_cert("127.0.0.1", "localhost")
    good.private_key_and_cert_chain_pem.write_to_path(str(d / "good.pem"))
    wrong = ca.issue_cert("other.example")  # valid chain, another name
    wrong.private_key_and_cert_chain_pem.write_to_path(str(d / "wrong.pem"))
    return d


def run_one(home, clock, url, **settings):
    a = Awty(home, clock=clock, env={}, quick_retries=1, **settings)
    job = a.add(url, in_="1m").job
    clock.set(job.next_check_at + timedelta(seconds=1))
    s = a.run_slot(job.next_check_at)
    a.close()
    return job, s


def test_untrusted_certificate_fails_the_job_at_once(home, clock, pki, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with Receiver(tls=(str(pki / "good.pem"),) * 2) as rx:
        job, s = run_one(home, clock, rx.url("/t"))
        assert rx.requests() == []
    assert s.outcomes == {"failed": 1} and s.retried == 0
    (h,) = db_rows(home, "job_history")
    assert h["outcome"] == "failed" and h["attempts"] == 1
    assert "TLS certificate verification failed" in h["reason"]
    assert db_rows(home, "future_job") == []  # no retry cycle left behind


def test_a_name_mismatch_is_permanent_too(home, clock, pki):
    with Receiver(tls=(str(pki / "wrong.pem"),) * 2) as rx:
        _, s = run_one(home, clock, rx.url("/t"), ca_file=str(pki / "ca.pem"))
    assert s.outcomes == {"failed": 1}
    (h,) = db_rows(home, "job_history")
    assert "certificate verification failed" in h["reason"] and "127.0.0.1" in h["reason"]


def test_ca_file_trusts_a_private_ca(home, clock, pki):
    with Receiver(tls=(str(pki / "good.pem"),) * 2) as rx:
        _, s = run_one(home, clock, f"https://localhost:{rx.port}/t",
                       ca_file=str(pki / "ca.pem"))
        assert len(rx.requests("/t")) == 1
    assert s.outcomes == {"done": 1}


def test_ssl_cert_file_is_honoured(home, clock, pki, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(pki / "ca.pem"))
    with Receiver(tls=(str(pki / "good.pem"),) * 2) as rx:
        _, s = run_one(home, clock, rx.url("/t"))
        assert len(rx.requests("/t")) == 1
    assert s.outcomes == {"done": 1}


def test_an_unreadable_ca_file_retries_instead_of_failing(home, clock, pki, tmp_path):
    """An operator's typo must not end every https job: fixed, they go on."""
    with Receiver(tls=(str(pki / "good.pem"),) * 2) as rx:
        _, s = run_one(home, clock, rx.url("/t"), ca_file=str(tmp_path / "missing.pem"))
    assert s.outcomes == {} and s.retried == 1
    (row,) = db_rows(home, "future_job")
    assert "ca_file" in row["last_error"] and "cannot load" in row["last_error"]


@pytest.mark.slow
def test_ca_file_through_the_cli(home, pki):
    """`awty run-slot` in its own process (uvloop's TLS), AWTY_CA_FILE from the environment."""
    from datetime import UTC, datetime

    with Receiver(tls=(str(pki / "good.pem"),) * 2) as rx:
        a = Awty(home, env={})
        a.init()
        a.add(rx.url("/cli"), in_="1m")
        bad = a.add(f"https://localhost:{rx.port}/bad", in_="1m").job
        a.close()
        now = datetime.now(UTC) + timedelta(minutes=16)
        base = {"PATH": "/usr/bin:/bin", "AWTY_HOME": str(home), "AWTY_NOW": now.isoformat()}
        # first without the CA: both fail at once; then a new job with it: delivered
        res = subprocess.run([sys.executable, "-m", "awty", "catchup"], env=base,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode in (0, 1), res.stderr
        hist = {h["id"]: h for h in db_rows(home, "job_history")}
        assert hist[bad.id]["outcome"] == "failed"
        assert "certificate" in hist[bad.id]["reason"]
        a = Awty(home, env={})
        a.add(rx.url("/cli"), in_="1m")
        a.close()
        later = now + timedelta(minutes=16)
        res = subprocess.run([sys.executable, "-m", "awty", "catchup"],
                             env={**base, "AWTY_NOW": later.isoformat(),
                                  "AWTY_CA_FILE": str(pki / "ca.pem")},
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert len(rx.requests("/cli")) == 1
