"""Checks of the home itself: the directory (0700), the database file (0600), the
configuration and the signing secret."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .. import config as config_mod
from ..errors import AwtyError, InvalidInput
from .base import Ctx, Finding, tree_of


def check_home_and_db(ctx: Ctx) -> bool:
    """Home and database file; True when there is a database to look into."""
    a = ctx.a
    ctx.add(check_home(a.home, ctx.repair, a.init))
    if not a.home.is_dir():
        return False
    if not a.db_path.exists():
        slots = tree_of(a).slots()
        detail = "no database yet (the first `awty add` creates it)"
        if slots:
            detail = (f"no database, but the slot tree holds {len(slots)} slot(s): their "
                      "envelopes are imported when the slots run (`awty catchup`)")
        ctx.add(Finding("database", not slots, detail))
        return False
    ctx.add(check_mode(a.db_path, 0o600, "database", ctx.repair, db_files(a.db_path)))
    return True


def check_home(home: Path, repair: bool, init: Callable[[], list[str]] | None) -> Finding:
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
    finding = check_mode(home, 0o700, "home", repair, [home])
    owner = home.stat().st_uid
    if owner != os.getuid():
        finding = Finding("home", False, f"{finding.detail}; owned by uid {owner}, not you "
                          f"(uid {os.getuid()}): fix with chown", finding.repaired)
    return finding


def check_mode(path: Path, want: int, check: str, repair: bool, paths: list[Path]) -> Finding:
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


def db_files(db: Path) -> list[Path]:
    """The database and its WAL companions, which SQLite creates with the database's mode."""
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


def check_config(home: Path, env: dict[str, str]) -> Finding:
    try:
        s = config_mod.load(home, env)
    except InvalidInput as e:
        return Finding("config", False, str(e))
    source = home / config_mod.CONFIG_NAME
    where = str(source) if source.exists() else "defaults (no awty.toml)"
    return Finding("config", True, f"{where}: resolution {s.resolution} min")


def check_secret(ctx: Ctx) -> Finding:
    """The signing secret is loaded (never shown) to prove it parses and is private."""
    from ..signing import ENV_VAR, load_secrets

    path = ctx.a.settings.signing_secret_file
    if not ctx.env.get(ENV_VAR) and not path:
        # a receiver cannot tell awty's callbacks from anyone's
        return Finding("secret", True, "none configured: callbacks go unsigned (`awty init` "
                       "writes one to <home>/signing.secret)", warning=True)
    try:
        keys = load_secrets(ctx.a.settings, ctx.env)
    except InvalidInput as e:
        full = Path(os.path.expanduser(path)) if path else None
        if ctx.env.get(ENV_VAR) or full is None or "readable by group" not in str(e):
            return Finding("secret", False, str(e))
        return check_mode(full, 0o600, "secret", ctx.repair, [full])
    source = ENV_VAR if ctx.env.get(ENV_VAR) else path
    several = f" ({len(keys)} secrets: each callback signed with every one)" \
        if len(keys) > 1 else ""
    return Finding("secret", True, f"loaded from {source}{several}")
