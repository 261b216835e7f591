"""Nothing planted in the home can run a command or redirect a write (issue 10, item 3).

- A dropped-in envelope of a kind outside ``dropin_kinds`` (default http) is never imported:
  it goes to ``rejected/<slot>/`` with its reason, and ``SlotTree.rejected_files`` lists it.
- Every file awty writes under home (slot envelopes, set-aside notes, awty.toml, awty.log) is
  opened with O_NOFOLLOW and created with O_EXCL or a temp + rename: a symlink planted where
  awty writes is replaced or refused, and its target is never touched."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0
from relkit import cli_env, run_cli

from awty import config, jobspec
from awty.api import Awty
from awty.config import Settings
from awty.errors import InvalidInput
from awty.slottree.tree import SlotTree
from awty.slots import parse_slot_id, slot_id

VICTIM = "precious data\n"


def victim(tmp_path: Path) -> Path:
    p = tmp_path / "outside" / "victim.txt"
    p.parent.mkdir(exist_ok=True)
    p.write_text(VICTIM)
    return p


def untouched(p: Path) -> bool:
    return p.read_text() == VICTIM


# --- drop-ins: only the allowed kinds ----------------------------------------------------------
@pytest.mark.slow
def test_exec_and_python_drop_ins_are_set_aside_not_run(home, tmp_path, rx):
    """Through the real CLI: an exec envelope planted in a slot would `touch` a file."""
    proof = tmp_path / "ran"
    env = cli_env(home, T0)
    assert run_cli(["init"], env).returncode == 0
    res = run_cli(["add", rx.url("/real"), "--in", "1m"], env)
    assert res.returncode == 0, res.stderr
    sid = next(p.name for p in (home / "slots").iterdir())
    sd = home / "slots" / sid
    (sd / "cmd.json").write_text(json.dumps({"kind": "exec", "target": f"touch {proof}"}))
    (sd / "py.json").write_text(json.dumps({"kind": "python", "target": "os:getcwd"}))
    (sd / "hook.json").write_text(json.dumps({"target": rx.url("/dropped")}))
    run = run_cli(["run-slot", sid], cli_env(home, parse_slot_id(sid) + timedelta(seconds=5)))
    assert run.returncode == 0, run.stderr
    assert not proof.exists()
    assert len(rx.requests("/real")) == 1 and len(rx.requests("/dropped")) == 1
    rejected = {r.path.name: r for r in SlotTree(home).rejected_files()}
    assert set(rejected) == {"cmd.json", "py.json"}
    assert "exec jobs may not be dropped in" in rejected["cmd.json"].reason
    assert "dropin_kinds" in rejected["py.json"].reason
    assert rejected["cmd.json"].slot == sid
    assert json.loads(rejected["cmd.json"].path.read_text())["target"] == f"touch {proof}"
    doc = json.loads(run_cli(["doctor", "--json"], env).stdout)
    f = next(f for f in doc["findings"] if f["check"] == "rejected")
    assert f["status"] == "warning" and "2 file(s) set aside" in f["detail"]
    assert "/cmd.json: kind: exec jobs may not be dropped in" in f["detail"]


def test_dropin_kinds_setting_lets_exec_in(home, clock, tmp_path):
    proof = tmp_path / "ran"
    a = Awty(home, clock=clock, env={"AWTY_DROPIN_KINDS": "http,exec"})
    a.init()
    job = a.add(f"touch {proof}.added", kind="exec", in_="1m").job
    sd = home / "slots" / slot_id(job.next_check_at)
    (sd / "cmd.json").write_text(json.dumps({"kind": "exec", "target": f"touch {proof}"}))
    clock.set(job.next_check_at + timedelta(seconds=1))
    s = a.run_slot(job.next_check_at)
    assert s.imported == 1 and s.rejected == 0
    assert proof.exists()
    a.close()


@pytest.mark.parametrize("kinds, spec, ok", [
    (("http",), {"target": "https://example.com/"}, True),
    (("http",), {"kind": "exec", "target": "true"}, False),
    (("http",), {"kind": "python", "target": "os:getcwd"}, False),
    ((), {"target": "https://example.com/"}, False),
    (("http", "python"), {"kind": "python", "target": "os:getcwd"}, True),
])
def test_build_dropin_table(kinds, spec, ok):
    settings = Settings(dropin_kinds=kinds)
    slot = T0.replace(minute=15, second=0)
    if ok:
        job, _ = jobspec.build_dropin(spec, None, now=T0, settings=settings, slot=slot)
        assert job.next_check_at == slot
    else:
        with pytest.raises(InvalidInput, match="dropin_kinds"):
            jobspec.build_dropin(spec, None, now=T0, settings=settings, slot=slot)
    # the runner's current call (build with due=) applies the setting by default
    if not ok:
        with pytest.raises(InvalidInput, match="dropin_kinds"):
            jobspec.build(spec, now=T0, settings=settings, due=slot)


@pytest.mark.parametrize("value, want", [
    ("http", ("http",)), ("http, exec", ("http", "exec")), (["PYTHON"], ("python",)),
    ("", ()), (["http", "http"], ("http",)),
])
def test_dropin_kinds_setting(value, want):
    assert config.load(Path("/nonexistent"), env={}, file_data={"dropin_kinds": value}) \
        .dropin_kinds == want


def test_dropin_kinds_refuses_unknown_kind():
    with pytest.raises(InvalidInput, match="dropin_kinds"):
        config.load(Path("/nonexistent"), env={"AWTY_DROPIN_KINDS": "http,shell"})


def test_envelope_id_comes_from_the_file_name_only_when_it_is_an_id():
    good = "0123456789ABCDEFGHJKMNPQRS"
    assert jobspec.envelope_spec({"target": "x", "v": 1}, good) == {"target": "x", "id": good}
    assert jobspec.envelope_spec({"target": "x"}, good + "\n") == {"target": "x"}
    assert jobspec.envelope_spec({"target": "x", "id": "mine"}, good)["id"] == "mine"


# --- symlinks planted where awty writes ---------------------------------------------------------
def test_a_symlink_in_place_of_an_envelope_is_replaced_not_followed(home, clock, tmp_path, rx):
    a = Awty(home, clock=clock, env={})
    a.init()
    job = a.add(rx.url("/x"), in_="1m").job
    v = victim(tmp_path)
    # the envelope of the job's next slot (a retry re-slots it there) is a planted link
    rx.script("/x", status=503)
    nxt = job.next_check_at + timedelta(minutes=15)
    nd = home / "slots" / slot_id(nxt)
    nd.mkdir(mode=0o700)
    os.symlink(v, nd / f"{job.id}.json")
    clock.set(job.next_check_at + timedelta(seconds=1))
    a.run_slot(job.next_check_at)
    assert untouched(v)
    assert not (nd / f"{job.id}.json").is_symlink()
    assert json.loads((nd / f"{job.id}.json").read_text())["id"] == job.id
    a.close()


def test_set_aside_never_writes_through_planted_links(home, clock, tmp_path, rx):
    a = Awty(home, clock=clock, env={})
    a.init()
    job = a.add(rx.url("/x"), in_="1m").job
    sid = slot_id(job.next_check_at)
    sd = home / "slots" / sid
    v = victim(tmp_path)
    # rejected/<slot>/bad.json.reason planted as a link to the victim
    (home / "rejected" / sid).mkdir(parents=True)
    os.symlink(v, home / "rejected" / sid / "bad.json.reason")
    (sd / "bad.json").write_text("{not json")
    clock.set(job.next_check_at + timedelta(seconds=1))
    s = a.run_slot(job.next_check_at)
    assert s.rejected == 1 and untouched(v)
    note = home / "rejected" / sid / "bad.json.reason"
    assert not note.is_symlink() and "not JSON" in note.read_text()
    a.close()


def test_a_symlinked_rejected_dir_is_refused(home, clock, tmp_path, rx):
    a = Awty(home, clock=clock, env={})
    a.init()
    job = a.add(rx.url("/x"), in_="1m").job
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    os.symlink(outside, home / "rejected")
    (home / "slots" / slot_id(job.next_check_at) / "bad.json").write_text("{not json")
    clock.set(job.next_check_at + timedelta(seconds=1))
    s = a.run_slot(job.next_check_at)
    assert s.rejected == 1 and s.outcomes == {"done": 1}  # the slot still ran
    assert list(outside.rglob("*")) == []
    a.close()


def test_a_symlinked_slots_dir_is_not_written_through(home, clock, tmp_path, rx):
    a = Awty(home, clock=clock, env={})
    a.init()
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    os.rmdir(home / "slots")
    os.symlink(outside, home / "slots")
    job = a.add(rx.url("/x"), in_="1m").job  # accepted: the row runs without its envelope
    assert list(outside.rglob("*")) == []
    assert job.id
    a.close()


def test_init_never_writes_the_settings_file_through_a_link(home, tmp_path):
    home.mkdir(mode=0o700)
    dangling = tmp_path / "outside" / "created-by-awty.toml"
    dangling.parent.mkdir()
    os.symlink(dangling, home / "awty.toml")
    v = victim(tmp_path)
    Awty(home, env={}).init()
    assert not dangling.exists()
    os.unlink(home / "awty.toml")
    v.write_text("# the operator's own settings, linked in\n")
    os.symlink(v, home / "awty.toml")
    Awty(home, env={}).init()  # reading through a link is fine (settings kept in /etc)
    assert v.read_text() == "# the operator's own settings, linked in\n"


def test_the_log_is_never_written_through_a_link(home, clock, tmp_path, rx):
    a = Awty(home, clock=clock, env={})
    a.init()
    v = victim(tmp_path)
    os.symlink(v, home / "awty.log")
    job = a.add(rx.url("/x"), in_="1m").job
    (home / "slots" / slot_id(job.next_check_at) / "bad.json").write_text("{")  # a warning
    clock.set(job.next_check_at + timedelta(seconds=1))
    a.run_slot(job.next_check_at)
    a.close()
    assert untouched(v)


def test_write_new_and_replace_in_leave_link_targets_alone(tmp_path):
    from awty.safeio import private_dir_fd, replace_in, write_new

    v = victim(tmp_path)
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(v, d / "new.txt")
    assert write_new(d / "new.txt", b"x") is False and untouched(v)
    fd = private_dir_fd(tmp_path, "d")
    try:
        replace_in(fd, "new.txt", b"replaced")
    finally:
        os.close(fd)
    assert untouched(v) and (d / "new.txt").read_bytes() == b"replaced"
    assert not (d / "new.txt").is_symlink()
    os.symlink(tmp_path / "outside", d / "sub")
    with pytest.raises(OSError):
        private_dir_fd(tmp_path, "d", "sub")
    assert [p.name for p in (tmp_path / "outside").iterdir()] == ["victim.txt"]


def test_files_put_back_into_a_slot_never_follow_a_planted_link(home, tmp_path):
    """restore_retired (a retirement cut short) moves files back into their slot: a symlink
    planted in the slot's place is refused, nothing lands outside the tree."""
    tree = SlotTree(home)
    sid = "202611221015"
    cut = home / ".retired" / f"{sid}.0badc0de"
    cut.mkdir(parents=True)
    (cut / "late.json").write_text("{}")
    (home / "slots").mkdir()
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    os.symlink(outside, home / "slots" / sid)
    with pytest.raises(OSError):
        tree.restore_retired(cut)
    assert list(outside.iterdir()) == [] and (cut / "late.json").exists()
