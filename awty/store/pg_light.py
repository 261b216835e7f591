"""One ``awty add`` on PostgreSQL without importing psycopg (issue 34 #5): psycopg's import
(~150 ms here: typing_extensions, asyncio, importlib.metadata, ctypes.util, its adapters) was
most of what a one-job add paid beyond SQLite's. This store talks to the same libpq psycopg
uses (psycopg_binary's own copy when installed, else the system's) through ctypes, for the
three things such an add does: open (the schema's version and the store's meta, one round
trip), insert one job, close.

Like ``cli.quickadd`` it takes only what it is sure of and hands the rest to the real store
(``PostgresStore``, opened on first need): a URL with several hosts, a connection that fails
(the real store reconnects and says why, in psycopg's words), a schema that is missing or of
another version, a job with an idempotency key or a batch, a value libpq cannot carry as text
(NUL), a statement the server refused (nothing was stored: the real store makes it again and
reports it), and every other call (``__getattr__``). A connection timeout is told at once, as
psycopg tells it, rather than waited out twice. A statement that waits over ``PROBE_AFTER``
asks whether the server is still there, as ``pg_watch`` does for the real store; a
connection lost under the insert is settled by asking the real store whether the job is
there."""

from __future__ import annotations

import json
import os
import select
import sys
import time

from ..config import SCHEMA_NAME, system_schema
from ..errors import StoreError
from . import pg_migrations, rules
from .pg_rows import job_to_row
from .pg_sql import PROBE_AFTER, Sql

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence
    from datetime import datetime
    from typing import Any

    from ..model import Added, Job
    from .base import Store
    from .spec import StoreSpec

# libpq's enums (libpq-fe.h)
_CONNECTION_OK, _CONNECTION_BAD, _POLLING_FAILED, _POLLING_READING, _POLLING_WRITING, _POLLING_OK = 0, 1, 0, 1, 2, 3
_COMMAND_OK, _TUPLES_OK = 1, 2
_DIAG_SQLSTATE = ord("C")
_DEFAULT_TIMEOUT = 130  # psycopg's connect timeout when none is given (conninfo.py)


class _Unsure(Exception):
    """The light path cannot do this as psycopg would: the real store takes it."""


def _find_libpq() -> str | None:
    """The libpq psycopg would load: psycopg_binary's bundled copy beside psycopg, else the
    system's (psycopg's C or Python implementation use that). None when psycopg is not
    installed (or is hidden from this interpreter): the real store then says so."""
    if "psycopg" in sys.modules and sys.modules["psycopg"] is None:
        return None
    for d in sys.path:
        if not os.path.isfile(os.path.join(d or ".", "psycopg", "__init__.py")):
            continue
        for libs in (os.path.join(d, "psycopg_binary.libs"),
                     os.path.join(d, "psycopg_binary", ".dylibs")):
            try:
                names = os.listdir(libs)
            except OSError:
                continue
            for name in names:
                if name.startswith("libpq"):
                    return os.path.join(libs, name)
        return "libpq.dylib" if sys.platform == "darwin" else "libpq.so.5"
    return None


class _Lib:
    """The few libpq functions used, typed for ctypes."""

    def __init__(self, path: str):
        import ctypes

        c = ctypes
        lib = c.CDLL(path)
        P, S, I, PP = c.c_void_p, c.c_char_p, c.c_int, c.POINTER(c.c_char_p)
        for name, res, args in (
            ("PQconnectStartParams", P, [PP, PP, I]), ("PQconnectPoll", I, [P]),
            ("PQstatus", I, [P]), ("PQsocket", I, [P]), ("PQerrorMessage", S, [P]),
            ("PQfinish", None, [P]), ("PQparameterStatus", S, [P, S]),
            ("PQsendQueryParams", I, [P, S, I, P, PP, P, P, I]),
            ("PQconsumeInput", I, [P]), ("PQisBusy", I, [P]), ("PQgetResult", P, [P]),
            ("PQresultStatus", I, [P]), ("PQresultErrorField", S, [P, I]),
            ("PQntuples", I, [P]), ("PQgetvalue", S, [P, I, I]),
            ("PQgetisnull", I, [P, I, I]), ("PQclear", None, [P]),
            ("PQconninfoParse", P, [S, P]), ("PQconninfoFree", None, [P]),
        ):
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
            setattr(self, name, f)
        self.ctypes, self.strings = c, c.c_char_p

        class Option(c.Structure):
            _fields_ = [("keyword", S), ("envvar", S), ("compiled", S), ("val", S),
                        ("label", S), ("dispchar", S), ("dispsize", I)]

        self.Option = Option

    def __getattr__(self, name: str) -> Any:  # the functions set above, for mypy
        raise AttributeError(name)

    def array(self, values: Sequence[str | None]) -> Any:
        return (self.strings * (len(values) + 1))(
            *[None if v is None else v.encode() for v in values], None)

    def conninfo(self, url: str) -> dict[str, str]:
        """The URL's parameters, as psycopg's ``conninfo_to_dict`` reads them (the same
        libpq call)."""
        c = self.ctypes
        err = c.c_char_p()
        opts = self.PQconninfoParse(url.encode(), c.byref(err))
        if not opts:
            raise _Unsure  # not a URL libpq reads: the real store's message
        try:
            out, arr = {}, c.cast(opts, c.POINTER(self.Option))
            i = 0
            while arr[i].keyword:
                if arr[i].val is not None:
                    out[arr[i].keyword.decode()] = arr[i].val.decode()
                i += 1
            return out
        finally:
            self.PQconninfoFree(opts)


