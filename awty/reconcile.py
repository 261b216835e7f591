"""Reconciling a slot's directory with the store before it runs: a file with no pending row
here is an orphan (removed); a file whose id awty has never seen is a drop-in (imported, or
set aside in ``rejected/`` with its reason)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from datetime import datetime

from .clock import Clock
from .config import Settings
from .errors import AwtyError, Conflict
from .model import Job, SlotSummary
from .slotdir import Entry, SlotTree
from .slots import slot_id
from .store.base import Store
from .store.filelocks import open_lock_file, try_flock


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
        from . import jobspec

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
        strangers = self.tree.strangers(slot, self.store.slot_ids(slot) | claimed, names)
        if not strangers:
            return imported
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

    def _reject(self, entry: Entry, slot: datetime, reason: str, summary: SlotSummary) -> None:
        try:
            self.tree.set_aside(entry, slot, reason)
        except OSError as e:
            reason += f" (and could not be moved aside: {e.strerror})"
        summary.rejected += 1
        self._warn(f"slot {slot_id(slot)}: set aside {entry.name}: {reason}",
                   slot=slot_id(slot), outcome="rejected")
