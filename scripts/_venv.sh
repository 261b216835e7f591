# Sourced by scripts/test, scripts/demo and scripts/bench: make .venv and install awty into it
# with the given extras, re-installing only when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-test}"

pick_python() {
  for py in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "awty needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  PY="$(pick_python)"
  echo "creating $VENV with $("$PY" --version)" >&2
  "$PY" -m venv "$VENV"
fi

STAMP="$VENV/.awty-installed-$EXTRAS"
HASH="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
  echo "installing awty[$EXTRAS] into .venv" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  LOG="$VENV/pip-install.log"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT[$EXTRAS]" --config-settings editable_mode=compat >"$LOG" 2>&1; then
    tail -30 "$LOG" >&2; echo "pip install failed; full log in $LOG" >&2; exit 1
  fi
  "$VENV/bin/python" -c "import awty, typer, sqlite_utils, filelock, httptools" \
    || { echo "install failed" >&2; exit 1; }
  echo "$HASH" > "$STAMP"
fi
# Byte-compile awty even where PYTHONDONTWRITEBYTECODE is set (as on this machine): an editable
# install is otherwise recompiled on every start, ~25 ms of each `awty add`.
"$VENV/bin/python" -m compileall -q "$ROOT/awty" >/dev/null 2>&1 || true
