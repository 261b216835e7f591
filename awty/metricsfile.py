"""The ``metrics_file`` setting: after each ``run-slot`` and ``catchup``, the text ``awty
metrics`` prints, written atomically (a temp file beside it, then a rename) so that
node_exporter's textfile collector never reads half a file. Needs prometheus-client (the serve
extra); imported only when the setting is given."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import AwtyError

if TYPE_CHECKING:
    from .api import Awty


def write(a: Awty) -> str | None:
    """Write the metrics when ``metrics_file`` is set; the one line saying why not when they
    could not be written (the run itself has done its work: its exit code stays its own)."""
    path = a.settings.metrics_file
    if not path:
        return None
    try:
        from .serve.metrics import exposition
    except ImportError as e:
        return f"metrics_file needs {e.name or 'prometheus-client'}: pip install 'awty[serve]'"
    target = Path(path).expanduser()
    try:
        text = exposition(a)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text)
            os.chmod(tmp, 0o644)  # the collector often runs as another user
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        return f"metrics_file {target}: {e.strerror or e}"
    except AwtyError as e:
        return f"metrics_file: {e}"
    return None
