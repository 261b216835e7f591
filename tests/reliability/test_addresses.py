"""Cloud metadata addresses and malformed hosts (issue 10, item 5).

- At add: every well-known metadata address (AWS IPv6 ``fd00:ec2::254``, Alibaba
  ``100.100.100.200``, Oracle ``192.0.0.192``, Azure ``168.63.129.16``, GCP ``fd20:ce::254``…)
  is refused by the real CLI with exit 2, one line, nothing stored; so are a 5,000-character
  host, a 64-character label and a URL over 8 KiB.
- At connect: a host name that passes add but resolves to a metadata address, even beside
  127.0.0.1 where a receiver listens, gets no connection at all; the job fails with the reason
  in history, and a name resolving to 127.0.0.1 alone is delivered in the same run. The
  resolver is injected at ``socket.getaddrinfo`` under the stdlib event loop, as in
  test_security.
"""

from __future__ import annotations

import ipaddress
import socket
import sys

import pytest
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.netguard import METADATA
from awty.slots import iso
from helpers import T0, db_rows, tree_files

pytestmark = pytest.mark.reliability
cli = CliRunner()

# One address of each METADATA network, and link-local ones for the record.
OUTSIDE_LINK_LOCAL = ["fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254", "168.63.129.16",
                      "100.100.100.200", "fd00:100::100:200", "192.0.0.192",
                      "fd00:c1::a9fe:a9fe", "fd00:42::42", "fd00:a9fe:a9fe::1"]
LINK_LOCAL = ["169.254.169.254", "169.254.170.2", "169.254.0.23", "fe80::a9fe:a9fe"]


def test_every_metadata_network_has_an_address_here():
    for net, _who in METADATA:
        assert any(ipaddress.ip_address(a) in net for a in OUTSIDE_LINK_LOCAL), net


def url(ip: str, port: int = 80) -> str:
    return f"http://[{ip}]:{port}/meta" if ":" in ip else f"http://{ip}:{port}/meta"


@pytest.mark.parametrize("target, says", [
    *[(url(ip), "cloud metadata address") for ip in OUTSIDE_LINK_LOCAL],
    *[(url(ip), "link-local") for ip in LINK_LOCAL],
    ("http://[::ffff:100.100.100.200]/", "cloud metadata address"),
    ("http://" + "a" * 5000 + ".example.com/", "at most 253"),
    ("http://" + "a" * 64 + ".example.com/", "at most 63"),
    ("http://example.com/" + "x" * 8200, "8192"),
    ("http://example.com/" + "é" * 4100, "8219 bytes, over the limit of 8192"),
])
def test_refused_at_add_nothing_stored(home, target, says):
    res = cli.invoke(app, ["add", target, "--in", "1m", "--home", str(home)],
                     env={"AWTY_NOW": iso(T0)})
    assert res.exit_code == 2, res.stdout
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


# IPv6 spellings that carry a metadata IPv4 address (issue 28, item 9): each reaches it through
# a 6to4 relay, a NAT64 gateway, SIIT or Teredo; all were accepted at add.
CARRIED = {
    "2002:a9fe:a9fe::": "169.254.169.254",  # 6to4
    "2002:6464:64c8::1": "100.100.100.200",
    "2002:c000:c0::": "192.0.0.192",
    "2002:a83f:8110::": "168.63.129.16",
    "::ffff:0:a9fe:a9fe": "169.254.169.254",  # IPv4-translated (SIIT)
    "::ffff:0:100.100.100.200": "100.100.100.200",
    "64:ff9b:1::a9fe:a9fe": "169.254.169.254",  # NAT64 local-use prefix, /96 layout
    "64:ff9b:1:a9fe:a9:fe00::": "169.254.169.254",  # ... /48 layout
    "2001:0:4136:e378:8000:63bf:5601:5601": "169.254.169.254",  # Teredo client (inverted)
    "2001:0:a9fe:a9fe::1": "169.254.169.254",  # Teredo server
}


@pytest.mark.parametrize("ip, carried", CARRIED.items())
def test_ipv6_spellings_of_a_metadata_address_are_refused_at_add(home, ip, carried):
    from relkit import cli_env, run_cli

    res = run_cli(["add", url(ip), "--in", "1m"], cli_env(home, T0))
    assert res.returncode == 2, res.stdout
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1 and f"(= {carried})" in line, line
    assert ("cloud metadata" in line or "link-local" in line) and "Traceback" not in line
    assert db_rows(home, "future_job") == [] and tree_files(home) == []


def test_batch_with_one_metadata_target_adds_nothing(home, tmp_path):
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"target": "https://example.com/a", "in": "1h"}\n'
                     '{"target": "http://[fd00:ec2::254]/latest/api/token", "in": "1h"}\n')
    res = cli.invoke(app, ["add", "--batch", str(lines), "--home", str(home)],
                     env={"AWTY_NOW": iso(T0)})
    assert res.exit_code == 2 and "line 2" in res.stderr and "cloud metadata" in res.stderr
    assert db_rows(home, "future_job") == []


def _resolver(answers: dict[str, list[str]]):
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host  # the executor's: bytes
        if host not in answers:
            return real(host, port, *args, **kwargs)
        out = []
        for ip in answers[host]:
            if ":" in ip:
                out.append((socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                            (ip, int(port), 0, 0)))
            else:
                out.append((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                            (ip, int(port))))
        return out

    return fake


@pytest.mark.parametrize("ip", OUTSIDE_LINK_LOCAL + LINK_LOCAL[:1])
def test_a_name_resolving_to_metadata_gets_no_connection(home, clock, rx, monkeypatch, ip):
    answers = {
        "first.test": [ip, "127.0.0.1"],  # the metadata address first ...
        "second.test": ["127.0.0.1", ip],  # ... or after one that would have worked
        "fine.test": ["127.0.0.1"],
    }
    monkeypatch.setattr(socket, "getaddrinfo", _resolver(answers))
    monkeypatch.setitem(sys.modules, "uvloop", None)  # the stdlib loop resolves via socket
    with Awty(home, clock=clock, env={}, quick_retries=0) as a:
        bad = [a.add(f"http://{name}:{rx.port}/meta", in_="1m").job
               for name in ("first.test", "second.test")]  # names pass add: not resolved there
        good = a.add(f"http://fine.test:{rx.port}/ok", in_="1m").job
        clock.set(good.next_check_at)
        summary = a.run_slot(good.next_check_at)
    assert summary.outcomes == {"done": 1, "failed": 2}
    assert [r.path for r in rx.requests()] == ["/ok"] and rx.connections == 1
    history = {h["id"]: h for h in db_rows(home, "job_history")}
    for job in bad:
        reason = history[job.id]["reason"]
        assert "resolves to a refused address" in reason, reason
        assert ip in reason and ("cloud metadata" in reason or "link-local" in reason), reason
