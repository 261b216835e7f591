"""A live owner for the contract tests: opens the store, holds ``owner_session(owner)``, says
"holding", then waits until killed (or until stdin closes).

    python holder.py sqlite|postgres WHERE SCHEMA OWNER
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import open_store  # noqa: E402

kind, where, schema, owner = sys.argv[1:5]
store = open_store(kind, where, schema or None)
with store.owner_session(owner):
    print("holding", flush=True)
    sys.stdin.read()
store.close()
