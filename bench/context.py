"""What every section works with: the options, the report, the receiver, the work directory
and its homes, and running the ``awty`` console script as a measured subprocess."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import AWTY_SCRIPT, PATH, SECRET_TEXT, Proc, clean_env, iso, run_proc, slot_at
from .disk import remove_home
from .homes import Homes
from .profiling import profiled

if TYPE_CHECKING:
    from .receivers import Receiver
    from .report import Report


class Bench:
    def __init__(self, args, rep: Report, rx: Receiver, workdir: Path):
        self.a = args
        self.rep = rep
        self.rx = rx
        self.workdir = workdir
        self.url = f"http://127.0.0.1:{rx.port}{PATH}"
        self.homes = Homes(workdir, self.url)
        self.failed = False
        self._stamps = None

    @property
    def stamps(self):
        """The timing receiver (bench/stamps.py), started on first use: where the figures
        taken from the receiver's clock send their callbacks."""
        if self._stamps is None:
            from .stamps import StampReceiver

            self._stamps = StampReceiver()
        return self._stamps

    def stop(self) -> None:
        if self._stamps is not None:
            self._stamps.stop()

    def cli_env(self, now: datetime) -> dict[str, str]:
        return clean_env(AWTY_NOW=iso(now), AWTY_SIGNING_SECRET=SECRET_TEXT)

    def awty_cli(self, args: Sequence[str], now: datetime, timeout: float = 600,
                 python_flags: Sequence[str] = (), stdin_path: Path | None = None) -> Proc:
        cmd = ([sys.executable, *python_flags, str(AWTY_SCRIPT)] if python_flags
               else [str(AWTY_SCRIPT)])
        p = run_proc([*cmd, *args], self.cli_env(now), self.workdir, timeout, stdin_path)
        if p.rc != 0:
            raise RuntimeError(f"awty {' '.join(args[:2])} exited {p.rc}: "
                               f"{p.stderr.strip()[-400:]}")
        return p

    def warm_up(self) -> None:
        """Exercise every library path once, untimed, so that the first timed run does not pay
        for awty's lazy imports (compiled from source when bytecode is not written)."""
        home = self.homes.path("warm-up")
        slot = slot_at(1)
        self.homes.fill(home, 10, lambda i: slot, now=slot - timedelta(hours=1))
        with self.homes.open(home, slot + timedelta(seconds=5)) as a:
            list(a.list(slot=slot))
            a.run_slot(slot)
            a.catchup()
        remove_home(home)

    def check_receiver(self) -> None:
        if not self.rx.alive():
            raise RuntimeError("the receiver died")

    def profiled(self, name: str, fn: Callable[[], Any]) -> Any:
        """With --profile DIR: run ``fn`` once more under a profiler (not counted)."""
        return profiled(self.a.profile, self.rep, name, fn)
