"""A reader that stops reading (``awty list | head -1``) must not turn into a traceback: the
command's stdout goes through ``QuietStdout``, installed once by ``main``."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any, TextIO


class QuietStdout:
    """``sys.stdout`` for a command line. When the reader has closed the pipe (EPIPE), the
    rest of the output goes to /dev/null and the command carries on: its work is done as
    asked (an ``add`` stores its job), its errors still reach stderr, its exit code stands.
    Dying on the first write instead would leave a batch half-reported and, under
    ``set -o pipefail``, fail a script whose only fault was ``| head``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        # what the buffer still holds goes to /dev/null now, not to the interpreter's exit
        # flush (which would print "Exception ignored" and exit 120)
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
