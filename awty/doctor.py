"""``awty doctor``: check a home and, with ``repair``, mend what can be mended (SPEC 7).

Checks, in order: home (exists, 0700), database file (0600), configuration, signing secret,
schema version, ``PRAGMA integrity_check``, stale leases, rows off the current resolution's
boundaries, slot tree <-> ``future_job`` agreement (missing envelopes, orphans, envelopes in the
wrong slot, leftover temp files, drop-ins awaiting import), work left in past slots, and whether
cron (or a systemd user timer) runs ``awty run-slot`` for this home.

Without ``repair`` nothing is written: the database is opened without the chmod and migration
that every other command does on first use. Memory stays bounded however many jobs are
pending: counts come from aggregates, and the tree is compared with the store one slot at a
time. Every repair is named in its finding (with a few example ids) and logged to awty.log.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import config as config_mod
from .api import Awty
from .errors import AwtyError, InvalidInput
from .slots import current_slot, is_boundary, slot_for, slot_id
from .store import migrations

TEMP_FILE_AGE = 60.0  # seconds: a younger .tmp may be a write in progress
RETIRED_AGE = 600.0  # seconds: a background rm of a slot directory takes well under this
_SAMPLES = 5
_CHUNK = 500


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    repaired: bool | None = None  # None: not attempted; True: mended; False: repair failed

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return {True: "repaired", False: "repair failed", None: "problem"}[self.repaired]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    repair: bool = False

    @property
    def ok(self) -> bool:
        """True when every check passed or was repaired."""
        return all(f.ok or f.repaired for f in self.findings)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok and not f.repaired]

    @property
    def repairs(self) -> list[Finding]:
        return [f for f in self.findings if f.repaired]

    def get(self, check: str) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "repair": self.repair,
                "findings": [f.to_dict() for f in self.findings]}


@dataclass
class _Tally:
    """One kind of inconsistency across many items: a count, a few examples, repair results."""

    found: int = 0
    mended: int = 0
    samples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def note(self, item: str) -> None:
        self.found += 1
        if len(self.samples) < _SAMPLES:
            self.samples.append(item)

    def attempt(self, action: Callable[[], object], repair: bool) -> None:
        if not repair:
            return
        try:
            action()
            self.mended += 1
        except (OSError, AwtyError) as e:
            if len(self.errors) < _SAMPLES:
                self.errors.append(str(e))

    def finding(self, check: str, fine: str, problem: str,
                action: tuple[str, str] | None, repair: bool) -> Finding:
        """``action``: what a repair does and did, e.g. ("writes them", "wrote")."""
        if not self.found:
            return Finding(check, True, fine)
        more = f" … and {self.found - len(self.samples)} more" if self.found > len(
            self.samples) else ""
        detail = f"{self.found} {problem}: {', '.join(self.samples)}{more}"
        if action is None:
            return Finding(check, False, detail)
        if not repair:
            return Finding(check, False, f"{detail} (`awty doctor --repair` {action[0]})")
        detail += f"; {action[1]} {self.mended} of {self.found}"
        if self.errors:
            detail += " (errors: " + "; ".join(self.errors) + ")"
        return Finding(check, False, detail, self.mended == self.found and not self.errors)


@dataclass
class _Ctx:
    a: Awty
    repair: bool
    now: datetime
    env: dict[str, str]
    which: Callable[[str], str | None]
    run: Callable[..., subprocess.CompletedProcess]
    report: Report

    def add(self, f: Finding | Iterable[Finding]) -> None:
        for one in [f] if isinstance(f, Finding) else f:
            self.report.findings.append(one)
            if one.repaired:
                self.a.logger().warning(f"doctor repaired {one.check}: {one.detail}")


# --- entry points --------------------------------------------------------------------------
def diagnose(a: Awty, *, repair: bool = False, env: dict[str, str] | None = None,
             which: Callable[[str], str | None] = shutil.which,
             run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Report:
    """Check ``a``'s home; with ``repair``, mend what can be mended. Never raises for what it
    finds: every problem is a ``Finding``."""
    ctx = _Ctx(a, repair, a.clock.now(), dict(a.env if env is None else env), which, run,
               Report(repair=repair))
    ready = _check_home_and_db(ctx)
    ctx.add(_check_config(a.home, ctx.env))
    ctx.add(_check_secret(ctx))
    if ready and _check_schema_and_integrity(ctx):
        _check_store(ctx)
    ctx.add(check_cron(a.home, a.settings.resolution, env=ctx.env, which=which, run=run))
    return ctx.report


def diagnose_home(home: str | Path | None = None, *, repair: bool = False,
                  env: dict[str, str] | None = None, clock=None,
                  which: Callable[[str], str | None] = shutil.which,
                  run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Report:
    """``diagnose`` for a home given by path, still reporting when its configuration is so
    broken that ``Awty`` cannot be built (then only the checks that need no settings run)."""
    env = dict(os.environ if env is None else env)
    try:
        a = Awty(home, clock=clock, env=env)
    except InvalidInput as e:
        return _without_settings(home, e, repair=repair, env=env, which=which, run=run)
    with a:
        return diagnose(a, repair=repair, env=env, which=which, run=run)


def _without_settings(home, error: InvalidInput, *, repair, env, which, run) -> Report:
    home = Path(home).expanduser() if home else config_mod.default_home(env)
    report = Report(repair=repair)
    report.findings.append(_check_home(home, repair, None))
    db = home / "awty.db"
    if db.exists():
        report.findings.append(_check_mode(db, 0o600, "database", repair, _db_files(db)))
    report.findings.append(Finding("config", False, str(error)))
    report.findings.append(Finding("other checks", False, "skipped until the configuration "
                                   "is valid (the resolution decides what a slot is)"))
    report.findings.append(check_cron(home, None, env=env, which=which, run=run))
    return report


# --- home, files, configuration ------------------------------------------------------------
def _check_home_and_db(ctx: _Ctx) -> bool:
    """Home and database file; True when there is a database to look into."""
    a = ctx.a
    ctx.add(_check_home(a.home, ctx.repair, a.init))
    if not a.home.is_dir():
        return False
    if not a.db_path.exists():
        slots = a.tree.slots()
        detail = "no database yet (the first `awty add` creates it)"
        if slots:
            detail = (f"no database, but the slot tree holds {len(slots)} slot(s): their "
                      "envelopes are imported when the slots run (`awty catchup`)")
        ctx.add(Finding("database", not slots, detail))
        return False
    ctx.add(_check_mode(a.db_path, 0o600, "database", ctx.repair, _db_files(a.db_path)))
    return True


def _check_home(home: Path, repair: bool, init: Callable[[], list[str]] | None) -> Finding:
    if not home.exists():
        if not repair or init is None:
            return Finding("home", False, f"{home} does not exist: run `awty init`")
        try:
            made = init()
        except (OSError, AwtyError) as e:
            return Finding("home", False, f"{home} does not exist and could not be created: "
                           f"{e}", False)
        return Finding("home", False, f"{home} did not exist; ran `awty init`: created "
                       f"{', '.join(made)}", True)
    if not home.is_dir():
        return Finding("home", False, f"{home} is not a directory")
    finding = _check_mode(home, 0o700, "home", repair, [home])
    owner = home.stat().st_uid
    if owner != os.getuid():
        finding = Finding("home", False, f"{finding.detail}; owned by uid {owner}, not you "
                          f"(uid {os.getuid()}): fix with chown", finding.repaired)
    return finding


def _check_mode(path: Path, want: int, check: str, repair: bool, paths: list[Path]) -> Finding:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode == want:
        return Finding(check, True, f"{path} ({want:04o})")
    detail = f"{path} is {mode:04o}, should be {want:04o}"
    if not repair:
        return Finding(check, False, f"{detail} (`awty doctor --repair` runs chmod)")
    try:
        for p in paths:
            os.chmod(p, want)
    except OSError as e:
        return Finding(check, False, f"{detail}; chmod failed: {e.strerror}", False)
    return Finding(check, False, f"{detail}; chmod {want:04o} {' '.join(map(str, paths))}",
                   True)


def _db_files(db: Path) -> list[Path]:
    """The database and its WAL companions, which SQLite creates with the database's mode."""
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


