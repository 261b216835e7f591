"""Reconciling a slot's directory with the store before it runs: a file with no pending row
here is an orphan (removed); a file whose id awty has never seen is a drop-in (imported, or
set aside in ``rejected/`` with its reason). A batch file (``<id>.batch.jsonl``, one envelope a
line) stays while one of its jobs is pending here, goes once all of them are known and none is
(an orphan), and one holding only jobs awty has never seen is a dropped-in batch: imported all
or nothing (a line awty cannot take sets the whole file aside)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from datetime import datetime

from ..clock import Clock
from ..config import Settings
from ..errors import AwtyError, Conflict
from ..model import Job, SlotSummary
from ..slottree.staging import BATCH_SUFFIX
from ..slottree.tree import Entry, SlotTree
from ..slots import slot_id
from ..store.base import Store
from ..store.filelocks import open_lock_file, try_flock


class Reconciler:
    def __init__(self, store: Store, tree: SlotTree, settings: Settings, clock: Clock,
                 warn: Callable[..., None]):
        self.store = store
        self.tree = tree
        self.settings = settings
        self.clock = clock
        self._warn = warn

    def run(self, slot: datetime, summary: SlotSummary,
            claimed: set[str] | None = None) -> list[str]:
        """One reconciler per slot at a time. An unsharded runner and shard 1/n hold different
        slot locks (the hourly catch-up overlapping a sharded cron), and two importers of one
        drop-in would each give it an id of its own and fire it twice. A runner that finds the
        slot being reconciled skips it: the other one imports. ``claimed``: ids the calling run
        claimed from this slot (it reconciles beside sending): rows of the slot, whatever they
        became since. Returns the ids of the jobs it imported."""
        # flock(2) as the store's own locks take it (filelock's import held the GIL for
        # 10-30 ms beside the first callbacks)
        self.tree.locks.mkdir(mode=0o700, exist_ok=True)
        fd = open_lock_file(self.tree.locks / f"{slot_id(slot)}.reconcile.lock")
        try:
            if not try_flock(fd, fcntl.LOCK_EX):
                return []
            return self._reconcile(slot, summary, claimed or set())
        finally:
            os.close(fd)  # and the lock with it

    def _reconcile(self, slot: datetime, summary: SlotSummary, claimed: set[str]) -> list[str]:
        """SQLite decides: a file with no pending row here is an orphan (removed); a file whose
        id awty has never seen is a drop-in (imported, or set aside with its reason)."""
        from .. import jobspec

        link = self.tree.set_aside_slot_link(slot)  # never list, import or delete through it
        if link:
            summary.rejected += 1
            self._warn(f"slot {summary.slot}: set aside the slot directory itself: {link}",
                       slot=summary.slot)
        imported: list[str] = []
        # Listed before the rows are read: a job added meanwhile has its row before its file,
        # so no file listed here can be a job this read has not seen (and be taken for an
        # orphan).
        names = self.tree.names(slot)
        if not names:
            return imported
        here = self.store.slot_ids(slot) | claimed
        strangers = self.tree.strangers(slot, here, names)
        if not strangers:
            return imported
        batches = [e for e in strangers if e.name.endswith(BATCH_SUFFIX)]
        if batches:
            strangers = [e for e in strangers if not e.name.endswith(BATCH_SUFFIX)]
            for e in batches:
                imported += self._batch(e, slot, here, summary)
        known = self.store.find(e.job_id for e in strangers if e.job_id)
        drop_ins: list[tuple[Job, str | None, Entry]] = []
        for e in strangers:
            if e.job_id and e.job_id in known:
                self.tree.remove_entry(e)
                summary.orphans_removed += 1
                continue
            if not e.name.endswith(".json"):
                self._reject(e, slot, "not a .json envelope", summary)
                continue
            try:
                data = self.tree.read(e)
                job, fp = jobspec.build_dropin(data, e.job_id, now=self.clock.now(),
                                               settings=self.settings, slot=slot)
            except (ValueError, AwtyError) as err:
                self._reject(e, slot, str(err), summary)
                continue
            drop_ins.append((job, fp, e))
        if drop_ins:
            # An envelope naming the id of a job awty already knows (pending elsewhere, or
            # ended) is a replay, not new work: running it again would end that job twice.
            taken = self.store.find(d[0].id for d in drop_ins if d[0].id != d[2].job_id)
            for d in [d for d in drop_ins if d[0].id in taken]:
                self._reject(d[2], slot, f"id {d[0].id} is already used by another job",
                             summary)
            drop_ins = [d for d in drop_ins if d[0].id not in taken]
        if drop_ins:
            try:
                added = self.store.add([d[0] for d in drop_ins], [d[1] for d in drop_ins])
            except Conflict:
                # One at a time: only the drop-ins the store refuses (an id or idempotency key
                # already taken) are set aside; the others still run.
                kept, added = [], []
                for d in drop_ins:
                    try:
                        added += self.store.add([d[0]], [d[1]])
                    except Conflict as err:
                        self._reject(d[2], slot, str(err), summary)
                        continue
                    kept.append(d)
                drop_ins = kept
            for (job, _, e), a in zip(drop_ins, added, strict=True):
                if e.name != f"{job.id}.json" or not a.created:
                    self.tree.remove_entry(e)
                if a.created:  # else its idempotency key named a job awty already has
                    self.tree.write(a.job)
                    imported.append(a.job.id)
                summary.imported += a.created
            if drop_ins:
                self._warn(f"slot {summary.slot}: imported {len(drop_ins)} dropped-in "
                           "envelope(s)", slot=summary.slot)
        return imported

    def _batch(self, e: Entry, slot: datetime, here: set[str],
               summary: SlotSummary) -> list[str]:
        """A batch file whose first job is not pending here (else ``strangers`` kept it)."""
        from .. import jobspec

        try:
            ids = self.tree.batch_ids(e)
        except ValueError as err:
            self._reject(e, slot, str(err), summary)
            return []
        if any(i in here for i in ids if i):
            return []  # lazy: the file goes once none of its jobs is pending here
        named = [i for i in ids if i]
        known = self.store.find(named) if named else {}
        if ids and len(known) == len(ids):  # awty's own file: its jobs ended, or moved on
            self.tree.remove_entry(e)
            summary.orphans_removed += 1
            return []
        taken = [(n, i) for n, i in enumerate(ids, 1) if i in known]
        if taken:  # a replay of jobs awty has: running them again would end them twice
            n, i = taken[0]
            self._reject(e, slot, f"line {n}: id {i} is already used by another job", summary)
            return []
        built: list[tuple[Job, str | None]] = []
        try:
            for n, data in enumerate(self.tree.read_batch(e), 1):
                try:
                    built.append(jobspec.build_dropin(data, None, now=self.clock.now(),
                                                      settings=self.settings, slot=slot))
                except AwtyError as err:
                    raise ValueError(f"line {n}: {err}") from None
            if not built:
                raise ValueError("an empty batch file")
            added = self.store.add([b[0] for b in built], [b[1] for b in built])
        except (ValueError, Conflict) as err:
            self._reject(e, slot, str(err), summary)
            return []
        self.tree.remove_entry(e)
        made = [a.job for a in added if a.created]  # else a key named a job awty has
        self.tree.write_many(made)
        summary.imported += len(made)
        self._warn(f"slot {summary.slot}: imported {len(made)} job(s) of the dropped-in batch "
                   f"file {e.name}", slot=summary.slot)
        return [j.id for j in made]

    def _reject(self, entry: Entry, slot: datetime, reason: str, summary: SlotSummary) -> None:
        try:
            self.tree.set_aside(entry, slot, reason)
        except OSError as e:
            reason += f" (and could not be moved aside: {e.strerror})"
        summary.rejected += 1
        self._warn(f"slot {slot_id(slot)}: set aside {entry.name}: {reason}",
                   slot=slot_id(slot), outcome="rejected")
