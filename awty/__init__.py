"""awty — Are We There Yet? Future checks and signed HTTP callbacks, fired by cron.

``from awty import Awty`` is the library entry point. Importing this package is cheap: the
facade and everything behind it load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

__all__ = ["Awty", "AwtyError", "InvalidInput", "JobNotFound", "Conflict", "Busy",
           "Job", "Outcome", "Kind", "__version__"]

if TYPE_CHECKING:
    from .api import Awty
    from .errors import AwtyError, Busy, Conflict, InvalidInput, JobNotFound
    from .model import Job, Kind, Outcome


def __getattr__(name: str) -> Any:
    if name == "Awty":
        from .api import Awty

        return Awty
    if name in ("AwtyError", "InvalidInput", "JobNotFound", "Conflict", "Busy"):
        from . import errors

        return getattr(errors, name)
    if name in ("Job", "Outcome", "Kind"):
        from . import model

        return getattr(model, name)
    raise AttributeError(name)
