"""Headless Chromium for the console's browser tests: Debian's ``chromium`` and
``chromium-driver``, installed once per session when missing (as root, quietly, the way
tests/pgserver.py finds or starts a PostgreSQL server). Only where they cannot be installed do
the tests skip, saying why."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGES = ("chromium", "chromium-driver")


class NoBrowser(Exception):
    """Chromium or its driver is missing and could not be installed."""


def _found() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _install() -> None:
    import debpkg

    try:
        debpkg.install(*PACKAGES)
    except debpkg.NotInstalled as e:
        raise NoBrowser(str(e)) from None


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
