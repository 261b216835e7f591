"""The envelope writer: a helper process that creates a big batch's envelope files in its
staging directory (``slotdir.Staged``) while the batch is validated and its rows inserted.

Creating a file costs ~20-30 µs of kernel time here, more than the rest of an add, and in a
thread of the adding process it waited on the GIL after every system call (62 µs a file). A
process of its own puts that work on the other core. It imports only the standard library (it
starts in ~15 ms).

Input (stdin): pickled lists of (file name, bytes), each preceded by its length (4 bytes, big
endian). A name is ``<slot id>/<id>.json``: the current directory is the staging directory, and
each slot's envelopes go in a subdirectory of it (0700) that the adder can move into the slot
tree whole. Each file is created new (never over a file or through a link), 0600. Exit 0 once
stdin ends; 1 (with one line on stderr) at the first error, after reading stdin to its end (so
the adder never blocks on a full pipe).
"""

from __future__ import annotations

import os
import pickle
import stat
import struct
import sys

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def main() -> int:
    src = sys.stdin.buffer
    failed: str | None = None
    made: set[str] = set()
    while True:
        head = src.read(4)
        if len(head) < 4:
            break
        data = src.read(struct.unpack("!I", head)[0])
        if failed is not None:
            continue
        try:
            for name, body in pickle.loads(data):
                sid, _, file = name.partition("/")
                if (len(sid) != 12 or not sid.isdigit() or "/" in file
                        or file.startswith(".") or not file):
                    raise OSError(f"refusing the name {name!r}")
                if sid not in made:
                    try:
                        os.mkdir(sid, 0o700)
                    except FileExistsError:
                        pass  # whatever it is, the lstat below decides
                    if not stat.S_ISDIR(os.lstat(sid).st_mode):
                        raise OSError(f"{sid} is not a directory")
                    made.add(sid)
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
