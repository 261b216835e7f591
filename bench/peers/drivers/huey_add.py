"""Schedule Huey tasks (hueyapp.py) from a process of their own.

    python huey_add.py schedule DIR URL N DUE     N tasks scheduled with eta DUE (epoch)
    python huey_add.py one DIR URL DUE            one task (one CLI call)
DIR must be PEER_DIR (where hueyapp keeps huey.db)."""

import os
import sys
from datetime import UTC, datetime

from hueyapp import fire


def main(argv):
    cmd, d = argv[0], argv[1]
    if d != os.environ.get("PEER_DIR"):
        raise SystemExit("PEER_DIR must name DIR")
    at = datetime.fromtimestamp(float(argv[-1]), UTC)
    if cmd == "schedule":
        for i in range(int(argv[3])):
            fire.schedule((argv[2], str(i)), eta=at)
    elif cmd == "one":
        fire.schedule((argv[2], f"one-{datetime.now().timestamp()}"), eta=at)


if __name__ == "__main__":
    main(sys.argv[1:])
