"""SPEC 8 and 12, "bad input gets one clear line and changes nothing" (issue #6, scenario 9),
fuzzed with hypothesis.

- ``awty add`` arguments (times, durations, payloads, URLs, headers, unicode with lone
  surrogates, huge values, NUL bytes) through Typer's CliRunner on ``awty.cli.app``: never a
  traceback; exit 2 with one line on stderr and nothing stored, or exit 0 with the job stored
  exactly as given (row and envelope). A few through a real ``python -m awty`` with raw bytes
  in argv, NULs in files, and endless inputs (/dev/zero).
- ``add --batch`` JSON lines: all or nothing, line named; valid batches stored line by line.
- The envelope reader and the runner's drop-in import: arbitrary bytes, arbitrary JSON objects
  and mutations of a real envelope dropped into a slot never crash the slot; the bad ones are set
  aside with a reason, the good ones run, the store stays consistent.

Counts: CI-sized by default; ``AWTY_FULL=1`` runs about ten times as many examples.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from awty.jobspec import SPEC_KEYS
from awty.ids import new_id
from awty.slottree.staging import envelope_bytes
from awty.slottree.tree import Entry, SlotTree
from awty.slots import from_iso, is_boundary, iso, slot_id
from helpers import T0, db_rows, tree_files, tree_jobs
from awty.testing.receiver import Receiver

pytestmark = pytest.mark.reliability

FULL = os.environ.get("AWTY_FULL", "") not in ("", "0")
NOW = iso(T0)
STDIN = '{"from": "stdin"}'
cli = CliRunner()


def examples(ci: int) -> settings:
    return settings(max_examples=ci * 10 if FULL else ci, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def run_bounded(fn, limit: float):
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"still running after {limit}s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def state(home: Path) -> tuple:
    return (sorted(map(repr, db_rows(home, "future_job"))),
            len(db_rows(home, "job_history")), tree_files(home))


def clean(res) -> None:
    """Never a traceback, whatever the input."""
    assert res.exception is None or isinstance(res.exception, SystemExit), \
        f"{type(res.exception).__name__}: {res.exception}"
    assert "Traceback" not in res.stdout + res.stderr, res.stderr


def one_line(res) -> str:
    lines = res.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("awty"), res.stderr
    return lines[0]


# --- strategies -----------------------------------------------------------------------------------
nasty_chars = st.one_of(st.characters(), st.characters(categories=["Cs"]),
                        st.sampled_from("\x00\r\n\t\x0b\x0c\x1c\x85\u2028\u2029\ufeff\x7f"))
nasty_text = st.text(nasty_chars, max_size=40) | st.sampled_from(
    ["", " ", "x" * 5000, "\x00", "\ud800", "-", "--", "--help", "@", "é" * 1025])
durations = st.sampled_from([
    "90s", "15m", "2h", "1d", "1h30m", "1w", "0", "0s", "1", "3600", "2.5h", "-1s", "1e9s",
    "99999999999999999999w", "9" * 400, "nan", "inf", "", " ", "1x", "366d", "365d", "h1",
    "1 h", "١h"]) | nasty_text | st.integers(-(10**20), 10**20).map(str)
whens = st.sampled_from([
    "now", "NOW ", "2026-11-22T12:00:00Z", "2026-11-22T12:00:00", "2026-11-22 12:00+05:30",
    "2020-01-01", "tomorrow 9am", "1800000000", "1800000000.5", "99999999999", "0", "-1",
    "0001-01-01", "9999-12-31T23:59:59-23:59", "in 2h", "+2h", "in 99999999999w", "2026-02-30",
    "25:61", "Feb 29 2027", "2026-11-22T10:07:12Z", "1e10"]) | nasty_text
json_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(nasty_chars,
                                                                             max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)


@st.composite
def payload_texts(draw):
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return json.dumps(draw(json_values), ensure_ascii=draw(st.booleans()))
    if kind == 1:
        return draw(nasty_text)
    if kind == 2:
        return json.dumps("x" * draw(st.integers(4000, 9000)))
    if kind == 3:
        n = draw(st.integers(500, 3000))
        return "[" * n + "]" * n
    if kind == 4:
        return draw(st.sampled_from(['{"a": NaN}', '{"a": Infinity}', '"\\ud800"', '{"a":1}{',
                                     "null", '{"a": "\\u0000"}', '1e400', '{"__proto__": 1}']))
    return json.dumps({"order": draw(st.integers()), "note": draw(st.text(max_size=30))})


headers = st.sampled_from([
    "X-Tenant: 7", "Authorization: Bearer abc", "X-A:", "X-A: a: b", "Host: evil.example",
    "Content-Length: 5", "webhook-id: spoof", "no colon", ": empty name", "X A: space",
    "X-A: line\r\nInjected: 1", "X-A: \x00", "X-Ü: x", "X-A: " + "v" * 5000, "X-A: é",
]) | nasty_text
targets = st.sampled_from([
    "https://example.com/hook", "http://127.0.0.1:9/x", "https://example.com/a?b=c&d=é",
    "HTTPS://EXAMPLE.COM/", "https://user:pw@example.com/", "ftp://example.com/",
    "file:///etc/passwd", "http://169.254.169.254/", "http://", "https://[::1]:99999/",
    "http://a b/", "https://exa\x00mple.com/", "https://example.com/" + "p" * 9000,
    "https://example.com:0/", "//example.com/", "echo hi", "mod.sub:func", "bad:module:x",
]) | nasty_text | st.builds(lambda p: f"https://example.com/{p}", nasty_text)
ints = st.integers(-(10**30), 10**30).map(str) | st.sampled_from(["many", "", "1.5", "0x10"])


good_text = st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=20)
GOOD = {
    "target": st.sampled_from(["https://example.com/hook", "http://127.0.0.1:9/x?y=1",
                               "https://example.com/é/ü?q=ß"]),
    "--in": st.sampled_from(["90s", "15m", "2h", "1d", "1h30m", "1w", "0s"]),
    "--at": st.sampled_from(["now", "2026-11-22T12:00:00Z", "2026-12-01 08:00+01:00",
                             "1800000000"]),
    "--payload": json_values.map(json.dumps),
    "--header": st.sampled_from(["X-Tenant: 7", "Authorization: Bearer abc", "X-A: é ü"]),
    "--entity": good_text, "--key": good_text, "--idempotency-key": good_text,
    "--max-checks": st.integers(0, 50).map(str), "--max-attempts": st.integers(1, 50).map(str),
    "--timeout": st.sampled_from(["5s", "1m", "90"]), "--horizon": st.just("2d"),
    "--misfire-grace": st.just("1h"),
}
BAD = {"target": targets, "--in": durations, "--at": whens, "--payload": payload_texts(),
       "--header": headers, "--entity": nasty_text, "--key": nasty_text | ints,
       "--idempotency-key": nasty_text, "--max-checks": ints, "--max-attempts": ints,
       "--timeout": durations, "--horizon": durations, "--misfire-grace": durations}


@st.composite
def add_argv(draw):
    """Each value is sane most of the time and wild otherwise: enough adds get through to
    check what is stored, and every wild value meets otherwise valid company."""
    def value(name):
        return draw(GOOD[name] if draw(st.integers(0, 9)) < 8 else BAD[name])

    args = ["add"]
    if draw(st.integers(0, 19)):
        args.append(value("target"))
    args += draw(st.sampled_from([[]] * 6 + [["--exec"], ["--call"], ["--exec", "--call"]]))
    when = draw(st.sampled_from(["--in"] * 6 + ["--at"] * 2 + ["both", "none"]))
    if when in ("--in", "both"):
        args += ["--in", value("--in")]
    if when in ("--at", "both"):
        args += ["--at", value("--at")]
    if draw(st.booleans()):
        args += ["--payload", value("--payload")]
    for _ in range(draw(st.integers(0, 3))):
        args += ["--header", value("--header")]
    for opt in ("--entity", "--key", "--idempotency-key", "--max-checks", "--max-attempts",
                "--timeout", "--horizon", "--misfire-grace"):
        if draw(st.integers(0, 3)) == 0:
            args += [opt, value(opt)]
    args += draw(st.sampled_from([[], ["--json"], ["--dry-run"], ["--dry-run", "--json"]]))
    return args


def _opt(args: list[str], name: str) -> str | None:
    vals = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return vals[-1] if vals else None


def _check_stored(home: Path, args: list[str], res, before_ids: set[str]) -> None:
    if res.stdout.lstrip().startswith("{"):
        job_id = json.loads(res.stdout)["id"]
    else:
        job_id = re.search(r"(?:added|exists \(same idempotency key\)) (\w{26})",
                           res.stdout).group(1)
    rows = {r["id"]: r for r in db_rows(home, "future_job")}
    if "exists (same" in res.stdout or (res.stdout.startswith("{")
                                          and not json.loads(res.stdout)["created"]):
        assert set(rows) == before_ids
        return
    assert set(rows) - before_ids == {job_id}
    row = rows[job_id]
    target = args[1]
    kind = "exec" if "--exec" in args else "python" if "--call" in args else "http"
    assert row["kind"] == kind
    assert row["target"] == (target.strip() if kind == "http" else target)
    entity, key = _opt(args, "--entity"), _opt(args, "--key")
    assert row["entity_name"] == entity and row["entity_key"] == key
    payload = _opt(args, "--payload")
    if payload == "-":
        payload = STDIN
    if not (payload or "").startswith("@"):
        assert json.loads(row["payload"]) == (None if payload is None else json.loads(payload))
    hdrs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--header"]
    want = {h.partition(":")[0].strip(): h.partition(":")[2].strip() for h in hdrs}
    assert (json.loads(row["headers"]) if row["headers"] else {}) == want
    for opt, col in (("--max-checks", "max_checks"), ("--max-attempts", "max_attempts")):
        if _opt(args, opt) is not None:
            assert row[col] == int(_opt(args, opt))
    first, slot = from_iso(row["first_check_at"]), from_iso(row["next_check_at"])
    assert T0 <= first <= slot < first + timedelta(minutes=15) and is_boundary(slot, 15)
    envelope = home / "slots" / slot_id(slot) / f"{job_id}.json"
    assert json.loads(envelope.read_bytes())["id"] == job_id


@pytest.mark.slow
def test_add_arguments_fuzzed(tmp_path):
    home = tmp_path / "home"
    cli.invoke(app, ["init", "--home", str(home)])
    seen = {"ok": 0, "bad": 0}

    @examples(250)
    @given(add_argv())
    def check(args):
        before = state(home)
        before_ids = {r["id"] for r in db_rows(home, "future_job")}
        res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW}, input=STDIN)
        clean(res)
        if res.exit_code == 0:
            seen["ok"] += 1
            if "--dry-run" in args or res.stdout.startswith("Usage:"):  # (e.g. TARGET "--help")
                assert state(home) == before
            else:
                _check_stored(home, args, res, before_ids)
            return
        seen["bad"] += 1
        line = one_line(res)
        assert res.exit_code == 2 or (res.exit_code == 1 and "idempotency key" in line), line
        assert state(home) == before

    check()
    print(f"\n{seen}")
    assert seen["ok"] > 0 and seen["bad"] > 0, seen


def test_add_fuzz_regressions(home):
    """What the fuzzers found, kept as plain cases."""
    cases = [
        ["add", "https://example.com/", "--in", "1m", "--entity", "\udcff"],
        ["add", "https://example.com/\udcff", "--in", "1m"],
        ["add", "https://\udcff.example/", "--in", "1m"],
        ["add", "https://example.com/", "--in", "1m", "--payload", '"\\ud800"'],
        ["add", "https://example.com/", "--in", "1m", "--payload", "[" * 5000 + "]" * 5000],
        ["add", "https://example.com/", "--in", "1m", "--header", "X-A: \udcff"],
        ["add", "echo \x00", "--exec", "--in", "1m"],
        # C0 controls in a header value: the sender cannot send them (one rule, issue 14)
        ["add", "https://example.com/", "--in", "1m", "--header", "X-A: a\x1cb"],
        ["add", "https://example.com/", "--in", "1m", "--idempotency-key", "\ud800"],
    ]
    for args in cases:
        res = cli.invoke(app, [*args, "--home", str(home)], env={"AWTY_NOW": NOW})
        clean(res)
        assert res.exit_code == 2, (args, res.stdout)
        one_line(res)
    assert db_rows(home, "future_job") == [] and tree_files(home) == []
    # JSON lines are split on "\n" only: U+2028, U+0085, \x1c… are text inside a JSON string.
    odd = "a\u2028b\x85c\x1cd\x0be\u2029f"
    odd_header = "a\u2028b\x85c\u2029f"  # header values take no C0 controls (wire.py)
    lines = [json.dumps({"target": "https://example.com/", "in": "1m", "payload": odd,
                         "entity": odd}, ensure_ascii=False),
             json.dumps({"target": "https://example.com/", "in": "2m",
                         "headers": {"X-A": odd_header}}, ensure_ascii=False)]
    res = cli.invoke(app, ["add", "--batch", "-", "--json", "--home", str(home)],
                     env={"AWTY_NOW": NOW}, input="\n".join(lines) + "\n")
    clean(res)
    assert res.exit_code == 0, res.stderr
    rows = sorted(db_rows(home, "future_job"), key=lambda r: r["first_check_at"])
    assert json.loads(rows[0]["payload"]) == odd and rows[0]["entity_name"] == odd
    assert json.loads(rows[1]["headers"]) == {"X-A": odd_header}


# --- real processes: raw argv bytes, NULs in files, endless inputs --------------------------------
@pytest.mark.slow
def test_bad_input_through_real_processes(home, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWTY_")},
           "AWTY_NOW": NOW}
    py = [sys.executable, "-m", "awty"]
    h = ["--home", str(home)]
    subprocess.run([*py, "init", *h], env=env, capture_output=True, check=True, timeout=60)
    nul_raw = tmp_path / "nul-raw.json"
    nul_raw.write_bytes(b'{"a": "x\x00y"}')
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"a": "caf\xe9"}')
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"target": "https://example.com/", "in": "1m", "payload": '
                    + "[" * 3000 + "]" * 3000 + "}\n")
    url = b"https://example.com/hook"
    bad = {
        "entity bytes": [b"add", url, b"--in", b"1m", b"--entity", b"\xff\xfe"],
        "path bytes": [b"add", url + b"/\xff", b"--in", b"1m"],
        "host bytes": [b"add", b"https://\xff.example/", b"--in", b"1m"],
        "header bytes": [b"add", url, b"--in", b"1m", b"--header", b"X-A: \xff"],
        "at bytes": [b"add", url, b"--at", b"\xff"],
        "exec bytes": [b"add", b"echo \xff", b"--exec", b"--in", b"1m"],
        "raw NUL in payload file": [b"add", url, b"--in", b"1m", b"--payload",
                                    b"@" + bytes(nul_raw)],
        "latin-1 payload file": [b"add", url, b"--in", b"1m", b"--payload", b"@" + bytes(latin)],
        "endless payload file": [b"add", url, b"--in", b"1m", b"--payload", b"@/dev/zero"],
        "endless batch file": [b"add", b"--batch", b"/dev/zero"],
        "deep batch line": [b"add", b"--batch", bytes(deep)],
        "endless stdin": [b"add", url, b"--in", b"1m", b"--payload", b"-"],
    }
    before = state(home)
    procs = {}
    for name, argv in bad.items():
        stdin = open("/dev/zero", "rb") if name == "endless stdin" else subprocess.DEVNULL
        procs[name] = subprocess.Popen([*py, *argv, *(os.fsencode(x) for x in h)], env=env,
                                       stdin=stdin, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    for name, p in procs.items():
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"{name}: still running after 60 s")
        text = err.decode("utf-8", "replace")
        assert "Traceback" not in text, (name, text)
        assert p.returncode == 2, (name, p.returncode, text)
        assert text.count("\n") == 1 and text.startswith("awty"), (name, text)
    assert state(home) == before
    # A NUL written as the JSON escape is fine payload text, stored and enveloped as sent.
    nul_ok = tmp_path / "nul-ok.json"
    nul_ok.write_text('{"a": "x\\u0000y", "b": "\u2028"}')
    res = subprocess.run([*py, "add", "https://example.com/", "--in", "1m", "--json",
                          "--payload", f"@{nul_ok}", *h], env=env, capture_output=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    job_id = json.loads(res.stdout)["id"]
    row = db_rows(home, "future_job")[0]
    assert json.loads(row["payload"]) == {"a": "x\x00y", "b": "\u2028"}
    (env_file,) = (home / "slots").rglob(f"{job_id}.json")
    assert json.loads(env_file.read_bytes())["payload"] == {"a": "x\x00y", "b": "\u2028"}


# --- add --batch ----------------------------------------------------------------------------------
# Valid lines hold text only: no lone surrogates (those are the invalid lines' business).
ok_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)),
                  min_size=1, max_size=30)
line_text = st.text(st.characters(exclude_characters="\x00\r\n", exclude_categories=("Cs",)),
                    max_size=30)
# A header value: one line of text without C0 controls (tab aside) or DEL (awty/wire.py).
header_text = st.text(st.characters(exclude_characters="".join(
    chr(c) for c in [*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f]),
    exclude_categories=("Cs",)), max_size=30)
small_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**60), 2**60)
                          | st.floats(allow_nan=False, allow_infinity=False) | line_text,
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(line_text, inner, max_size=3), max_leaves=8)
valid_specs = st.fixed_dictionaries(
    {"target": st.sampled_from(["https://example.com/a", "http://127.0.0.1:9/b?c=d"]),
     "in": st.sampled_from(["1m", "2h", "1d", 90, "1h30m"])},
    optional={"payload": small_json, "entity": ok_text, "key": ok_text | st.integers(0, 10**9),
              "headers": st.dictionaries(st.from_regex(r"\AX-[A-Za-z]{1,8}\Z"), header_text,
                                         max_size=3),
              "max_checks": st.integers(0, 100), "max_attempts": st.integers(1, 20),
              "timeout": st.sampled_from(["5s", 10, "1m"]), "horizon": st.just("2d"),
              "kind": st.just("http")},
).map(lambda d: d if "entity" in d else {k: v for k, v in d.items() if k != "key"})
# (a key names one entity's instance: a line with a key and no entity is refused)


@st.composite
def invalid_lines(draw):
    spec = dict(draw(valid_specs))  # a copy: hypothesis may hand the same dict to a valid line
    how = draw(st.integers(0, 13))
    if how == 0:
        spec["colour"] = "red"
    elif how == 1:
        spec["target"] = draw(st.sampled_from(["ftp://x/", "file:///x", "http://169.254.169.254/",
                                               "", "nope"]))
    elif how == 2:
        spec["in"] = draw(st.sampled_from(["-1s", "soon", "366d", "", None, [1], {"a": 1}]))
        if spec["in"] is None:
            del spec["in"]
    elif how == 3:
        spec["at"] = "2026-11-22T12:00:00Z"
    elif how == 4:
        spec["payload"] = "x" * 5000
    elif how == 5:
        spec["entity"] = draw(st.sampled_from(["\ud800", "", "x" * 1025, "a\x00b", [], {}]))
    elif how == 6:
        spec["headers"] = draw(st.sampled_from([{"Host": "x"}, {"X-A": "a\nb"}, {"X A": "1"},
                                                 {"X-A": 1}, "X-A: 1", [1]]))
    elif how == 7:
        spec["max_checks"] = draw(st.sampled_from([-1, 10**7, "many", 1.5, True]))
    elif how == 8:
        spec["kind"] = draw(st.sampled_from(["shell", "", 1, None, "HTTP"]))
    elif how == 9:
        spec["timeout"] = draw(st.sampled_from(["0s", -5, "forever", True]))
    elif how == 10:
        return draw(st.sampled_from(["[1, 2]", "1", '"x"', "null", "{nope", '{"a":', "\ufeff{}",
                                     "{}", '{"target": "https://example.com/", "in": NaN}',
                                     '{"target": "https://example.com/", "in": Infinity}']))
    elif how == 11:
        n = draw(st.integers(2100, 5000))  # > 4096 bytes even where it parses
        spec["payload"] = "DEEP"
        return json.dumps(spec).replace('"DEEP"', "[" * n + "]" * n)
    elif how == 12:
        spec["idempotency_key"] = draw(st.sampled_from(["\udcff", ""]))
    else:
        spec["kind"] = "python"
        spec["target"] = "not a module"
    return json.dumps(spec, ensure_ascii=draw(st.booleans()))


@st.composite
def batches(draw):
    lines = []  # (text, kind): kind is "valid", "invalid" or "unknown"
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["valid", "valid", "valid", "invalid", "unknown"]))
        if kind == "valid":
            spec = draw(valid_specs)
            lines.append((json.dumps(spec, ensure_ascii=draw(st.booleans())), kind, spec))
        elif kind == "invalid":
            lines.append((draw(invalid_lines()), kind, None))
        else:
            text = draw(st.text(nasty_chars, max_size=60))
            text = text.replace("\n", " ").replace("\r", " ")
            lines.append((text, kind if text.strip() else "blank", None))
        if draw(st.integers(0, 5)) == 0:
            lines.append((draw(st.sampled_from(["", "   ", "\t"])), "blank", None))
    return lines


@pytest.mark.slow
def test_batch_lines_fuzzed(tmp_path):
    home = tmp_path / "home"
    cli.invoke(app, ["init", "--home", str(home)])
    path = tmp_path / "batch.jsonl"
    seen = {"ok": 0, "bad": 0}

    @examples(150)
    @given(batches(), st.sampled_from([[], ["--dry-run"]]), st.booleans())
    def check(lines, extra, via_stdin):
        text = "".join(t + "\n" for t, _, _ in lines)
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        before = state(home)
        before_ids = {r["id"] for r in db_rows(home, "future_job")}
        src = "-" if via_stdin else str(path)
        res = cli.invoke(app, ["add", "--batch", src, "--json", *extra, "--home", str(home)],
                         env={"AWTY_NOW": NOW},
                         input=text.encode("utf-8", "surrogatepass") if via_stdin else None)
        clean(res)
        kinds = {k for _, k, _ in lines}
        jobs = [(t, spec) for t, k, spec in lines if k != "blank"]
        if "invalid" in kinds or not jobs:
            assert res.exit_code == 2, (lines, res.stdout)
        elif kinds <= {"valid", "blank"}:
            assert res.exit_code == 0, (lines, res.stderr)
        if res.exit_code != 0:
            seen["bad"] += 1
            line = one_line(res)
            assert res.exit_code == 2 and re.match(r"awty: (line \d+|--batch)", line), line
            assert state(home) == before
            return
        seen["ok"] += 1
        docs = json.loads(res.stdout)
        docs = docs if isinstance(docs, list) else [docs]
        assert len(docs) == len(jobs)
        if extra:
            assert state(home) == before
            return
        rows = {r["id"]: r for r in db_rows(home, "future_job")}
        assert set(rows) - before_ids == {d["id"] for d in docs}
        for doc, (t, spec) in zip(docs, jobs, strict=True):
            spec = spec if spec is not None else json.loads(t)
            row = rows[doc["id"]]
            assert row["target"] == spec["target"]
            assert json.loads(row["payload"]) == spec.get("payload")
            ent, key = spec.get("entity"), spec.get("key")
            assert row["entity_name"] == (None if ent is None else str(ent))
            assert row["entity_key"] == (None if key is None else str(key))
            assert (json.loads(row["headers"]) if row["headers"] else {}) == \
                (spec.get("headers") or {})
            assert row["max_checks"] == spec.get("max_checks")
            assert f"{doc['slot']}/{doc['id']}" in tree_jobs(home)  # a file or a batch line

    check()
    print(f"\n{seen}")
    assert seen["ok"] > 0 and seen["bad"] > 0, seen


# --- the envelope reader, alone and through a run of the slot -------------------------------------
deep_bytes = st.integers(1, 40_000).map(lambda n: b"[" * n + b"]" * n) | st.integers(
    1, 12_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)


@examples(600)
@given(st.binary(max_size=4000) | deep_bytes
       | json_values.map(lambda v: json.dumps(v).encode()))
@pytest.mark.slow
def test_envelope_reader_fuzzed(raw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x.json"
        p.write_bytes(raw)
        try:
            data = SlotTree(Path(d)).read(Entry("x.json", p.parent, None))
        except ValueError as e:
            assert str(e) and "\n" not in str(e)
            return
        assert isinstance(data, dict)


FIELDS = sorted(SPEC_KEYS | {"v", "first_check_at", "next_check_at", "check_count"})


@st.composite
def dropped_files(draw, url: str, model: bytes):
    """(file name, bytes): garbage, an arbitrary JSON object, or a real envelope mutated."""
    how = draw(st.integers(0, 4))
    if how == 0:
        data = draw(st.binary(max_size=3000) | deep_bytes)
    elif how == 1:
        obj = draw(st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6),
                                   json_values | st.sampled_from([url, url + "x/", "ftp://x/",
                                                                  "http://169.254.169.254/"]),
                                   max_size=6))
        if draw(st.booleans()):
            obj["target"] = url
        data = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    elif how == 2:
        obj = json.loads(model)
        key = draw(st.sampled_from(FIELDS + ["extra"]))
        if draw(st.booleans()) and key in obj:
            del obj[key]
        else:
            obj[key] = draw(json_values)
        data = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    elif how == 3:
        data = bytearray(model)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            op = draw(st.integers(0, 2))
            if op == 0:
                data[i] = draw(st.integers(0, 255))
            elif op == 1:
                del data[i]
            else:
                data.insert(i, draw(st.integers(0, 255)))
        data = bytes(data)
    else:
        data = model  # valid as is
    name = draw(st.sampled_from(["drop.json", "drop.txt", "ü ñ.json", "new\nline.json",
                                 "bad\udcffbyte.json", "<id>.json", "<id>.json"]))
    return name, data


@pytest.mark.slow
def test_dropped_envelopes_fuzzed_through_run_slot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (no exec/python kind gets through, but never run in the repo)
    home = tmp_path / "home"
    clock = FixedClock(T0)
    stats = {"imported": 0, "rejected": 0, "orphans": 0}
    with Receiver() as rx:
        url = rx.url("/drop")
        a = Awty(home, clock=clock, env={}, allowed_callbacks=rx.url("/"), quick_retries=0)
        model_job = a.add(url, in_="1m", payload={"n": 1}, entity="e", key="k",
                          headers={"X-A": "b"}, dry_run=True).job
        model = envelope_bytes(model_job)
        tick = {"n": 0}

        @examples(200)
        @given(dropped_files(url, model))
        def check(dropped):
            name, data = dropped
            try:
                obj = json.loads(data)
                assume(not (isinstance(obj, dict) and obj.get("kind") in ("exec", "python")))
            except (ValueError, RecursionError):
                pass
            tick["n"] += 1
            clock.set(T0 + timedelta(minutes=15 * tick["n"]))
            good = a.add(rx.url("/good"), in_="1m").job
            slot = good.next_check_at
            sd = home / "slots" / slot_id(slot)
            name = name.replace("<id>", new_id(clock.now()))
            (sd / name).write_bytes(data)
            before_good = len(rx.requests("/good"))
            clock.set(slot)
            s = run_bounded(lambda: a.run_slot(slot), 30)
            assert len(rx.requests("/good")) == before_good + 1
            # (0 when its idempotency key named a job awty already had: consumed, not run)
            assert s.rejected + s.imported + s.orphans_removed <= 1, s
            stats["imported"] += s.imported
            stats["rejected"] += s.rejected
            stats["orphans"] += s.orphans_removed
            if s.rejected:
                reason = (home / "rejected" / slot_id(slot) / f"{name}.reason").read_bytes()
                assert reason.endswith(b"\n") and reason.count(b"\n") == 1
                assert os.path.lexists(home / "rejected" / slot_id(slot) / name)
            assert not sd.exists()
            pending = {r["id"]: r for r in db_rows(home, "future_job")}
            assert tree_files(home) == sorted(
                f"{slot_id(from_iso(r['next_check_at']))}/{i}.json" for i, r in pending.items())
            assert good.id in {h["id"] for h in db_rows(home, "job_history")}

        check()
        conn = sqlite3.connect(home / "awty.db")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    print(f"\n{stats}")
    assert stats["imported"] > 0 and stats["rejected"] > 0, stats