def _check_config(home: Path, env: dict[str, str]) -> Finding:
    try:
        s = config_mod.load(home, env)
    except InvalidInput as e:
        return Finding("config", False, str(e))
    source = home / config_mod.CONFIG_NAME
    where = str(source) if source.exists() else "defaults (no awty.toml)"
    return Finding("config", True, f"{where}: resolution {s.resolution} min")


def _check_secret(ctx: _Ctx) -> Finding:
    """The signing secret is loaded (never shown) to prove it parses and is private."""
    from .signing import ENV_VAR, load_secret

    path = ctx.a.settings.signing_secret_file
    if not ctx.env.get(ENV_VAR) and not path:
        return Finding("secret", True, "none configured: callbacks go unsigned")
    try:
        load_secret(ctx.a.settings, ctx.env)
    except InvalidInput as e:
        full = Path(os.path.expanduser(path)) if path else None
        if ctx.env.get(ENV_VAR) or full is None or "readable by group" not in str(e):
            return Finding("secret", False, str(e))
        return _check_mode(full, 0o600, "secret", ctx.repair, [full])
    source = ENV_VAR if ctx.env.get(ENV_VAR) else path
    return Finding("secret", True, f"loaded from {source}")


# --- the database --------------------------------------------------------------------------
def _check_schema_and_integrity(ctx: _Ctx) -> bool:
    """Read both through a plain connection, before the store would migrate anything.
    True when the store may be opened for the remaining checks."""
    version, problems, error = _inspect(ctx.a.db_path)
    if error is not None:
        ctx.add(Finding("schema", False, f"cannot read {ctx.a.db_path}: {error}"))
        return False
    want = migrations.SCHEMA_VERSION
    if version > want:
        ctx.add(Finding("schema", False, f"version {version} is newer than this awty "
                        f"understands ({want}): upgrade awty"))
        return False
    if version < want and not ctx.repair:
        ctx.add(Finding("schema", False, f"version {version}, this awty needs {want}: the next "
                        "awty command migrates it (or `awty doctor --repair`); other database "
                        "checks skipped"))
        _check_integrity(ctx, problems)
        return False
    if version == want:
        ctx.add(Finding("schema", True, f"version {version}"))
    elif problems != ["ok"]:
        ctx.add(Finding("schema", False, f"version {version}, not migrated to {want}: the "
                        "database is damaged", False))
    else:
        try:
            _ = ctx.a.store  # opening migrates
        except AwtyError as e:
            ctx.add(Finding("schema", False, f"version {version}: migration failed: {e}", False))
            return False
        ctx.add(Finding("schema", False, f"version {version}; migrated to {want}", True))
    return _check_integrity(ctx, problems) or version == want