class LightStore:
    """See the module. ``full`` opens the real store (``PostgresStore``, no pool)."""

    offload = False  # PostgreSQL's answer (``PostgresStore.offload``), without opening it

    def __init__(self, spec: StoreSpec, full: Callable[[], Store]):
        path = _find_libpq()
        if path is None or not SCHEMA_NAME.fullmatch(spec.schema) or \
                system_schema(spec.schema):
            raise _Unsure
        try:
            self._lib = lib = _Lib(path)
        except (OSError, AttributeError):
            raise _Unsure from None
        info = lib.conninfo(spec.where)
        if "," in info.get("host", "") + info.get("hostaddr", "") + info.get("port", ""):
            raise _Unsure  # several hosts: psycopg's attempts, one by one
        host = info.get("host") or info.get("hostaddr") or "local socket"
        self.where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
        self.url, self.schema, self._full_open = spec.where, spec.schema, full
        self._full: Store | None = None
        self._spec = spec
        self.sql: Any = Sql(spec.schema)  # its statements are attributes set from TEXTS
        # What PostgresStore gives psycopg.connect: the URL, then these over it.
        options = f"{info.get('options') or ''} -c TimeZone=UTC".strip()
        connect_timeout = max(1, round(spec.connect_timeout))
        self._params = {"dbname": spec.where, "connect_timeout": str(connect_timeout),
                        "options": options,
                        "application_name": info.get("application_name") or "awty"}
        self._timeout = max(2, connect_timeout)  # psycopg's reading of it (at least 2 s)
        self._conn = self._connect("cannot open the store", probe=False)
        try:
            if lib.PQparameterStatus(self._conn, b"client_encoding") != b"UTF8":
                raise _Unsure  # psycopg would encode for it; UTF-8 is all this path sends
            self._meta = self._opening()
        except BaseException:
            self._finish()
            raise

    def _opening(self) -> dict[str, Any]:
        """The schema's version and the store's meta, one round trip (``Sql.opening``)."""
        row = self._query("cannot open the store", self.sql.opening, (), rows=True)
        if not row or row[0] is None or int(row[0]) != pg_migrations.LATEST:
            raise _Unsure  # missing or another version: the real store's message
        return json.loads(row[1]) if row[1] is not None else {}

    # -- the real store, for the rest ------------------------------------------------------
    def _real(self) -> Store:
        if self._full is None:
            self._finish()  # one connection at a time, as a one-shot store keeps
            self._full = self._full_open()
        return self._full

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # this object's own, not set yet (or a probe by hasattr)
            raise AttributeError(name)
        return getattr(self._real(), name)

    def spec(self) -> StoreSpec:
        return self._spec

    def meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def close(self) -> None:
        self._finish()
        if self._full is not None:
            self._full.close()

    def _finish(self) -> None:
        conn, self._conn = getattr(self, "_conn", None), None
        if conn:
            self._lib.PQfinish(conn)

    # -- adding -----------------------------------------------------------------------------
    def add(self, jobs: Sequence[Job], fingerprints: Sequence[str | None], *,
            tokens: Collection[str] = (), now: datetime | None = None) -> list[Added]:
        if self._full is not None or len(jobs) != 1 or jobs[0].idempotency_key or tokens:
            return self._real().add(jobs, fingerprints, tokens=tokens, now=now)
        out, rows = rules.admit(jobs, fingerprints, {})
        try:
            params = [_text(v) for v in job_to_row(*rows[0])]
            self._query("cannot add", self.sql.insert_job, params, rows=False)
        except _Unsure:
            return self._real().add(jobs, fingerprints)
        except _Lost:
            # Sent, and the answer lost with the connection: whether it committed is the
            # store's to say (one more add would find its own id taken).
            real = self._real()
            if jobs[0].id in real.find([jobs[0].id]):
                return out
            return real.add(jobs, fingerprints)
        return out

    # -- libpq --------------------------------------------------------------------------------
    def _connect(self, what: str, probe: bool) -> Any:
        lib = self._lib
        keys, values = list(self._params), list(self._params.values())
        conn = lib.PQconnectStartParams(lib.array(keys), lib.array(values), 1)
        if not conn:
            raise _Unsure
        try:
            if lib.PQstatus(conn) == _CONNECTION_BAD and not probe:
                raise _Unsure
            deadline = time.monotonic() + self._timeout
            state = _POLLING_WRITING
            while True:
                if state == _POLLING_OK:
                    return conn
                if state == _POLLING_FAILED:
                    if probe:
                        raise _Down("connection failed: " + _first(lib.PQerrorMessage(conn)))
                    raise _Unsure  # psycopg's own words for it
                left = deadline - time.monotonic()
                fd = lib.PQsocket(conn)
                if left <= 0 or not _ready(fd, state == _POLLING_WRITING, left):
                    if probe:
                        raise _Down("connection timeout expired")
                    raise StoreError(f"PostgreSQL at {self.where}: {what}: "
                                     "connection timeout expired")
                state = lib.PQconnectPoll(conn)
        except BaseException:
            lib.PQfinish(conn)
            raise

    def _query(self, what: str, sql: str, params: Sequence[str | None], rows: bool) -> Any:
        """Run ``sql`` (``$n`` parameters as text); the first row's values as text when
        ``rows``. A refused statement is ``_Unsure`` (nothing was stored)."""
        lib, conn = self._lib, self._conn
        if not lib.PQsendQueryParams(conn, sql.encode(), len(params), None,
                                     lib.array(params), None, None, 0):
            raise _Lost
        self._wait(conn, what)
        first, failed = None, False
        while True:
            res = lib.PQgetResult(conn)
            if not res:
                break
            status = lib.PQresultStatus(res)
            if status == _TUPLES_OK and rows and first is None and lib.PQntuples(res):
                first = [None if lib.PQgetisnull(res, 0, i) else lib.PQgetvalue(res, 0, i)
                         .decode() for i in range(2)]
            elif status not in (_COMMAND_OK, _TUPLES_OK):
                failed = True
            lib.PQclear(res)
        if lib.PQstatus(conn) != _CONNECTION_OK:
            raise _Lost
        if failed:
            raise _Unsure
        return first

    def _wait(self, conn: Any, what: str) -> None:
        """Until the answer is in: past ``PROBE_AFTER``, and then once a connect timeout, ask
        whether the server is still there (a new connection); if not, fail saying so."""
        lib = self._lib
        fd = lib.PQsocket(conn)
        asked = since = time.monotonic()
        while True:
            if not lib.PQconsumeInput(conn):
                raise _Lost
            if not lib.PQisBusy(conn):
                return
            if _ready(fd, False, PROBE_AFTER / 4):
                continue
            now = time.monotonic()
            if now - since < PROBE_AFTER or now - asked < self._timeout and asked != since:
                continue
            asked = now
            try:
                lib.PQfinish(self._connect(what, probe=True))
            except _Down as e:
                raise StoreError(f"PostgreSQL at {self.where}: {what}: unreachable ({e})"
                                 ) from None


