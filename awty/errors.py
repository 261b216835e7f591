"""Typed errors. The library raises these; the CLI maps ``exit_code`` to the process exit
status in one place (``cli.options.reports_errors``). A job's own failure is never an exception:
it is an ``Outcome`` recorded in history."""

from __future__ import annotations


class AwtyError(Exception):
    """Something awty was asked to do could not be done (exit 1)."""

    exit_code = 1


class InvalidInput(AwtyError, ValueError):
    """Bad input from the user: nothing was changed (exit 2)."""

    exit_code = 2


class JobNotFound(AwtyError, LookupError):
    def __init__(self, job_id: str):
        self.job_id = job_id
        super().__init__(f"no such job: {job_id}")


class ScheduleNotFound(AwtyError, LookupError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"no such schedule: {name}")


class ScheduleExists(InvalidInput):
    """``schedule add`` of a name in use: bad input to the CLI (exit 2, nothing changed), a
    conflict with the stored schedule over HTTP (409, as the store's own refusal when two adds
    race)."""


class Conflict(AwtyError):
    """The request contradicts stored state (e.g. an idempotency key reused for another job)."""


class Busy(AwtyError):
    """The database or a lock stayed busy past its timeout; nothing was half-written."""


class Revoked(AwtyError):
    """An add checked against serve's tokens (``Store.add``'s ``tokens``) found some of them
    unknown or revoked: nothing of that add was stored. ``hashes``: the SHA-256s not found."""

    def __init__(self, hashes: frozenset[str]):
        self.hashes = hashes
        super().__init__("unknown or revoked token")


class StoreError(AwtyError):
    """The store cannot be used as it is (unknown schema version, unreadable database…)."""


class Unstorable(StoreError):
    """A write the database refused for what one of its rows holds (PostgreSQL: a data or
    integrity error), not for its own state: the same write without that row may succeed.
    A run splits a batch of results on it down to the row (``slotrun``)."""


class Unreachable(StoreError):
    """The store's server is out of reach: a new connection to it failed (PostgreSQL). Told
    as it is by a run's store process, whose parent's store then knows it too."""


class SessionLost(StoreError):
    """A runner's owner session ended under it (PostgreSQL: the server closed the connection
    holding its advisory lock): it may start nothing more, since other runners now treat it
    as gone. The run stops sending, records what was in flight and gives back the rest."""


class Interrupted(AwtyError):
    """A run stopped by SIGTERM or SIGINT once what it had sent was recorded and its unsent
    claims given back (exit 128 + the signal: 143, 130)."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
