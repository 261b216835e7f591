"""Headless Chromium for the console's browser tests: Debian's ``chromium`` and
``chromium-driver``, installed once per session when missing (as root, quietly, the way
tests/pgserver.py finds or starts a PostgreSQL server). Only where they cannot be installed do
the tests skip, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

PACKAGES = ("chromium", "chromium-driver")
INSTALL_TIMEOUT = 900  # a first install downloads ~100 MB


class NoBrowser(Exception):
    """Chromium or its driver is missing and could not be installed."""


def _found() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _install() -> None:
    if os.geteuid() != 0:
        raise NoBrowser("not root, so `apt-get install -y chromium chromium-driver` cannot run "
                        "here: install them to run the console's browser tests")
    if not shutil.which("apt-get"):
        raise NoBrowser("no apt-get on this system: install Chromium and chromedriver")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
                ["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                 timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise NoBrowser(f"{' '.join(cmd)} took over {INSTALL_TIMEOUT} s") from None
        if out.returncode == 0 and cmd[1] == "install":
            return
        last = (out.stderr or out.stdout).strip().splitlines()
        error = last[-1] if last else f"exit {out.returncode}"
    raise NoBrowser(f"apt-get install {' '.join(PACKAGES)} failed: {error}")


def ensure() -> tuple[str, str]:
    """(chromium, chromedriver) paths, installing the packages when they are missing."""
    found = _found()
    if found is None:
        _install()
        found = _found()
    if found is None:
        raise NoBrowser("chromium and chromedriver are still not on PATH after the install")
    return found


def artifacts_dir() -> Path:
    """Where the browser tests leave their screenshots (gitignored), or $TEST_ARTIFACTS."""
    d = Path(os.environ.get("TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] /
             "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d
