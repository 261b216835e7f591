"""Run one command and report its own peak RSS and wall time: ``python -I -S launch.py OUT CMD…``.

The bench cannot take a child's peak RSS from its own ``os.wait4``: a process's ru_maxrss keeps
the high-water mark of the memory it had before ``exec``, and a child forked (or vforked) from
the bench starts as a copy of the bench, which by the RSS section holds the earlier sections'
data (a 100,000-job slot's run then "peaked" at 160-170 MB whatever awty used: the bench's own
size). This launcher is small (standard library, no site): the command it forks starts as a copy
of ~10 MB, so its ru_maxrss is its own. It writes "<maxrss KiB> <wall seconds> <epoch of the
fork>" to OUT (the fork is the moment the command starts, for figures timed from it: the
launcher's own start-up is not theirs), and exits with the command's exit code (or dies of its
signal). SIGTERM to it (the bench's time limit) kills the command; the command is killed too if
the launcher dies.
"""

import os
import signal
import sys
import time


def main() -> None:
    out, cmd = sys.argv[1], sys.argv[2:]
    started = time.time()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the launcher
        except (OSError, AttributeError):
            pass
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    _, status, usage = os.wait4(pid, 0)  # retried after a signal's handler (PEP 475)
    wall = time.perf_counter() - t0
    with open(out, "w") as f:
        f.write(f"{usage.ru_maxrss} {wall:.6f} {started:.6f}\n")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