def _check_integrity(ctx: _Ctx, problems: list[str]) -> bool:
    if problems == ["ok"]:
        ctx.add(Finding("integrity", True, "PRAGMA integrity_check: ok"))
        return True
    ctx.add(Finding("integrity", False, "PRAGMA integrity_check: " + "; ".join(problems[:5])
                    + " — restore a backup or rebuild with `sqlite3 awty.db .recover`; "
                    "doctor repairs nothing else in a damaged database"))
    ctx.repair = False
    return False


def _inspect(db: Path) -> tuple[int, list[str], str | None]:
    """Schema version and integrity, read before anything would migrate."""
    from .api import open_store

    try:
        store = open_store(db, 5.0, create=False, migrate=False)
    except AwtyError as e:
        return 0, [], str(e)
    try:
        health = store.check()
        return health.schema_version, list(health.problems) or ["ok"], None
    finally:
        store.close()


def _open_store(a: Awty, repair: bool):
    """The store, opened without chmod-ing or creating anything unless repairing."""
    if repair or a._store is not None:
        return a.store
    from .api import open_store

    a._store = open_store(a.db_path, a.settings.busy_timeout, create=False)
    return a._store


def _check_store(ctx: _Ctx) -> None:
    try:
        _open_store(ctx.a, ctx.repair)
        ctx.add(_check_leases(ctx))
        ctx.add(_check_resolution(ctx))
        ctx.add(_check_tree(ctx))
        ctx.add(_check_retired(ctx))
        ctx.add(_check_past_slots(ctx))
    except (AwtyError, OSError) as e:
        ctx.add(Finding("store", False, f"remaining checks stopped: {e}"))


# --- leases --------------------------------------------------------------------------------
def _check_leases(ctx: _Ctx) -> Finding:
    groups = ctx.a.store.leases(ctx.now)
    stale = [g for g in groups if g.expired and g.alive is not True]
    live = sum(g.jobs for g in groups) - sum(g.expired for g in stale)
    found = sum(g.expired for g in stale)
    if not found:
        return Finding("leases", True, f"no stale leases ({live} job(s) in flight now)")
    who = ", ".join(f"{g.owner or 'no owner'} ({g.expired})" for g in stale[:_SAMPLES])
    detail = (f"{found} job(s) in flight with an expired lease (runner gone): {who}; the next "
              "run of their slot or `awty catchup` takes them again")
    if not ctx.repair:
        return Finding("leases", False, detail + " (`awty doctor --repair` releases them)")
    mended, errors = 0, []
    for g in stale:
        try:
            mended += ctx.a.store.release_stale(g.owner, ctx.now)
        except AwtyError as e:
            errors.append(str(e))
    detail += f"; set {mended} back to pending" + (f" (errors: {'; '.join(errors)})"
                                                   if errors else "")
    return Finding("leases", False, detail, not errors)


