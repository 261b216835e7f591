"""Issue 28 #4: ``awty import`` trusts no file. A real export (a SQLite home with pending jobs
and history, written by ``awty export``), altered the way a hostile or broken file would be,
imported by a real ``awty import`` process into a fresh home on each store:

- every job goes through ``add``'s checks: an id that is a path (``../../../x``, ``/abs``;
  before: SQLite wrote the envelope outside the home, PostgreSQL stored the id), a metadata
  target (always refused), a private one under ``deny_private_networks``, a payload over
  ``max_payload_bytes``, exec and python jobs without ``--allow-exec`` (before: imported, and
  the exec job ran), in pending jobs and in the jobs history rows keep (what ``retry``
  re-arms); a refused file exits 2 with one line naming the line and the field, and nothing
  is stored, no file written;
- with ``--allow-exec`` the exec job is imported, and runs;
- jobs and history go in together or not at all: a history row the database refuses leaves no
  job behind and the same file imports once the cause is gone (before: the jobs stayed without
  their history and every later import was refused, the store no longer being empty);
- a history row holding a NUL in what a run wrote (its output) is imported escaped, as a run
  keeps it (before: PostgreSQL refused it, halfway); a NUL in a name (its target) is refused.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver
from helpers import T0
from relkit import allow_history_rows, cli_env, refuse_history_rows, run_cli

pytestmark = pytest.mark.reliability

# Line numbers in the export below: 1 the format, 2 the pending job, 3 and 4 the history rows
# (a done job keeping its payload, a failed one keeping its whole job), 5 the counts.
PENDING, DONE, FAILED = 2, 3, 4


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> list[dict]:
    """A real export: one pending job, one done, one failed (its history row keeps the job)."""
    src = tmp_path_factory.mktemp("src") / "home"
    with Receiver() as rx:
        rx.script("/fail", status=500)
        with Awty(src, clock=FixedClock(T0), env={}) as a:
            a.add_many([{"target": rx.url("/ok"), "in": "1m"},
                        {"target": rx.url("/fail"), "in": "1m", "max_attempts": 1},
                        {"target": rx.url("/later"), "in": "2h", "payload": {"n": 1}}])
            slot = next(iter(a.list())).next_check_at
        env = cli_env(src, slot + timedelta(seconds=1))
        assert run_cli(["run-slot", slot_id(slot)], env).returncode == 0
    out = src.parent / "export.jsonl"
    done = run_cli(["export", "--output", str(out)], env)
    assert done.returncode == 0, done.stderr
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [next(iter(d)) for d in docs] == ["format", "job", "history", "history", "end"]
    # The two history rows end in the same run, in either order (export orders them by when
    # they ended): the tests below name them by line, so the fixture puts done first.
    docs[DONE - 1:FAILED] = sorted(docs[DONE - 1:FAILED],
                                   key=lambda d: d["history"]["outcome"] != "done")
    assert docs[DONE - 1]["history"]["outcome"] == "done"
    assert docs[FAILED - 1]["history"]["outcome"] == "failed"
    assert docs[FAILED - 1]["history"]["job"] is not None
    return docs


def _file(tmp_path, docs: list[dict], name: str = "in.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _with(docs: list[dict], line: int, **fields) -> list[dict]:
    """The export with fields of the record on ``line`` changed."""
    docs = json.loads(json.dumps(docs))
    rec = docs[line - 1]
    next(iter(rec.values())).update(fields)
    return docs


def _kept_job(docs: list[dict], **fields) -> list[dict]:
    """The export with fields of the job the failed row keeps changed (its JSON text)."""
    job = json.loads(docs[FAILED - 1]["history"]["job"])
    job.update(fields)
    return _with(docs, FAILED, job=json.dumps(job))


def _import(home, backend, path, *extra, **settings):
    env = {**cli_env(home, T0, **settings), **backend.env}
    return run_cli(["import", str(path), *extra], env)


def _held(home, backend) -> tuple[int, int]:
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        return a.count(), len(a.history(limit=100))


def _refused(home, backend, tmp_path, docs, *extra, line: int, field: str, says: str = "",
             **settings) -> str:
    got = _import(home, backend, _file(tmp_path, docs), *extra, **settings)
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr)
    [message] = got.stderr.strip().splitlines()
    assert f"line {line}: {field}" in message, message
    assert says in message, message
    assert "Traceback" not in got.stderr
    assert _held(home, backend) == (0, 0)
    assert not list((home / "slots").rglob("*.json")) if (home / "slots").exists() else True
    return message


@pytest.mark.slow
def test_an_id_that_is_a_path_writes_nothing_anywhere(home, backend, tmp_path, export):
    for bad in ("../../../escaped", str(tmp_path / "absolute")):
        _refused(home, backend, tmp_path, _with(export, PENDING, id=bad), line=PENDING,
                 field="id", says="is not an awty id")
        _refused(home, backend, tmp_path, _with(export, DONE, id=bad), line=DONE, field="id")
    assert not (tmp_path / "escaped.json").exists()
    assert not (tmp_path / "absolute.json").exists()
    assert [p for p in tmp_path.rglob("*.json") if "home" not in p.parts] == []


@pytest.mark.slow
def test_exec_and_python_jobs_only_with_allow_exec(home, backend, tmp_path, export):
    marker = tmp_path / "ran"
    command = f"touch {marker}"
    shell = _with(export, PENDING, kind="exec", target=command, cwd=str(tmp_path))
    says = "exec jobs are imported only with --allow-exec"
    _refused(home, backend, tmp_path, shell, line=PENDING, field="kind", says=says)
    _refused(home, backend, tmp_path, _with(export, PENDING, kind="python", target="os:getcwd"),
             line=PENDING, field="kind", says="python jobs are imported only with --allow-exec")
    _refused(home, backend, tmp_path, _with(export, DONE, kind="exec", target=command),
             line=DONE, field="kind", says=says)
    _refused(home, backend, tmp_path, _kept_job(export, kind="exec", target=command),
             line=FAILED, field="job: kind", says=says)

    got = _import(home, backend, _file(tmp_path, shell), "--allow-exec")
    assert got.returncode == 0, got.stderr
    assert _held(home, backend) == (1, 2)
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        [job] = a.list()
    env = {**cli_env(home, job.next_check_at + timedelta(seconds=1)), **backend.env}
    assert run_cli(["run-slot", slot_id(job.next_check_at)], env).returncode == 0
    assert marker.exists()  # imported on purpose, it runs


@pytest.mark.slow
def test_targets_are_held_to_the_callback_rules(home, backend, tmp_path, export):
    metadata = "http://169.254.169.254/latest/meta-data/"
    for extra in ([], ["--allow-exec"]):
        _refused(home, backend, tmp_path, _with(export, PENDING, target=metadata), *extra,
                 line=PENDING, field="target", says="metadata")
    _refused(home, backend, tmp_path, _kept_job(export, target=metadata), line=FAILED,
             field="job: target")
    private = _with(export, PENDING, target="http://10.1.2.3/hook")
    _refused(home, backend, tmp_path, private, line=PENDING, field="target",
             deny_private_networks="true")
    got = _import(home, backend, _file(tmp_path, private))  # not denied here: imported
    assert got.returncode == 0, got.stderr
    assert _held(home, backend) == (1, 2)


@pytest.mark.slow
def test_payloads_are_held_to_max_payload_bytes(home, backend, tmp_path, export):
    big = json.dumps({"blob": "x" * 5000})
    _refused(home, backend, tmp_path, _with(export, PENDING, payload_json=big), line=PENDING,
             field="payload", says="max_payload_bytes")
    _refused(home, backend, tmp_path, _with(export, DONE, payload=big), line=DONE,
             field="payload", says="max_payload_bytes")
    _refused(home, backend, tmp_path, _with(export, PENDING, payload_json="{not json"),
             line=PENDING, field="payload")


@pytest.mark.slow
def test_text_a_run_wrote_is_escaped_a_name_is_refused(home, backend, tmp_path, export):
    _refused(home, backend, tmp_path, _with(export, DONE, target="http://127.0.0.1/\0x"),
             line=DONE, field="target")
    _refused(home, backend, tmp_path, _with(export, PENDING, entity_name="a\0b"),
             line=PENDING, field="entity")
    got = _import(home, backend, _file(tmp_path, _with(export, FAILED, output="ok\0end",
                                                       error="bad \ud800 one")))
    assert got.returncode == 0, got.stderr
    rows = {h["outcome"]: h for h in json.loads(run_cli(
        ["history", "--json"], {**cli_env(home, T0), **backend.env}).stdout)}
    assert rows["failed"]["output"] == "ok\\x00end"
    assert rows["failed"]["error"] == "bad \\ud800 one"


@pytest.mark.slow
def test_jobs_and_history_go_in_together_or_not_at_all(home, backend, tmp_path, export):
    path = _file(tmp_path, _with(export, FAILED, reason="refuse me"))
    refuse_history_rows(home, backend, "reason", "refuse me", "refused")
    got = _import(home, backend, path)
    assert got.returncode == 1, (got.stdout, got.stderr)
    assert len(got.stderr.strip().splitlines()) == 1 and "refused" in got.stderr
    assert _held(home, backend) == (0, 0)  # no job without its history
    assert not list((home / "slots").rglob("*.json")) if (home / "slots").exists() else True
    allow_history_rows(home, backend)
    again = _import(home, backend, path)  # nothing was left behind to refuse it
    assert again.returncode == 0, again.stderr
    assert _held(home, backend) == (1, 2)
