"""Writing a home's awty.toml: the commented template ``init`` creates, and the settings
``init`` keeps there (a database URL given by flag or environment), so that the next command
and cron's runs find them. Never through a planted link, never over the operator's own lines:
settings are added below them."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from . import config as config_mod
from .errors import InvalidInput
from .safeio import replace_in, write_new

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any


def conflicts(home: Path, values: Mapping[str, Any]) -> None:
    """Refuse (``InvalidInput``) settings that awty.toml already names otherwise: one home,
    one store. Read before anything is created."""
    data = config_mod.read_toml(home)
    for key, value in values.items():
        kept = config_mod.file_value(home, key, data)
        if key in data and kept != value:
            shown = config_mod.redact if key == "database_url" else str
            raise InvalidInput(
                f"{home / config_mod.CONFIG_NAME} names {key} = {shown(str(kept))}, not "
                f"{shown(str(value))}: edit the file, or leave out --{key.replace('_', '-')} "
                f"and AWTY_{key.upper()}")


def keep(home: Path, values: Mapping[str, Any]) -> str:
    """Write ``values`` into ``home/awty.toml``. A new file is the template with them set
    ("created"); an existing one gets the lines it lacks appended, rewritten whole under a
    temporary name ("added"). "kept": the file already names them all; "left": a file awty
    does not rewrite (a link to the operator's settings elsewhere, not a regular file)."""
    cfg = home / config_mod.CONFIG_NAME
    if write_new(cfg, config_mod.template(values).encode()):
        return "created"
    data = config_mod.read_toml(home)
    missing = [config_mod.toml_line(k, v) for k, v in values.items() if k not in data]
    if not missing:
        return "kept"
    try:
        if not stat.S_ISREG(os.lstat(cfg).st_mode):
            return "left"
        raw = cfg.read_bytes()
    except OSError:
        return "left"
    text = raw + (b"\n" if raw and not raw.endswith(b"\n") else b"") + (
        "# kept by `awty init`\n" + "\n".join(missing) + "\n").encode()
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        replace_in(fd, config_mod.CONFIG_NAME, text)
    finally:
        os.close(fd)
    return "added"
