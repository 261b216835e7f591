"""Section 1: ``awty add`` as a user runs it (a subprocess of the console script), its wall
time, and where its start-up time goes (``python -X importtime``)."""

from __future__ import annotations

import math
import os
import statistics
import sys
from typing import TYPE_CHECKING

from ..common import AWTY_SCRIPT, BASE, clean_env, run_proc

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    n = b.a.cli_calls
    rm = b.rep.row("add_median", f"awty add (CLI) median wall, {n} calls", "ms",
                      "≤ 60 ms", lambda v: v <= 60, "{:,.1f}")
    rp = b.rep.row("add_p90", f"awty add (CLI) p90 wall, {n} calls", "ms", fmt="{:,.1f}")
    rr = b.rep.row("add_pass", "awty add (CLI) / `python -c pass`, medians, calls alternated",
                   "×", "≤ 3.5×", lambda v: v <= 3.5, "{:.2f}")
    now = BASE
    home = b.homes.path("cli-add")
    b.awty_cli(["init", "--home", str(home)], now)
    args = ["add", b.url, "--in", "2h", "--payload", '{"order": 42}', "--entity", "order",
            "--key", "42", "--home", str(home)]
    for _ in range(2):  # warm the page cache and write the bytecode cache
        b.awty_cli(args, now)
    walls, rss, base = [], [], []
    for _ in range(n):
        p = b.awty_cli(args, now)
        walls.append(p.wall * 1000)
        rss.append(p.maxrss_kb)
        # the interpreter alone, each call beside an add: the ratio is of one moment
        base.append(run_proc([sys.executable, "-c", "pass"], clean_env(), b.workdir,
                             60).wall * 1000)
    rm.values = walls
    s = sorted(walls)
    p90 = s[max(0, math.ceil(0.9 * len(s)) - 1)]
    rp.values = [p90]
    rr.values = [statistics.median(walls) / statistics.median(base)]
    bare_import = []
    for _ in range(max(3, min(10, n))):
        p = run_proc([sys.executable, "-c", "import awty.cli"], clean_env(), b.workdir,
                     60)
        bare_import.append(p.wall * 1000)
    inherited = ""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        # What this environment gets (no .pyc written for awty: compiled on every call).
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
        env.update({k: v for k, v in b.cli_env(now).items() if k.startswith("AWTY_")})
        env.pop("PYTHONPYCACHEPREFIX", None)
        ws = [run_proc([str(AWTY_SCRIPT), *args], env, b.workdir, 60).wall * 1000
              for _ in range(max(3, min(10, n)))]
        inherited = (f" This shell exports PYTHONDONTWRITEBYTECODE=1; with it (no .pyc "
                     f"for awty's modules unless they already exist, so compiled from "
                     f"source on every call) the same add takes {statistics.median(ws):.1f} "
                     f"ms (median of {len(ws)}); the figures use a bytecode cache, as an "
                     f"installed package has.")
    b.rep.notes.append(
        f"`awty add`: a subprocess of the venv's `awty` console script on an existing home "
        f"(2 warm-up calls not counted; subprocesses keep their bytecode under the work "
        f"directory, PYTHONPYCACHEPREFIX).{inherited} For scale, `python -c pass` takes "
        f"{statistics.median(base):.1f} ms and `python -c 'import awty.cli'` "
        f"{statistics.median(bare_import):.1f} ms (medians); peak RSS of one add "
        f"{statistics.median(rss) / 1024:.1f} MiB.")
    # python -X importtime of one add
    p = b.awty_cli(args, now, python_flags=["-X", "importtime"])
    entries = []  # (name, depth, self ms, cumulative ms)
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3:
            continue
        try:
            self_us, cum_us = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        name = parts[2]
        depth = max(0, (len(name) - len(name.lstrip(" ")) - 1) // 2)
        entries.append((name.strip(), depth, self_us / 1000, cum_us / 1000))
    # importtime prints a module after the imports nested in it: a top-level line closes
    # the group of depth-1 lines just before it (its direct children).
    groups, kids = [], []
    for e in entries:
        if e[1] == 1:
            kids.append(e)
        elif e[1] == 0:
            groups.append((e, kids))
            kids = []
    b.rep.imports = []
    for (nm, _, sf, cum), children in sorted(groups, key=lambda g: -g[0][3])[:8]:
        b.rep.imports.append((nm, cum, sf))
        for cn, _, csf, ccum in sorted(children, key=lambda c: -c[3])[:4]:
            if ccum >= 2.0:
                b.rep.imports.append(("↳ " + cn, ccum, csf))
    total = sum(e[3] for e in entries if e[1] == 0)
    notable = ("typer", "click", "rich", "sqlite_utils", "requests", "filelock", "dateutil",
               "httptools", "uvloop", "pluggy", "tomllib", "asyncio", "json", "sqlite3",
               "urllib.request", "email", "ssl", "hashlib", "awty.api", "awty.cli")
    seen = {}
    for nm, _, _, cum in entries:
        if nm in notable and nm not in seen:
            seen[nm] = cum
    b.rep.notable = sorted(seen.items(), key=lambda x: -x[1])
    b.rep.details.append(
        f"`awty add` walls (ms): {', '.join(f'{w:.0f}' for w in walls)}; "
        f"imports under -X importtime total {total:.1f} ms (sum of top-level cumulative "
        f"figures; importtime itself inflates them).")
