"""Blocks of BENCHMARKS.md that a run keeps: each lies between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->`` and is carried over verbatim when the default run rewrites the report.
``peers`` is written by ``--peers`` (so either run leaves the other's figures in place);
``history`` is kept by hand: the run-by-run performance log, what was tried and what moved each
figure (README keeps only the current figures); so is ``why``: the latest explanation of each
row that may miss its target, by the row's key, which a run names for each row it missed."""

from __future__ import annotations

from pathlib import Path

KEPT = ("why", "peers", "history")


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def find(text: str, name: str) -> str | None:
    start, end = markers(name)
    i, j = text.find(start), text.find(end)
    return text[i:j + len(end)] if 0 <= i < j else None


def carry(path: Path, name: str) -> str | None:
    """The block ``name`` of an existing report, if it has one."""
    try:
        return find(path.read_text(), name)
    except OSError:
        return None


def write(path: Path, name: str, block: str) -> None:
    """Put ``block`` in place of the report's block ``name`` (or at its end; a new report if
    there is none)."""
    try:
        text = path.read_text()
    except OSError:
        text = "# awty benchmarks\n"
    old = find(text, name)
    if old is not None:
        text = text.replace(old, block, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
