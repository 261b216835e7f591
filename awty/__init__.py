"""awty — Are We There Yet? Future checks and signed HTTP callbacks, fired by cron.

``from awty import Awty`` is the library entry point. Importing this package is cheap: the
facade and everything behind it load on first use.
"""

from __future__ import annotations


from ._version import __version__

__all__ = ["Awty", "AddResult", "AwtyError", "InvalidInput", "JobNotFound", "Conflict", "Busy",
           "Job", "JobView", "Call", "Outcome", "Kind", "CancelResult", "HistoryRow",
           "SlotSummary", "StoreStats", "RunSummary", "Clock", "FixedClock", "__version__"]

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from .api import AddResult, Awty
    from .clock import Clock, FixedClock
    from .documents import JobView
    from .errors import AwtyError, Busy, Conflict, InvalidInput, JobNotFound
    from .model import (
        Call, CancelResult, HistoryRow, Job, Kind, Outcome, RunSummary, SlotSummary,
        StoreStats,
    )

# Where each lazily loaded name lives: importing awty stays cheap (`awty add` start-up).
_LAZY = {
    "Awty": "api", "AddResult": "api",
    "AwtyError": "errors", "InvalidInput": "errors", "JobNotFound": "errors",
    "Conflict": "errors", "Busy": "errors",
    "Job": "model", "JobView": "documents", "Call": "model", "Outcome": "model",
    "Kind": "model", "CancelResult": "model",
    "HistoryRow": "model", "SlotSummary": "model", "StoreStats": "model",
    "RunSummary": "model",
    "Clock": "clock", "FixedClock": "clock",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)
