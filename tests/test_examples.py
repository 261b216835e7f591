"""Every example awty shows is run: the ``sh`` blocks and the Python blocks of README.md and of
the guides it links to (docs/*.md, read in GUIDES' order, the reader's), and each command's
``--help`` examples (read from the Typer app, so the test follows the CLI wherever it
lives). One throwaway home, examples in the order a reader meets them, time pinned with
AWTY_NOW; a real 127.0.0.1 receiver where an example's point is a callback (the signing block).

Rewritten before running, and only these: the ``01JD…`` id placeholders become real ids (a
pending job, one calling the receiver for ``run``, a failed one for ``retry``), ``/srv/awty``
and ``/home/me`` become paths under the test's directory, a schedule's ``https://example.com/``
target becomes the receiver (``schedule run`` fires it now), and ``| jq …`` is replaced by
checking that the output is JSON. ``awty serve`` runs until stopped: it is started as a real process on
127.0.0.1 (whatever ``--host`` the example names) and a free port, with a test certificate where
it names ``--certfile``/``--keyfile``, checked to answer ``/healthz``, and stopped; ``awty
receiver`` likewise, checked to print a callback posted to it. "First ten minutes" is also
followed whole as a reader would (test_first_ten_minutes_as_written)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from freezegun import freeze_time
from typer.testing import CliRunner

from awty.api import Awty
from awty.cli import app
from awty.clock import FixedClock
from helpers import db_rows
from awty.testing.receiver import Receiver

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# README first, then the guides in the order README links them: the examples run in this order.
GUIDES = ["README.md", "docs/commands.md", "docs/jobs.md", "docs/schedules.md",
          "docs/running.md", "docs/reliability.md", "docs/several-hosts.md",
          "docs/http-api.md", "docs/python-api.md", "docs/configuration.md"]
GUIDE = "\n".join((ROOT / name).read_text() for name in GUIDES)
NOW = datetime(2026, 11, 22, 14, 20, tzinfo=UTC)  # a Sunday; slot 202611221415 has passed
NOW_ISO = "2026-11-22T14:20:00Z"
PLACEHOLDER = re.compile(r"01JD3?…")
runner = CliRunner()


# --- finding the examples ------------------------------------------------------------------------
def readme_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", GUIDE, flags=re.S | re.M)


def readme_commands() -> list[str]:
    """``awty …`` lines of the guides' sh blocks that are plain commands (continuations joined,
    ``a | b`` alternatives split); lines with shell plumbing are run as a script instead."""
    out = []
    for block in readme_blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("awty ") and not _plumbing(line):
                out.extend(_alternatives(line))
    return out


def readme_scripts() -> list[str]:
    return [b for b in readme_blocks("sh")
            if any(ln.startswith("awty ") and _plumbing(ln) for ln in b.splitlines())]


def _plumbing(line: str) -> bool:
    return bool(re.search(r"(&&|>>?|;)", line.split("#", 1)[0].replace("->", "")))


def _alternatives(text: str) -> list[str]:
    parts = [p.strip() for p in text.split("|")]
    if all(p.startswith("awty ") for p in parts):
        return parts
    return [text.strip()]  # a real pipe (e.g. into jq)


def help_commands() -> list[str]:
    """Examples in every command's help text: indented ``awty …`` lines and the text after
    ``Example:`` / ``Examples:``."""
    group = typer.main.get_command(app)
    texts = [group.help or ""]

    def walk(cmd) -> None:
        for sub in getattr(cmd, "commands", {}).values():
            texts.append(sub.help or "")
            walk(sub)

    walk(group)
    command = re.compile(rf"awty ({'|'.join(map(re.escape, group.commands))})\b")
    out = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            m = re.search(r"Examples?:\s*(awty .*)", line)
            if m:
                out.extend(_alternatives(m.group(1)))
            elif command.match(line):  # not prose such as "awty — Are We There Yet?"
                out.extend(_alternatives(line))
    return out


def test_examples_are_found():
    # Guards the extraction itself: these are known to be there, and no guide is left unread.
    assert sorted(GUIDES[1:]) == sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    readme, helps = readme_commands(), help_commands()
    assert "awty add 'scripts/check-backup.sh' --exec --at 'tomorrow 06:00'" in readme
    assert "awty history --since yesterday                               # 2h, 1d, monday, 9, " \
           "2026-11-01 ..." in readme
    assert "awty cancel --entity order --key 42" in readme
    assert "awty receiver --port 8080" in readme  # run briefly as a real process
    for first_words in ("awty run 01JD… --json", "awty systemd --install",  # docs/commands, running
                        "awty token new billing", "awty serve",  # docs/http-api
                        "awty import home.jsonl --allow-exec",  # docs/several-hosts
                        "awty schedule run report",  # docs/schedules
                        "awty schedule import-crontab my.crontab --apply"):
        assert any(c.startswith(first_words) for c in readme), first_words
    assert "awty add 'notify-send done' --exec --at 'tomorrow 09:00'" in helps
    assert "awty reschedule 01JD3… --in 1d" in helps
    assert "awty doctor --json | jq '.findings[] | select(.ok | not)'" in helps
    assert len(readme) >= 25 and len(helps) >= 20
    assert len(readme_scripts()) == 1  # signing


# --- running them --------------------------------------------------------------------------------
@pytest.fixture
def world(tmp_path, monkeypatch, fake_crontab):
    """A home, a fake crontab(1), a cwd holding jobs.jsonl, my.crontab and the --call examples' module,
    a receiver, one failed job."""
    home = tmp_path / "home"
    monkeypatch.setenv("TZ", "UTC")
    work = tmp_path / "work"
    work.mkdir()
    write_call_example(work)  # the --call examples' module, found from where `add` runs
    (work / "my.crontab").write_text(  # `schedule import-crontab my.crontab --apply`
        "MAILTO=ops@example.com\n# nightly\n0 3 * * * /usr/local/bin/backup.sh\n"
        "*/30 9-17 * * mon-fri curl -fsS https://example.com/ping\n")
    (work / "jobs.jsonl").write_text(
        '{"target": "https://api.example.com/hooks/a", "in": "2h"}\n'
        '{"target": "echo hi", "kind": "exec", "at": "tomorrow 06:00"}\n')
    monkeypatch.chdir(work)
    with Receiver() as rx:
        rx.script("/fails", status=404)
        clock = FixedClock(datetime(2026, 11, 22, 13, 0, tzinfo=UTC))
        with Awty(home, clock=clock, env={}) as a:
            failed = a.add(rx.url("/fails"), in_="1m").job
            clock.set(failed.next_check_at)
            assert a.run_slot(failed.next_check_at).outcomes == {"failed": 1}
        yield {"home": home, "tmp": tmp_path, "rx": rx, "failed": failed.id}


def pending_id(home: Path, url: str = "https://api.example.com/hooks/placeholder") -> str:
    with Awty(home, clock=FixedClock(NOW), env={}) as a:
        return a.add(url, in_="3h").job.id


def run_example(example: str, world) -> None:
    home, tmp = world["home"], world["tmp"]
    text = example.replace("/srv/awty", str(tmp / "srv-awty"))
    if PLACEHOLDER.search(text):
        if text.startswith("awty retry"):
            job = world["failed"]
        elif text.startswith("awty run "):  # fires now: at the receiver, not example.com
            job = pending_id(home, world["rx"].url("/run-now"))
        else:
            job = pending_id(home)
        text = PLACEHOLDER.sub(job, text)
    if text.startswith("awty schedule add "):
        text = text.replace("https://example.com/", world["rx"].url("/"))
    if text.startswith("awty serve"):
        return serve_briefly(text, world)
    if text.startswith("awty receiver"):
        return receiver_briefly(text, world)
    piped_to = None
    if "|" in text:
        text, piped_to = (p.strip() for p in text.split("|", 1))
    args = shlex.split(text, comments=True)[1:]
    res = runner.invoke(app, args, env={"AWTY_HOME": str(home), "AWTY_NOW": NOW_ISO})
    where = f"{example!r}: exit {res.exit_code}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert res.exit_code == 0, where
    assert "Traceback" not in res.stdout + res.stderr, where
    if piped_to is not None:
        assert piped_to.startswith("jq "), where
        json.loads(res.stdout)  # what jq needs


def serve_briefly(text: str, world) -> None:
    """A serve example as a real process: up, answering, stopped by SIGTERM."""
    import signal
    import ssl
    import time
    import urllib.request

    from awty.testing.receiver import free_port

    args = shlex.split(text, comments=True)[1:]
    for opt in ("--host", "--port"):  # tests listen on 127.0.0.1 only, on a port of their own
        if opt in args:
            i = args.index(opt)
            del args[i:i + 2]
    port = free_port()
    args += ["--host", "127.0.0.1", "--port", str(port)]
    scheme = "http"
    if "--certfile" in args:
        import trustme

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        cert.cert_chain_pems[0].write_to_path(args[args.index("--certfile") + 1])
        cert.private_key_pem.write_to_path(args[args.index("--keyfile") + 1])
        scheme = "https"
    env = {**os.environ, "AWTY_HOME": str(world["home"]), "AWTY_NOW": NOW_ISO}
    proc = subprocess.Popen([sys.executable, "-m", "awty", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        context = ssl._create_unverified_context() if scheme == "https" else None
        deadline, status = time.monotonic() + 30, None
        while status is None and proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/healthz",
                                            timeout=2, context=context) as r:
                    status = r.status
            except OSError:
                time.sleep(0.1)
        assert status == 200, f"{text!r} did not come up: {proc.poll()}"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert "Traceback" not in out + err, f"{text!r}: {err}"


def receiver_args(text: str, port: int) -> list[str]:
    """A receiver example's arguments, on a port of the test's own."""
    args = shlex.split(text, comments=True)[1:]
    if "--port" in args:
        i = args.index("--port")
        del args[i:i + 2]
    return [*args, "--port", str(port)]


def start_receiver(text: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """A receiver example as a real process (stdin not a terminal: its 600 s lifetime), once
    it answers."""
    import time
    import urllib.request

    from awty.testing.receiver import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "awty", *receiver_args(text, port)],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", data=b"{}", timeout=2)
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    out, err = proc.communicate(timeout=30)
    raise AssertionError(f"{text!r} did not come up: {proc.returncode}\n{out}\n{err}")


def stop_receiver(text: str, proc: subprocess.Popen[str]) -> str:
    import signal

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert "Traceback" not in out + err, f"{text!r}: {err}"
    assert "listening on http://127.0.0.1:" in err, err
    return out


def receiver_briefly(text: str, world) -> None:
    """A receiver example: up, printing a callback posted to it, stopped by SIGTERM."""
    env = {**os.environ, "AWTY_HOME": str(world["home"]), "AWTY_NOW": NOW_ISO}
    proc, _ = start_receiver(text, env)
    assert "receiver <- /ready" in stop_receiver(text, proc)


@pytest.mark.slow
def test_every_readme_command_runs(world):
    examples = readme_commands()
    for example in examples:
        run_example(example, world)
    home = world["home"]
    pending = {j["target"] for j in db_rows(home, "future_job")}
    assert {"scripts/check-backup.sh", "https://api.example.com/hooks/report"} <= pending
    assert world["failed"] in {j["id"] for j in db_rows(home, "future_job")}  # retried
    # `cancel --entity order --key 42` ended the jobs added for order 42, the --call one too.
    cancelled = {h["id"] for h in db_rows(home, "job_history") if h["outcome"] == "cancelled"}
    assert len(cancelled) >= 2
    # docs/schedules.md: `schedule run report` fired once, naming its schedule and no
    # occurrence; `remove` ended it; the crontab's lines became schedules beside `backup`.
    assert [(r.headers.get("x-awty-schedule"), r.headers.get("x-awty-occurrence"))
            for r in world["rx"].requests("/hooks/report")] == [("report", None)]
    schedules = {s["name"]: s for s in db_rows(home, "schedule")}
    assert {"backup", "backup-2", "curl-example-com"} <= set(schedules)
    assert "report" not in schedules
    assert schedules["backup-2"]["cron"] == "0 3 * * *"


@pytest.mark.slow
def test_every_help_example_runs(world):
    for example in help_commands():
        run_example(example, world)
    crontab = Path(os.environ["FAKE_CRONTAB"]).read_text()  # the fake_crontab fixture's
    assert "/opt/awty/bin/awty run-slot" in crontab  # the --awty-bin example was installed


@pytest.mark.slow
def test_readme_times_land_where_the_readme_says(world):
    """The Times block's comments are promises: check the instants, not only exit 0."""
    home = world["home"]
    got = {}
    for example in readme_commands():
        if not example.startswith("awty add ") or "/hooks/report" not in example:
            continue
        args = shlex.split(example, comments=True)[1:]
        res = runner.invoke(app, [*args, "--json", "--dry-run"],
                            env={"AWTY_HOME": str(home), "AWTY_NOW": "2026-11-22T08:00:00Z"})
        assert res.exit_code == 0, (example, res.stderr)
        got[" ".join(args[2:])] = json.loads(res.stdout)["first_check_at"]
    assert got == {
        "--at 9": "2026-11-22T09:00:00Z",
        "--at 07:00": "2026-11-23T07:00:00Z",
        "--at 9pm": "2026-11-22T21:00:00Z",
        "--at noon": "2026-11-22T12:00:00Z",
        "--at tomorrow 06:00": "2026-11-23T06:00:00Z",
        "--at next monday 9am": "2026-11-23T09:00:00Z",
        "--at now + 2 hours": "2026-11-22T10:00:00Z",
        "--at 2026-12-01 09:00": "2026-12-01T09:00:00Z",
        "--at 2026-12-01T09:00:00+01:00": "2026-12-01T08:00:00Z",
        "--at Dec 1 9am": "2026-12-01T09:00:00Z",
        "--in 90m": "2026-11-22T09:30:00Z",
        "--in 1 hour 30 minutes": "2026-11-22T09:30:00Z",
        "--in PT2H": "2026-11-22T10:00:00Z",
    }