# --- resolution ----------------------------------------------------------------------------
def _check_resolution(ctx: _Ctx) -> Finding:
    res = ctx.a.settings.resolution
    off = [(s, n) for s, n in ctx.a.store.slots_with_work() if not is_boundary(s, res)]
    t = _Tally()
    for slot, n in off:
        t.note(f"{slot_id(slot)} ({n})")
        t.found += n - 1  # count jobs, name slots
        if ctx.repair:
            _reslot(ctx, slot, res, t)
    return t.finding("resolution", f"every pending job is on a {res}-minute boundary",
                     f"job(s) not on a {res}-minute boundary (the resolution changed?), by slot",
                     ("re-slots them to the next boundary", "re-slotted"), ctx.repair)


def _reslot(ctx: _Ctx, slot: datetime, res: int, t: _Tally) -> None:
    a, target = ctx.a, slot_for(slot, res)
    for job_id in sorted(a.store.slot_ids(slot)):
        t.attempt(lambda job_id=job_id: _move(a, job_id, slot, target, ctx.now), True)
    a.tree.remove_slot_if_empty(slot)


def _move(a: Awty, job_id: str, old: datetime, new: datetime, now: datetime) -> None:
    job = a.store.reschedule(job_id, new, now)
    a.tree.write(job)
    a.tree.remove(job_id, old)


# --- slot tree <-> future_job --------------------------------------------------------------
@dataclass
class _TreeTally:
    missing: _Tally = field(default_factory=_Tally)
    orphans: _Tally = field(default_factory=_Tally)
    strays: _Tally = field(default_factory=_Tally)
    temps: _Tally = field(default_factory=_Tally)
    drop_ins: _Tally = field(default_factory=_Tally)
    past_drop_ins: int = 0
    current: datetime | None = None


