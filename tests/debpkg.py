"""Debian packages a test needs from the machine (Chromium for the console's browser tests,
PgBouncer for the pooler tests), installed once when missing: as root, quietly, the way
tests/pgserver.py finds or starts a PostgreSQL server. Where they cannot be installed the caller
skips (or, under CI=true, fails), saying why."""

from __future__ import annotations

import os
import shutil
import subprocess

INSTALL_TIMEOUT = 900  # a first Chromium install downloads ~100 MB


class NotInstalled(Exception):
    """The packages are missing and could not be installed."""


def install(*packages: str) -> None:
    names = " ".join(packages)
    if os.geteuid() != 0:
        raise NotInstalled(f"not root, so `apt-get install -y {names}` cannot run here")
    if not shutil.which("apt-get"):
        raise NotInstalled(f"no apt-get on this system: install {names}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    error = ""
    for cmd in (install, ["apt-get", "update", "-q"], install):  # the index may be stale
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                 timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise NotInstalled(f"{' '.join(cmd)} took over {INSTALL_TIMEOUT} s") from None
        if out.returncode == 0 and cmd[1] == "install":
            return
        last = (out.stderr or out.stdout).strip().splitlines()
        error = last[-1] if last else f"exit {out.returncode}"
    raise NotInstalled(f"apt-get install {names} failed: {error}")