@pytest.mark.slow
def test_readme_signing_block_signs_real_callbacks(world, tmp_path):
    """The block run by a shell as written (a fresh $HOME), then a callback fired with that
    home: the receiver verifies its signature with the secret init wrote, and with the one
    the rotation line added."""
    from standardwebhooks import Webhook

    (script,) = readme_scripts()
    user = tmp_path / "user"
    user.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWTY_", "XDG_"))}
    env.update(HOME=str(user), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    res = subprocess.run(["bash", "-euc", script], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    secrets = (user / ".local/share/awty/signing.secret").read_text().split()
    assert res.stdout.splitlines()[-1] == secrets[0]  # the cat line showed what init wrote
    assert len(secrets) == 2 and all(s.startswith("whsec_") for s in secrets)
    rx = world["rx"]
    rx.script("/signed", status=204)
    env["AWTY_NOW"] = NOW_ISO
    added = subprocess.run(["awty", "add", rx.url("/signed"), "--in", "1m", "--json"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    env["AWTY_NOW"] = json.loads(added.stdout)["next_check_at"]
    fired = subprocess.run(["awty", "run-slot"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert fired.returncode == 0, fired.stderr
    (req,) = rx.requests("/signed")
    sent = datetime.fromtimestamp(int(req.headers["webhook-timestamp"]), UTC)
    with freeze_time(sent):  # signed "now" = AWTY_NOW; verifiers refuse old timestamps
        for secret in secrets:  # old or new: a receiver holding either accepts
            Webhook(secret).verify(req.body, req.headers)


def readme_section(heading: str) -> str:
    section = README[README.index(f"## {heading}\n"):]
    return section[:section.index("\n## ", 3)]


@pytest.mark.slow
def test_first_ten_minutes_as_written(fake_crontab, monkeypatch):
    """The walk-through followed in order as a reader would: a fresh $HOME, the receiver kept
    running in its "second terminal", each ``01JD…`` the id the last ``add`` printed, and
    ``run-slot`` once the boundary that ``add`` printed has passed (AWTY_NOW moved there).
    The receiver printed both callbacks; crontab(1) got the lines."""
    monkeypatch.setenv("TZ", "UTC")
    blocks = re.findall(r"^```sh\n(.*?)^```", readme_section("First ten minutes"),
                        flags=re.S | re.M)
    lines = [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip()]
    assert [shlex.split(ln)[1] for ln in lines] == [
        "init", "receiver", "add", "list", "run", "show", "history", "add", "run-slot",
        "crontab"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWTY_", "XDG_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", AWTY_NOW=NOW_ISO)
    receiver = port = None
    outputs: dict[str, str] = {}
    job = ""
    try:
        for line in lines:
            if line.startswith("awty receiver"):
                receiver, port = start_receiver(line, env)
                continue
            line = PLACEHOLDER.sub(job, line.replace("127.0.0.1:8080", f"127.0.0.1:{port}"))
            args = shlex.split(line, comments=True)
            if args[1] == "run-slot":
                boundary = datetime.strptime(slot, "%Y%m%d%H%M").replace(tzinfo=UTC)
                env["AWTY_NOW"] = f"{boundary:%Y-%m-%dT%H:%M}:05Z"
            res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
            assert res.returncode == 0 and "Traceback" not in res.stderr, (line, res.stderr)
            outputs[args[1]] = res.stdout
            if args[1] == "add":
                job = re.search(r"^added (\S+)", res.stdout, flags=re.M).group(1)
                slot = re.search(r"^  slot  (\d{12}) ", res.stdout, flags=re.M).group(1)
    finally:
        printed = stop_receiver("awty receiver", receiver) if receiver else ""
    assert "done" in outputs["show"] and "http://127.0.0.1" in outputs["history"]
    got = [ln.split()[2] for ln in printed.splitlines() if "receiver <-" in ln]
    assert got == ["/ready", "/hello", "/later"], printed  # /ready: the start-up probe
    assert 'payload {"hello": "world"} -> 200' in printed
    assert "awty run-slot" in fake_crontab.read_text()


def readme_call_example() -> str:
    """The ``--call`` function shown under "Jobs and their answers" (a fence in a list item)."""
    (code,) = re.findall(r"^  ```python\n(.*?)^  ```", GUIDE, flags=re.S | re.M)
    return textwrap.dedent(code)


def write_call_example(directory: Path) -> None:
    (directory / "myapp").mkdir()
    (directory / "myapp" / "__init__.py").write_text("")
    (directory / "myapp" / "checks.py").write_text(readme_call_example())


def test_readme_call_example_runs(tmp_path, monkeypatch):
    """The README's --call function, as myapp/checks.py, fired by run-slot: not shipped is
    checked again 2 h later, shipped is done."""
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    write_call_example(app_dir)
    monkeypatch.chdir(app_dir)
    env = {"AWTY_HOME": str(tmp_path / "home"), "AWTY_NOW": NOW_ISO}
    ids = {}
    for shipped in (False, True):
        res = runner.invoke(app, ["add", "myapp.checks:order_shipped", "--call", "--in", "1m",
                                  "--entity", "order", "--key", "42", "--json", "--payload",
                                  json.dumps({"shipped": shipped})], env=env)
        assert res.exit_code == 0, res.stderr
        ids[shipped] = json.loads(res.stdout)["id"]
    res = runner.invoke(app, ["run-slot", "202611221430", "--json"],
                        env={**env, "AWTY_NOW": "2026-11-22T14:30:02Z"})
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["outcomes"], summary["rechecked"]) == ({"done": 1}, 1)
    (pending,) = db_rows(tmp_path / "home", "future_job")
    # 2 h after 14:30:02, rounded up to its slot
    assert (pending["id"], pending["next_check_at"]) == (ids[False], "2026-11-22T16:45:00Z")
    assert [h["id"] for h in db_rows(tmp_path / "home", "job_history")] == [ids[True]]


def test_readme_python_block_runs(tmp_path):
    (code,) = readme_blocks("python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env.update(AWTY_HOME=str(tmp_path / "pyhome"), AWTY_NOW=NOW_ISO)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    rows = db_rows(tmp_path / "pyhome", "job_history")
    assert [(r["entity_name"], r["outcome"]) for r in rows] == [("order", "cancelled")]
