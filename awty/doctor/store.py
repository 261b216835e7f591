"""Checks of the store through its contract (``Store.check``, ``leases``, ``release_stale``,
``slots_with_work``, ``unarmed_schedules``): schema and integrity, stale leases, jobs off the
resolution's boundaries, work left in past slots, schedules without their pending occurrence."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from ..api import Awty
from ..cronhealth import overdue_until
from ..errors import AwtyError
from ..model import StoreHealth
from ..slots import is_boundary, iso, slot_for, slot_id
from .base import Ctx, Finding, SAMPLES, Tally


def check_schema_and_integrity(ctx: Ctx) -> bool:
    """Read both through the read-only store, before anything would migrate. True when the
    store may be used for the remaining checks."""
    try:
        health = _inspect(ctx)
    except AwtyError as e:
        ctx.add(Finding("schema", False, f"cannot read {ctx.a.db_path}: {e}"))
        return False
    version, sound = health.schema_version, not health.problems
    want = health.expected_version
    if version > want:
        ctx.add(Finding("schema", False, f"version {version} is newer than this awty "
                        f"understands ({want}): upgrade awty"))
        return False
    if version < want and not ctx.repair:
        ctx.add(Finding("schema", False, f"version {version}, this awty needs {want}: the next "
                        "awty command migrates it (or `awty doctor --repair`); other database "
                        "checks skipped"))
        _check_integrity(ctx, health)
        return False
    if version == want:
        ctx.add(Finding("schema", True, f"version {version}"))
    elif not sound:
        ctx.add(Finding("schema", False, f"version {version}, not migrated to {want}: the "
                        "database is damaged", False))
    else:
        try:
            _ = ctx.a.store  # opening migrates
        except AwtyError as e:
            ctx.add(Finding("schema", False, f"version {version}: migration failed: {e}", False))
            return False
        ctx.add(Finding("schema", False, f"version {version}; migrated to {want}", True))
    return _check_integrity(ctx, health) or version == want


def _check_integrity(ctx: Ctx, health: StoreHealth) -> bool:
    if not health.problems:
        ctx.add(Finding("integrity", True, health.detail))
        return True
    ctx.add(Finding("integrity", False, f"{health.detail}; doctor repairs nothing else in a "
                    "damaged store"))
    ctx.repair = False
    return False


def _inspect(ctx: Ctx) -> StoreHealth:
    """The store's own health (schema version, integrity), read-only."""
    view = ctx.a.read_only()
    try:
        return view.store.check()
    finally:
        view.close()


# --- leases --------------------------------------------------------------------------------
def check_leases(ctx: Ctx) -> Finding:
    """Jobs in flight whose runner is gone: with an expired lease (stale: the next run takes
    them; --repair gives them back now) or not yet expired (held: taken once the lease ends;
    left alone, since a PostgreSQL runner that lost only its session may still be sending what
    it had started). Lease times are the store's lease clock (PostgreSQL: the server's)."""
    groups = ctx.store.leases(ctx.now)
    stale = [g for g in groups if g.expired and g.alive is not True]
    held = [g for g in groups if g.alive is False and g.jobs > g.expired]
    found = sum(g.expired for g in stale)
    waiting = sum(g.jobs - g.expired for g in held)
    if not found and not waiting:
        return Finding("leases", True, f"no stale leases ({sum(g.jobs for g in groups)} job(s) "
                       "in flight now)")
    parts = []
    if waiting:
        who = ", ".join(f"{g.owner} ({g.jobs - g.expired}, lease ends {iso(g.ends)})"
                        if g.ends else f"{g.owner} ({g.jobs - g.expired})" for g in held[:SAMPLES])
        parts.append(f"{waiting} job(s) held by a runner that is gone: {who}; the next run of "
                     "their slot or `awty catchup` takes them once the lease ends")
    if found:
        who = ", ".join(f"{g.owner or 'no owner'} ({g.expired})" for g in stale[:SAMPLES])
        parts.append(f"{found} job(s) in flight with an expired lease (runner gone): {who}; the "
                     "next run of their slot or `awty catchup` takes them again")
    detail = "; ".join(parts)
    if not ctx.repair or not found:
        return Finding("leases", False, detail + (" (`awty doctor --repair` releases the "
                                                  "expired ones)" if found else ""))
    mended, errors = 0, []
    for g in stale:
        try:
            mended += ctx.store.release_stale(g.owner, ctx.now)
        except AwtyError as e:
            errors.append(str(e))
    detail += f"; set {mended} back to pending" + (f" (errors: {'; '.join(errors)})"
                                                   if errors else "")
    # held leases left to run out are no failed repair, but still a problem
    return Finding("leases", False, detail, False if errors else (None if waiting else True))


# --- resolution ----------------------------------------------------------------------------
def check_resolution(ctx: Ctx) -> Finding:
    res = ctx.a.settings.resolution
    off = [(s, n) for s, n in ctx.store.slots_with_work() if not is_boundary(s, res)]
    t = Tally()
    for slot, n in off:
        t.note(f"{slot_id(slot)} ({n})")
        t.found += n - 1  # count jobs, name slots
        if ctx.repair:
            _reslot(ctx, slot, res, t)
    return t.finding("resolution", f"every pending job is on a {res}-minute boundary",
                     f"job(s) not on a {res}-minute boundary (the resolution changed?), by slot",
                     ("re-slots them to the next boundary", "re-slotted"), ctx.repair)


def _reslot(ctx: Ctx, slot: datetime, res: int, t: Tally) -> None:
    a, target = ctx.a, slot_for(slot, res)
    for job_id in sorted(a.store.slot_ids(slot)):
        t.attempt(partial(_move, a, job_id, slot, target, ctx.now), True)
    a.tree.remove_slot_if_empty(slot)


def _move(a: Awty, job_id: str, old: datetime, new: datetime, now: datetime) -> None:
    job = a.store.reschedule(job_id, new, now)
    a.tree.write(job)
    a.tree.remove(job_id, old)


# --- past slots ----------------------------------------------------------------------------
def check_past_slots(ctx: Ctx) -> Finding:
    # "overdue" as the last-slot check reads it: a slot whose run may still be going is not
    due = overdue_until(ctx.now, ctx.a.settings.resolution)
    past = ctx.store.slots_with_work(until=due)
    if not past:
        return Finding("catch-up", True, f"no work left in slots up to {slot_id(due)}")
    jobs = sum(n for _, n in past)
    span = slot_id(past[0][0]) + (f" … {slot_id(past[-1][0])}" if len(past) > 1 else "")
    return Finding("catch-up", False, f"{jobs} job(s) in {len(past)} past slot(s) ({span}): "
                   "catch-up needed: run `awty catchup` (doctor does not fire jobs)")


# --- schedules -----------------------------------------------------------------------------
def check_schedules(ctx: Ctx) -> Finding:
    """A live schedule moves on only when its pending occurrence is claimed: one whose job is
    gone (cancelled by id) would never fire again. The repair makes that job (the missed
    policy applies at its claim, as after a resume)."""
    t = Tally()
    for name in ctx.store.unarmed_schedules():
        t.note(name)
        t.attempt(partial(ctx.store.resume_schedule, name, ctx.now), ctx.repair)
    return t.finding("schedules", "every live schedule has its pending occurrence",
                     "live schedule(s) without a pending occurrence (they would never fire "
                     "again)", ("makes it", "made"), ctx.repair)
