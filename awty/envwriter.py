"""The envelope writer: a helper process that creates a big batch's envelope files in its
staging directory (``slotdir.Staged``) while the batch is validated and its rows inserted.

Creating a file costs ~20-30 µs of kernel time here, more than the rest of an add, and in a
thread of the adding process it waited on the GIL after every system call (62 µs a file). A
process of its own puts that work on the other core. It imports only the standard library (it
starts in ~15 ms).

Input (stdin): pickled lists of (file name, bytes), each preceded by its length (4 bytes, big
endian). The current directory is the staging directory. Each file is created new (never over
a file or through a link), 0600. Exit 0 once stdin ends; 1 (with one line on stderr) at the
first error, after reading stdin to its end (so the adder never blocks on a full pipe).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def main() -> int:
    src = sys.stdin.buffer
    failed: str | None = None
    while True:
        head = src.read(4)
        if len(head) < 4:
            break
        data = src.read(struct.unpack("!I", head)[0])
        if failed is not None:
            continue
        try:
            for name, body in pickle.loads(data):
                if "/" in name or name.startswith("."):
                    raise OSError(f"refusing the name {name!r}")
                fd = os.open(name, _NEW, 0o600)
                try:
                    os.write(fd, body)
                finally:
                    os.close(fd)
        except OSError as e:
            failed = str(e)
    if failed is not None:
        print(f"awty envelope writer: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
