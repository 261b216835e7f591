"""Checks of the slot tree against the store: envelopes missing, orphaned, in the wrong slot,
leftover temp files, drop-ins awaiting import, retired slot directories not yet deleted."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

from ..api import Awty
from ..clock import file_time_now
from ..slottree.staging import BATCH_SUFFIX
from ..slottree.tree import Entry
from ..slots import current_slot, slot_id
from .base import Ctx, Finding, RETIRED_AGE, TEMP_FILE_AGE, Tally, tree_of


@dataclass
class _TreeTally:
    missing: Tally = field(default_factory=Tally)
    orphans: Tally = field(default_factory=Tally)
    strays: Tally = field(default_factory=Tally)
    temps: Tally = field(default_factory=Tally)
    drop_ins: Tally = field(default_factory=Tally)
    past_drop_ins: int = 0
    current: datetime | None = None
    batch_files: int = 0  # awty's batch files holding pending jobs, and those jobs
    batched: int = 0


def check_tree(ctx: Ctx) -> list[Finding]:
    a = ctx.a
    t = _TreeTally(current=current_slot(ctx.now, a.settings.resolution))
    in_db = {s for s, _ in ctx.store.slots_with_work()}
    for slot in sorted(in_db | set(tree_of(a).slots())):
        _check_slot(ctx, slot, slot in in_db, t)
    r = ctx.repair
    drop = t.drop_ins.finding(
        "drop-ins", "no files awaiting import",
        "file(s) the database does not know (dropped in by another program)", None, r)
    if t.drop_ins.found:
        drop = Finding("drop-ins", t.past_drop_ins == 0, drop.detail + ": the runner imports "
                       "valid envelopes and sets the rest aside in rejected/"
                       + (f"; {t.past_drop_ins} sit in past slots: run `awty catchup`"
                          if t.past_drop_ins else ""))
    held = (f" ({t.batched} of them in {t.batch_files} batch file(s))" if t.batch_files
            else "")
    return [
        t.missing.finding("envelopes", "every pending job has its envelope" + held,
                          "pending job(s) without an envelope (they still run)",
                          ("writes them", "wrote"), r),
        t.orphans.finding("orphans", "no orphan envelopes",
                          "envelope(s) of job(s) that ended (cancelled or finished)",
                          ("removes them", "removed"), r),
        t.strays.finding("wrong slot", "every envelope is in its job's slot",
                         "envelope(s) in the wrong slot", ("moves them", "moved"), r),
        t.temps.finding("temp files", "no leftover temp files",
                        f"leftover temp file(s) older than {TEMP_FILE_AGE:.0f}s",
                        ("removes them", "removed"), r),
        drop,
    ]


def check_retired(ctx: Ctx) -> list[Finding]:
    """Finished slot directories are renamed into ``.retired/`` and deleted by a background
    ``rm``: one still there after RETIRED_AGE seconds was not deleted (the ``rm`` was killed),
    and one without ``.purge`` is a retirement cut short, whose files go back to their slot."""
    stale, cut = Tally(), Tally()
    for path in ctx.tree.retired_dirs():
        if path.name.endswith(".purge"):
            try:
                age = ctx.now.timestamp() - path.lstat().st_mtime
            except FileNotFoundError:
                continue  # deleted while we looked
            if age > RETIRED_AGE:
                stale.note(path.name)
                stale.attempt(partial(shutil.rmtree, path), ctx.repair)
        else:
            cut.note(path.name)
            cut.attempt(partial(ctx.tree.restore_retired, path), ctx.repair)
    out = [stale.finding("retired slots", "no finished slot directory left undeleted",
                         f"finished slot director(y/ies) not deleted after {RETIRED_AGE:.0f}s",
                         ("deletes them", "deleted"), ctx.repair)]
    if cut.found:
        out.append(cut.finding("cut-short retirements", "",
                               "retired slot director(y/ies) never checked for late files",
                               ("puts their files back in their slots", "put back"),
                               ctx.repair))
    return out


def check_incoming(ctx: Ctx) -> list[Finding]:
    """A big add writes its envelopes into ``.incoming/<batch>/<slot>/`` while its rows go in, then
    moves them into their slots: a directory still there after TEMP_FILE_AGE seconds is an
    add cut short (its committed rows miss their envelopes: the envelopes check writes them)."""
    left = Tally()
    for path in ctx.tree.incoming_dirs():
        try:
            age = ctx.now.timestamp() - path.lstat().st_mtime
        except FileNotFoundError:
            continue
        if age > TEMP_FILE_AGE:
            left.note(path.name)
            left.attempt(partial(shutil.rmtree, path), ctx.repair)
    return [left.finding("incoming", "no batch of envelopes left outside the slot tree",
                         f"batch(es) of envelopes left in .incoming/ for over "
                         f"{TEMP_FILE_AGE:.0f}s (an add cut short)", ("deletes them", "deleted"),
                         ctx.repair)]


def _check_slot(ctx: Ctx, slot: datetime, in_db: bool, t: _TreeTally) -> None:
    a, sid = ctx.a, slot_id(slot)
    here = ctx.store.slot_ids(slot) if in_db else set()
    entries = list(tree_of(a).entries(slot))
    batches = [e for e in entries if e.name.endswith(BATCH_SUFFIX)]
    entries = [e for e in entries if not e.name.endswith(BATCH_SUFFIX)]
    names = {e.job_id for e in entries if e.job_id}
    for e in batches:
        names |= _check_batch(ctx, slot, e, here, t)
    for job_id in sorted(_unscheduled(ctx, slot, here - names)):
        t.missing.note(f"{sid}/{job_id}")
        t.missing.attempt(partial(_write_envelope, a, job_id, slot), ctx.repair)
    strangers = [e for e in entries if e.job_id not in here]
    known = ctx.store.find(e.job_id for e in strangers if e.job_id) if strangers else {}
    for e in strangers:
        if e.job_id in known and known[e.job_id] is None:
            t.orphans.note(f"{sid}/{e.name}")
            t.orphans.attempt(partial(tree_of(a).remove_entry, e), ctx.repair)
        elif e.job_id in known:
            right = known[e.job_id]
            assert right is not None  # the branch above took the unknown ones
            t.strays.note(f"{sid}/{e.name} (belongs in {slot_id(right)})")
            t.strays.attempt(partial(_move_stray, a, e, right), ctx.repair)
        else:
            t.drop_ins.note(f"{sid}/{e.name}")
            t.past_drop_ins += slot < t.current  # type: ignore[operator]  # set at start
    for path in tree_of(a).temp_files(slot):
        if _age(path) > TEMP_FILE_AGE:
            t.temps.note(f"{sid}/{path.name}")
            t.temps.attempt(partial(_unlink, path), ctx.repair)
    if ctx.repair:
        tree_of(a).remove_slot_if_empty(slot)


def _check_batch(ctx: Ctx, slot: datetime, e: Entry, here: set[str], t: _TreeTally) -> set[str]:
    """A batch file holds envelopes while one of its jobs is pending here (the ids it holds
    for this slot are returned); one whose jobs are all known and none pending here is an
    orphan; one with jobs awty has never seen is a drop-in (the runner imports or refuses it
    whole), as is one it cannot read."""
    sid = slot_id(slot)
    try:
        lines = tree_of(ctx.a).batch_ids(e)
    except ValueError as err:
        t.drop_ins.note(f"{sid}/{e.name} ({err})")
        t.past_drop_ins += slot < t.current  # type: ignore[operator]  # set at start
        return set()
    ids = [i for i in lines if i]
    mine = here.intersection(ids)
    if mine:
        t.batch_files += 1
        t.batched += len(mine)
        return mine
    known = ctx.store.find(ids) if ids else {}
    if lines and len(known) == len(lines):
        t.orphans.note(f"{sid}/{e.name} ({len(ids)} job(s), none pending here)")
        t.orphans.attempt(partial(tree_of(ctx.a).remove_entry, e), ctx.repair)
    else:
        t.drop_ins.note(f"{sid}/{e.name} ({len(lines)} job(s))")
        t.past_drop_ins += slot < t.current  # type: ignore[operator]  # set at start
    return set()


def _unscheduled(ctx: Ctx, slot: datetime, ids: set[str]) -> set[str]:
    """``ids`` but a schedule's jobs: they are made inside a claim's transaction, which writes
    no file, so they have no envelope by design (a pending row without one still runs)."""
    if not ids:
        return ids
    return ids - {j.id for j in ctx.store.list(slot=slot) if j.schedule is not None}


def _write_envelope(a: Awty, job_id: str, slot: datetime) -> None:
    job = a.store.get(job_id)
    if job is not None and job.next_check_at == slot:  # it may have run meanwhile
        tree_of(a).write(job)


def _move_stray(a: Awty, entry: Entry, right: datetime) -> None:
    tree_of(a).remove_entry(entry)
    assert entry.job_id is not None  # a stray was found by its id
    if not (tree_of(a).slot_path(right) / entry.name).exists():
        _write_envelope(a, entry.job_id, right)


def _age(path: Path) -> float:
    try:
        # File times are the file system's real time, so compare with real time, not the clock.
        return file_time_now() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def check_rejected(ctx: Ctx) -> Finding:
    """Files the runner set aside in ``rejected/`` instead of importing (bad envelopes, kinds
    not in ``dropin_kinds``, planted links). They harm nothing there, so this is a warning;
    the operator reads the reasons and deletes them."""
    found = ctx.tree.rejected_files()
    if not found:
        return Finding("rejected", True, "no files set aside in rejected/")
    shown = "; ".join(f"{f.slot}/{f.path.name}: {(f.reason or 'no reason noted').strip()}"
                      for f in found[:3])
    more = f" … and {len(found) - 3} more" if len(found) > 3 else ""
    return Finding("rejected", True, f"{len(found)} file(s) set aside in "
                   f"{ctx.tree.rejected}: {shown}{more} (read, then delete them)",
                   warning=True, summary=f"{len(found)} file(s) set aside in rejected/")