class _Lost(Exception):
    """The connection broke under a statement: its outcome is unknown here."""


class _Down(Exception):
    """A probe's connection failed: the server is out of reach (why, as psycopg puts it)."""


def _first(raw: bytes | None) -> str:
    text = (raw or b"").decode("utf-8", "replace").strip()
    return text.splitlines()[0].strip() if text else "no error details available"


def _ready(fd: int, write: bool, timeout: float) -> bool:
    r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], timeout)
    return bool(r or w)


def _text(v: Any) -> str | None:
    """A row value as PostgreSQL's text input reads it; what this path cannot say exactly as
    psycopg would is ``_Unsure``."""
    if v is None:
        return None
    if isinstance(v, str):
        if "\x00" in v:
            raise _Unsure  # psycopg refuses it with its own message
        return v
    if isinstance(v, bool):
        raise _Unsure
    if isinstance(v, (int, float)):
        return repr(v)
    if getattr(v, "tzinfo", None) is not None:  # an aware datetime
        return str(v.isoformat())
    raise _Unsure


def open_light(spec: StoreSpec, full: Callable[[], Store]) -> Store | None:
    """A ``LightStore`` for ``spec``, or None when the real store must open it."""
    try:
        return LightStore(spec, full)
    except (_Unsure, _Lost):
        return None
