"""``python bench [options]`` (what ``scripts/bench`` runs) or ``python -m bench``; and
``python bench _loadgen PORT SECONDS CONNECTIONS``, the ceiling's load generator; and
``python bench _stamps PORT PARENT_PID``, the timing receiver (bench/stamps.py)."""

import sys
from pathlib import Path

if not __package__:  # run as `python bench`: make the package importable from the repository
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

if len(sys.argv) > 1 and sys.argv[1] == "_loadgen":
    from bench.sections.ceiling import loadgen_main

    loadgen_main(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
elif len(sys.argv) > 1 and sys.argv[1] == "_stamps":
    from bench.stamps import serve

    serve(int(sys.argv[2]), int(sys.argv[3]))
else:
    from bench.main import main

    sys.exit(main(sys.argv[1:]))
