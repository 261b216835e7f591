"""The benchmark must not rot: run ``scripts/bench --quick`` end to end (small sizes, one run
each) and check that it prints its table and writes a report holding every row.

Nothing here asserts a speed: SPEC 11's figures are measured by the full bench
(``./scripts/bench``, written to BENCHMARKS.md), never by a timed test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench"

# One stable prefix per row of the table (sizes follow them and differ in quick mode).
ROWS = [
    "receiver ceiling",
    "awty add (CLI) median wall",
    "awty add (CLI) p90 wall",
    "awty add (CLI) / `python -c pass`",
    "add_many (library)",
    "add --batch FILE (CLI)",
    "bare SQLite executemany of the same",
    "add_many / bare executemany",
    "add --batch (CLI) / bare executemany",
    "run-slot end to end (library)",
    "bare asyncio+httptools reference",
    "requests.Session pool reference",
    "run-slot (library), per-host cap raised to",
    "run-slot, then until its retired slot",
    "run-slot / bare reference",
    "run-slot / requests reference",
    "run-slot (CLI) due → first callback",
    "run-slot (CLI) due → last callback",
    "run-slot (CLI) end to end",
    "bare asyncio+httptools, ",
    "run-slot (CLI) / bare",
    "flatness: ",
    "flatness ratio (pending / none), whole run_slot",
    "flatness due → last callback",
    "flatness ratio (pending / none), due → last",
    "cancel --entity order --key K at",
    "catch-up ",
    "one slot of",
    "catch-up ratio",
    "run-slot (CLI) peak RSS",
    "run-slot (CLI) throughput",
    # the pg section: skipped (not failed) where no PostgreSQL server answers
    "PostgreSQL: add_many (library)",
    "SQLite, same run: add_many",
    "PostgreSQL: one awty add (CLI)",
    "SQLite, same run: one awty add (CLI)",
    "PostgreSQL / SQLite, one awty add (CLI)",
    "PostgreSQL: run-slot end to end (library)",
    "SQLite, same run: run-slot end to end",
    "PostgreSQL / SQLite, run-slot",
    "PostgreSQL: 1 run-slot process (CLI)",
    "PostgreSQL: 2 run-slot processes on one slot (CLI)",
    "PostgreSQL: 2 processes / 1",
    "PostgreSQL flatness ratio (pending / none), whole run_slot",
    "PostgreSQL flatness ratio (pending / none), due → last",
    # the serve section (its PostgreSQL rows: skipped where no server answers)
    "SQLite: POST /v1/jobs, one serve process",
    "SQLite: POST /v1/jobs p99",
    "SQLite: POST /v1/jobs/batch",
    "PostgreSQL: POST /v1/jobs, one serve process",
    "PostgreSQL: POST /v1/jobs p99",
    "PostgreSQL: POST /v1/jobs/batch",
]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bench targets Linux")
def test_bench_quick_runs_and_reports(tmp_path):
    out = tmp_path / "BENCH.md"
    # figures of an earlier `--peers` run and the hand-kept history: the default run keeps both
    out.write_text("old\n<!-- peers:start -->\n## awty beside the alternatives\nkept\n"
                   "<!-- peers:end -->\n<!-- history:start -->\n## Performance history\n"
                   "by hand\n<!-- history:end -->\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env["COLUMNS"] = "200"  # the table's rows stay on one line each
    try:
        proc = subprocess.run(
            [str(BENCH), "--quick", "--output", str(out), "--workdir", str(tmp_path / "work")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:  # pragma: no cover - shows where it stalled
        pytest.fail(f"scripts/bench --quick did not finish in 900 s; stderr so far:\n"
                    f"{(e.stderr or b'')[-4000:]!r}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "awty benchmarks (SPEC 11)" in proc.stdout
    assert out.exists(), proc.stderr[-2000:]
    report = out.read_text()
    for row in ROWS:
        assert row in proc.stdout, f"table row {row!r} missing from stdout"
        assert f"| {row}" in report, f"row {row!r} missing from {out.name}"
    assert "## awty beside the alternatives\nkept\n" in report
    assert "## Performance history\nby hand\n" in report
    assert "old" not in report.splitlines()
    assert "## Machine" in report and "sqlite" in report and "uvloop" in report
    assert "scripts/bench --quick" in report
    assert "error" not in [line.rsplit("|", 2)[-2].strip() for line in report.splitlines()
                           if line.startswith("| ") and line.count("|") == 8]
    # everything it started has stopped: no work directory left behind
    assert not any((tmp_path / "work").glob("run-*"))


def test_a_kept_block_is_replaced_in_place_and_carried(tmp_path):
    from bench import kept

    out = tmp_path / "BENCH.md"
    kept.write(out, "peers", "<!-- peers:start -->\nfirst\n<!-- peers:end -->")
    out.write_text(out.read_text() + "tail\n")
    kept.write(out, "peers", "<!-- peers:start -->\nsecond\n<!-- peers:end -->")
    text = out.read_text()
    assert "first" not in text and text.index("second") < text.index("tail")
    assert kept.carry(out, "peers") == "<!-- peers:start -->\nsecond\n<!-- peers:end -->"
    assert kept.carry(out, "history") is None


def test_a_missed_row_is_named_by_its_key_and_the_why_block_is_carried(tmp_path):
    """A run names each missed row with its key; why it is missed is the hand-kept ``why``
    block, carried over from the report it rewrites (no prose in the bench's code)."""
    from types import SimpleNamespace

    from bench.report import Report, write_markdown

    out = tmp_path / "BENCH.md"
    why = "<!-- why:start -->\n## Why a target is missed\n- `ratio`: by hand\n<!-- why:end -->"
    out.write_text(f"old\n{why}\n")
    rep = Report(SimpleNamespace(quick=True))
    rep.command = "scripts/bench --quick"
    rep.row("ratio", "a ratio", "×", "≥ 2×", lambda v: v >= 2).values.append(1.0)
    rep.missed = [("ratio", "a ratio")]
    write_markdown(rep, out, "awty benchmarks")
    text = out.read_text()
    assert "## Targets not met\n" in text and "- **a ratio** (`ratio`)" in text
    assert why in text and text.index("(`ratio`)") < text.index(why)
    assert "old" not in text.splitlines()