def _check_tree(ctx: _Ctx) -> list[Finding]:
    a = ctx.a
    t = _TreeTally(current=current_slot(ctx.now, a.settings.resolution))
    in_db = {s for s, _ in a.store.slots_with_work()}
    for slot in sorted(in_db | set(a.tree.slots())):
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
    return [
        t.missing.finding("envelopes", "every pending job has its envelope",
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


def _check_retired(ctx: _Ctx) -> list[Finding]:
    """Finished slot directories are renamed into ``.retired/`` and deleted by a background
    ``rm``: one still there after RETIRED_AGE seconds was not deleted (the ``rm`` was killed),
    and one without ``.purge`` is a retirement cut short, whose files go back to their slot."""
    stale, cut = _Tally(), _Tally()
    for path in ctx.a.tree.retired_dirs():
        if path.name.endswith(".purge"):
            try:
                age = ctx.now.timestamp() - path.lstat().st_mtime
            except FileNotFoundError:
                continue  # deleted while we looked
            if age > RETIRED_AGE:
                stale.note(path.name)
                stale.attempt(lambda path=path: shutil.rmtree(path), ctx.repair)
        else:
            cut.note(path.name)
            cut.attempt(lambda path=path: ctx.a.tree.restore_retired(path), ctx.repair)
    out = [stale.finding("retired slots", "no finished slot directory left undeleted",
                         f"finished slot director(y/ies) not deleted after {RETIRED_AGE:.0f}s",
                         ("deletes them", "deleted"), ctx.repair)]
    if cut.found:
        out.append(cut.finding("cut-short retirements", "",
                               "retired slot director(y/ies) never checked for late files",
                               ("puts their files back in their slots", "put back"),
                               ctx.repair))
    return out


def _check_slot(ctx: _Ctx, slot: datetime, in_db: bool, t: _TreeTally) -> None:
    a, sid = ctx.a, slot_id(slot)
    here = a.store.slot_ids(slot) if in_db else set()
    entries = list(a.tree.entries(slot))
    names = {e.job_id for e in entries if e.job_id}
    for job_id in sorted(here - names):
        t.missing.note(f"{sid}/{job_id}")
        t.missing.attempt(lambda job_id=job_id: _write_envelope(a, job_id, slot), ctx.repair)
    strangers = [e for e in entries if e.job_id not in here]
    known = a.store.find(e.job_id for e in strangers if e.job_id) if strangers else {}
    for e in strangers:
        if e.job_id in known and known[e.job_id] is None:
            t.orphans.note(f"{sid}/{e.name}")
            t.orphans.attempt(lambda e=e: a.tree.remove_entry(e), ctx.repair)
        elif e.job_id in known:
            right = known[e.job_id]
            t.strays.note(f"{sid}/{e.name} (belongs in {slot_id(right)})")
            t.strays.attempt(lambda e=e, right=right: _move_stray(a, e, right), ctx.repair)
        else:
            t.drop_ins.note(f"{sid}/{e.name}")
            t.past_drop_ins += slot < t.current
    for path in a.tree.temp_files(slot):
        if _age(path) > TEMP_FILE_AGE:
            t.temps.note(f"{sid}/{path.name}")
            t.temps.attempt(lambda path=path: _unlink(path), ctx.repair)
    if ctx.repair:
        a.tree.remove_slot_if_empty(slot)


def _write_envelope(a: Awty, job_id: str, slot: datetime) -> None:
    job = a.store.get(job_id)
    if job is not None and job.next_check_at == slot:  # it may have run meanwhile
        a.tree.write(job)


def _move_stray(a: Awty, entry, right: datetime) -> None:
    a.tree.remove_entry(entry)
    if not (a.tree.slot_path(right) / entry.name).exists():
        _write_envelope(a, entry.job_id, right)


def _age(path: Path) -> float:
    try:
        # File times are the file system's real time, so compare with real time, not the clock.
        return time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# --- past slots ----------------------------------------------------------------------------
def _check_past_slots(ctx: _Ctx) -> Finding:
    current = current_slot(ctx.now, ctx.a.settings.resolution)
    past = ctx.a.store.slots_with_work(until=current - timedelta(minutes=1))
    if not past:
        return Finding("catch-up", True, f"no work left in slots before {slot_id(current)}")
    jobs = sum(n for _, n in past)
    span = slot_id(past[0][0]) + (f" … {slot_id(past[-1][0])}" if len(past) > 1 else "")
    return Finding("catch-up", False, f"{jobs} job(s) in {len(past)} past slot(s) ({span}): "
                   "catch-up needed: run `awty catchup` (doctor does not fire jobs)")


# --- cron ----------------------------------------------------------------------------------
def check_cron(home: Path, resolution: int | None, *, env: dict[str, str] | None = None,
               which: Callable[[str], str | None] = shutil.which,
               run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Finding:
    """Does cron (``crontab -l``) or a systemd user timer run ``awty run-slot`` for ``home``,
    at every boundary of ``resolution``?"""
    from . import crontab as cron

    env = os.environ if env is None else env
    lines, why = _crontab_lines(which, run)
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    cron_default = user_home / ".local" / "share" / "awty"
    ours = [ln for ln in lines if cron.runs_slots(ln, home, default_home=cron_default)]
    hint = "install the lines with `awty crontab --install`"
    if ours:
        missed = cron.missed_boundaries(ours[0], resolution) if resolution else []
        if missed:
            return Finding("cron", False, f"crontab runs `awty run-slot` but not at every "
                           f"{resolution}-minute boundary (misses minute(s) "
                           f"{','.join(map(str, missed))}): {ours[0].strip()} — {hint}")
        return Finding("cron", True, f"crontab: {ours[0].strip()}")
    timers = _systemd_timers(env, user_home)
    if timers:
        return timers
    if why and which("crontab") is None:
        hint = "install cron and run `awty crontab --install`"
    return Finding("cron", False, f"{why or 'no crontab line runs `awty run-slot` for this home'}"
                   f": {hint}, or use the systemd user timers in scripts/systemd")


def _crontab_lines(which, run) -> tuple[list[str], str | None]:
    from . import crontab as cron

    if which("crontab") is None:
        return [], "no `crontab` command on PATH"
    try:
        return cron.read(run).splitlines(), None
    except AwtyError as e:
        return [], str(e)


def _systemd_timers(env: dict[str, str] | Any, user_home: Path) -> Finding | None:
    base = Path(env.get("XDG_CONFIG_HOME") or user_home / ".config") / "systemd" / "user"
    timers = sorted(base.glob("awty-*.timer"))
    if not timers:
        return None
    names = [p.name for p in timers]
    enabled = [n for n in names if (base / "timers.target.wants" / n).exists()]
    if not enabled:
        return Finding("cron", False, f"systemd user timer(s) {', '.join(names)} in {base} are "
                       f"not enabled: systemctl --user enable --now {' '.join(names)}")
    return Finding("cron", True, f"systemd user timer(s): {', '.join(enabled)}")
