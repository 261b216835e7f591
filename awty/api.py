"""The ``Awty`` facade: the library's entry point. It wires settings, store, slot tree, clock
and runner together, returns data and raises ``AwtyError``s; it never prints."""

from __future__ import annotations

import _thread
import builtins
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

from . import config as config_mod
from .clock import Clock, default_clock
from .documents import JobView
from .errors import AwtyError, Busy, InvalidInput, JobNotFound, Revoked, StoreError
from .ids import ID_PREFIX, MIN_PREFIX, normalise
from .model import (
    ALL_KINDS, Added, ApiToken, CancelResult, Execution, HistoryRow, Job, Kind, MisfirePolicy,
    RunSummary, Schedule, SlotSummary, StoreStats,
)
from .record import Record, _draft, _seal
from .slottree.tree import NoTree, SlotTree
from .slots import current_slot, next_slot_after, slot_for, slot_id
from .when import parse_since, to_utc

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from logging import Logger
    from typing import IO, Any

    from .run.catchup import CatchupSummary
    from .run.runner import Runner
    from .store.base import Store
    from .transfer import Moved

# Specs a chunk of a batch stored while it is validated (``Awty._streamed``): small enough that
# the first chunk's validation, which nothing overlaps, is a few percent of a 100,000-job batch;
# large enough that each chunk's look-ups made once (its times, shared fields) stay cheap.
_CHUNK = 5000

# A duration the API accepts: a timedelta, a number of seconds, or text (``90s``, ``2h``,
# ``2 hours``, ``PT2H``).
Duration = str | float | timedelta


class AddResult(Record):
    """What ``Awty.add`` / ``add_many`` give back for one job."""

    __slots__ = ("job", "created", "dry_run")
    job: Job
    created: bool  # False: the idempotency key named an existing job
    dry_run: bool

    def __new__(cls, job: Job, created: bool, dry_run: bool = False) -> AddResult:
        s = _draft(cls)
        s.job = job
        s.created = created
        s.dry_run = dry_run
        return _seal(s, cls)

    @property
    def slot(self) -> datetime:
        """The slot the job runs in (its first check)."""
        return self.job.next_check_at


class AddPart(Record):
    """One part of ``Awty.add_parts``: the arguments of one ``add_many`` call, and ``token``,
    the SHA-256 of serve's token it is added with (None: none to check)."""

    __slots__ = ("specs", "cwd", "environ", "single", "token")
    specs: list[dict[str, Any]]
    cwd: str | None
    environ: dict[str, str] | None
    single: bool
    token: str | None

    def __new__(cls, specs: list[dict[str, Any]], cwd: str | None = None,
                environ: dict[str, str] | None = None, single: bool = False,
                token: str | None = None) -> AddPart:
        s = _draft(cls)
        s.specs = specs
        s.cwd = cwd
        s.environ = environ
        s.single = single
        s.token = token
        return _seal(s, cls)


class Awty:
    """``Awty(home=None, clock=None, database_url=None)``. ``home`` defaults to AWTY_HOME,
    else ``$XDG_DATA_HOME/awty``; ``clock`` to the system clock (or AWTY_NOW when set).
    ``database_url`` (or the setting, or AWTY_DATABASE_URL) puts the jobs in PostgreSQL
    instead of ``home/awty.db``; home then keeps only settings, secret and log, and there is
    no slot tree (drop-in envelopes are a single-host feature).

    Times: a ``datetime`` given to any method without a zone (naive) is local wall time, in
    ``tz`` (default: the system's zone), as ``awty add --at`` reads a time without an offset;
    an aware one is taken as it is. Every datetime returned is aware UTC. Results are
    read-only records; ``JobView.as_dict()`` and ``CancelResult.as_dict()`` are JSON as they
    stand. One ``Awty`` per process is safe to share across threads (a web app's workers).

    A python job (``add("myapp.checks:order_shipped", kind="python", …)``) calls its function
    in awty's own interpreter, with the directory it was added from first on ``sys.path``,
    with an ``awty.Call``: the HTTP body's fields by the same names (``id``, ``entity``,
    ``key``, ``payload``, ``check``, ``attempt``, ``slot``, ``first_check_at``)::

        def order_shipped(job: Call) -> timedelta | None:  # myapp/checks.py
            return None if job.payload.get("shipped") else timedelta(hours=2)
    """

    def __init__(self, home: str | Path | None = None, clock: Clock | None = None, *,
                 env: dict[str, str] | None = None, tz: tzinfo | None = None,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 one_shot: bool = False, **overrides: Any) -> None:
        # one_shot: a few store calls, then the process ends (one `awty add`): on PostgreSQL
        # one plain connection, no pool (store.open)
        self.one_shot = one_shot
        self.env = dict(os.environ) if env is None else env
        self.home = Path(home).expanduser() if home else config_mod.default_home(self.env)
        self.clock = clock or default_clock(self.env)
        self.tz = tz
        self.on_event = on_event
        # where each setting came from (awty.toml, AWTY_*, a flag): init keeps a database
        # URL given elsewhere in awty.toml, crontab refuses one cron would not see
        self.sources: dict[str, str] = {}
        self.settings = config_mod.load(self.home, self.env, overrides, sources=self.sources)
        # one-line warnings for whoever runs this (the CLI prints them on stderr)
        self.notes: builtins.list[str] = []
        self._store: Store | None = None
        self._opening = _thread.allocate_lock()  # _thread: built in, costs `awty add` nothing
        self._read_only = False
        # The one thing the runner and the rest learn about the store: are there files to keep
        # in step with it (SlotTree), or none (NoTree: PostgreSQL, shared by hosts)?
        self.tree: SlotTree | NoTree = (NoTree() if self.settings.database_url
                                        else SlotTree(self.home))
        self._log: Logger | None = None

    # -- wiring ---------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        """The SQLite database in home."""
        return self.home / "awty.db"

    @property
    def on_postgres(self) -> bool:
        """True when this home's jobs live in PostgreSQL (``database_url``), not SQLite."""
        return self.settings.database_url is not None

    @property
    def store(self) -> Store:
        """The store, opened (and home created) on first use."""
        if self._store is None:
            # a web app's threads may all ask at once: open (and migrate) once, not per thread
            with self._opening:
                if self._store is None:
                    if self._read_only:
                        self._opened(open_store(self, mode="read"))
                    else:
                        ensure_home(self.home)
                        self._opened(open_store(self))
        assert self._store is not None
        return self._store

    def _opened(self, store: Store) -> None:
        """Use ``store``; on PostgreSQL its cluster settings take the place of this host's
        (a local value that differs is a note: one line for whoever runs this)."""
        self._store = store
        stored = store.meta().get("settings") if self.on_postgres else None
        if not stored:
            return
        values = config_mod.read_cluster(stored)
        differ = [k for k, v in values.items()
                  if k in self.sources and getattr(self.settings, k) != v]
        if differ:
            mine = ", ".join(f"{k} = {config_mod.shown(k, getattr(self.settings, k))} "
                             f"({self.sources[k]})" for k in differ)
            theirs = ", ".join(config_mod.shown(k, values[k]) for k in differ)
            self.notes.append(f"{mine}: the cluster's {'is' if len(differ) == 1 else 'are'} "
                              f"{theirs}, used here (`awty config --cluster` shows and "
                              "changes them)")
        self.settings = self.settings.replace(**values)

    def load_cluster(self) -> None:
        """On PostgreSQL, open the store now, so that ``settings`` holds the cluster's shared
        settings (``config.CLUSTER_KEYS``: resolution, retry schedule, guard defaults,
        max_delay), which every host reads from the database; nothing to do on SQLite."""
        if self.on_postgres:
            _ = self.store

    def read_only(self) -> Awty:
        """A view of this home that never creates, migrates or chmods anything (``doctor``
        without ``--repair``): its store opens an existing database as it is, and a missing
        one raises ``StoreError``. Close it on its own."""
        view = Awty(self.home, self.clock, env=self.env, tz=self.tz)
        view.settings, view.tree, view.sources = self.settings, self.tree, self.sources
        view._read_only = True
        return view

    def close(self) -> None:
        """Close the store and the slot tree; the object can be used again afterwards."""
        self.tree.close()
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Awty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def init(self) -> list[str]:
        """Create home (0700), the database (0600), the slot tree and a commented awty.toml;
        on PostgreSQL, create or migrate the schema instead of the database and tree.
        Returns what was created. A database URL (and schema) given by flag or environment is
        written into awty.toml, so that the next command and cron's runs find it; one that
        awty.toml names otherwise is refused (``InvalidInput``) before anything is made.
        Callbacks are signed by default: a home with no secret configured gets a fresh one in
        ``home/signing.secret`` (0600; one already there is kept) and ``signing_secret_file``
        pointing at it. On PostgreSQL only the init that creates the cluster writes one: the
        other hosts must sign with the same secret, so they are told to copy it."""
        from . import homeconfig

        keep = self._unkept_database_settings()
        secret_file = self._unsigned_home_secret()
        if secret_file is not None:
            keep["signing_secret_file"] = str(secret_file)
        homeconfig.conflicts(self.home, keep)
        made = []
        if not self.home.exists():
            made.append(str(self.home))
        ensure_home(self.home)
        first = False  # the init that creates a PostgreSQL cluster's settings
        if self.on_postgres and self._store is None:
            from .errors import StoreError

            try:
                store = open_store(self)
            except StoreError as e:
                if "awty init" not in str(e):  # unreachable, refused: not init's to mend
                    raise
                store = self._store = open_store(self, mode="init")
                made.append(self.where)
            if "settings" not in store.meta():  # the first init: this host's are the cluster's
                first = True
                store.set_cluster(config_mod.cluster_values(self.settings), now=self.clock.now())
            self._opened(store)
        elif not self.db_path.exists():
            made.append(str(self.db_path))
        _ = self.store
        if secret_file is not None:
            self._write_secret(secret_file, keep, made, first or not self.on_postgres)
        cfg = self.home / config_mod.CONFIG_NAME
        done = homeconfig.keep(self.home, keep)  # never over the operator's lines, nor a link
        if done == "created":
            made.append(str(cfg))
        if done in ("created", "added", "kept"):
            self.sources.update({k: str(cfg) for k in keep})
            if "signing_secret_file" in keep:  # this Awty signs from now on, as later ones
                self.settings = self.settings.replace(
                    signing_secret_file=keep["signing_secret_file"])
        elif keep:
            lines = "; ".join(config_mod.toml_line(k, config_mod.redact(v) if
                                                   k == "database_url" else v)
                              for k, v in keep.items())
            lost = "will not find the database" if "database_url" in keep else \
                "will send callbacks unsigned"
            self.notes.append(f"{cfg} is not a file awty rewrites: add {lines} to it, or "
                              f"the next command (and cron) {lost}")
        self.tree.create()
        return made

    def _unsigned_home_secret(self) -> Path | None:
        """Where init puts this home's signing secret: None when one is configured already
        (``signing_secret_file``, or ``AWTY_SIGNING_SECRET``, which wins over any file)."""
        from .signing import ENV_VAR

        if self.settings.signing_secret_file or self.env.get(ENV_VAR):
            return None
        return self.home / config_mod.SECRET_NAME

    def _write_secret(self, path: Path, keep: dict[str, Any], made: builtins.list[str],
                      may_create: bool) -> None:
        """A fresh secret at ``path`` unless one is there (kept as it is); on a PostgreSQL
        host that did not create the cluster, a note instead: a secret of its own would sign
        its callbacks with a key the receiver does not have."""
        from .signing import write_new_secret

        if not may_create and not os.path.lexists(path):
            del keep["signing_secret_file"]
            self.notes.append(
                f"callbacks from this host go unsigned: copy {config_mod.SECRET_NAME} from "
                f"the host that ran the first `awty init` to {path} (chmod 600), then run "
                "`awty init` again")
        elif write_new_secret(path):
            made.append(str(path))

    def _unkept_database_settings(self) -> dict[str, Any]:
        """The database settings awty.toml does not hold yet, when a flag or AWTY_* gave them
        (a URL kept, its schema with it); {} on SQLite or when the file names them."""
        if not self.on_postgres or config_mod.from_file(self.sources.get("database_url")) \
                and config_mod.from_file(self.sources.get("database_schema")):
            return {}
        s = self.settings
        return {"database_url": s.database_url, "database_schema": s.database_schema}

    def unkept_database_url(self) -> str | None:
        """Where the database URL (or schema) comes from when it is not awty.toml (a flag, an
        AWTY_* variable), else None: cron's and systemd's runs would not see it."""
        if not self.on_postgres:
            return None
        data: dict[str, Any] | None = None
        for key in ("database_url", "database_schema"):
            source = self.sources.get(key)
            if config_mod.from_file(source):
                continue
            data = config_mod.read_toml(self.home) if data is None else data
            if key not in data or config_mod.file_value(self.home, key, data) != getattr(
                    self.settings, key):
                return source  # the file's value, if any, is not the one in use
        return None

    def moved(self) -> dict[str, str] | None:
        """Where this home moved (``export --move``): ``{"to": …, "at": …}``, else None."""
        return self.store.meta().get("moved")

    def _not_moved(self) -> None:
        """A moved home adds and runs nothing: its jobs live on in the store it moved to."""
        moved = self.moved()
        if moved:
            from .errors import Conflict

            raise Conflict(f"this home moved to {moved['to']} on {moved['at']}: use that "
                           "store")

    def cluster(self) -> dict[str, Any]:
        """The settings every host of this PostgreSQL home's cluster reads from the database
        (``config.CLUSTER_KEYS``), as settings; {} on SQLite (awty.toml decides there) or
        before `awty init` wrote them."""
        if not self.on_postgres:
            return {}
        return config_mod.read_cluster(self.store.meta().get("settings") or {})

    def set_cluster(self, changes: dict[str, Any]) -> int:
        """Change cluster settings (values as awty.toml takes them: ``{"resolution": 5,
        "backoff": "10s,1m"}``) for every host. A new resolution moves every pending job off
        its boundaries to the next one, in the same transaction; returns how many moved.
        ``InvalidInput`` (nothing changed) on SQLite, for another key or a bad value."""
        if not self.on_postgres:
            raise InvalidInput("--cluster: this home is on SQLite, a cluster of one: its "
                               f"settings are {self.home / config_mod.CONFIG_NAME}'s")
        unknown = sorted(set(changes) - set(config_mod.CLUSTER_KEYS))
        if unknown:
            raise InvalidInput(f"--cluster: {', '.join(unknown)} is not a cluster setting "
                               f"(those are {', '.join(config_mod.CLUSTER_KEYS)}); set it in "
                               f"{self.home / config_mod.CONFIG_NAME} on each host")
        if not changes:
            raise InvalidInput("--cluster: give KEY=VALUE to change")
        values = config_mod.read_cluster(changes, "--cluster")
        self.load_cluster()
        new = self.settings.replace(**values)
        moved = self.store.set_cluster(
            config_mod.cluster_values(new), now=self.clock.now(),
            reslot=new.resolution if new.resolution != self.settings.resolution else None)
        self.settings = new
        return moved

    @property
    def where(self) -> str:
        """Where the jobs live, for messages: the database file, or the PostgreSQL schema."""
        if not self.on_postgres:
            return str(self.db_path)
        at = getattr(self._store, "where", None)  # host:port/db, once the store is open
        return f'PostgreSQL{" " + at if at else ""}, schema "{self.settings.database_schema}"'

    # -- adding ---------------------------------------------------------------------------
    def add(self, target: str, *, at: str | datetime | None = None,
            in_: Duration | None = None, kind: str = "http", payload: Any = None,
            payload_json: str | None = None, entity: str | None = None, key: str | None = None,
            idempotency_key: str | None = None,
            headers: dict[str, str] | builtins.list[str] | tuple[str, ...] | None = None,
            max_checks: int | None = None, horizon: Duration | None = None,
            timeout: Duration | None = None, max_attempts: int | None = None,
            misfire_grace: Duration | None = None, cwd: str | None = None,
            dry_run: bool = False) -> AddResult:
        """Add one job due ``at`` (a time as ``--at`` reads it, or a datetime) or ``in_`` (a
        duration). ``kind`` is http, exec or python; ``target`` the URL, command or
        ``module:function``. Raises ``InvalidInput`` (nothing stored) for a bad field.
        ``key`` names one instance of ``entity`` (order 42) and needs it.
        ``idempotency_key``: adding the same job again returns it with ``created=False``."""
        spec: dict[str, Any] = {"target": target, "kind": kind, "entity": entity, "key": key,
                                "idempotency_key": idempotency_key, "headers": headers,
                                "max_checks": max_checks, "horizon": _seconds(horizon),
                                "timeout": _seconds(timeout), "max_attempts": max_attempts,
                                "misfire_grace": _seconds(misfire_grace), "cwd": cwd}
        if isinstance(at, datetime):
            at = at.isoformat()
        spec["at"], spec["in"] = at, _seconds(in_)
        if payload_json is not None:
            spec["payload_json"] = payload_json
        else:
            spec["payload"] = payload
        return self.add_many([{k: v for k, v in spec.items() if v is not None}],
                             dry_run=dry_run, cwd=cwd, _single=True)[0]

    def add_many(self, specs: Iterable[dict[str, Any]], *, dry_run: bool = False,
                 cwd: str | None = None, environ: dict[str, str] | None = None,
                 lines: Sequence[int] | None = None, _single: bool = False
                 ) -> list[AddResult]:
        """All or nothing: a bad spec raises ``InvalidInput`` naming it (``line N: …``) and
        nothing is stored. Rows are committed first, then the envelopes are in their slots: a
        crash in between leaves rows without files, which still run. A slot given two jobs or
        more gets one batch file for them (``SlotTree.write_many``). ``environ``: the whole environment
        an exec job gets (recorded whatever ``exec_env`` says), instead of this process's.
        ``lines``: each spec's line in the file it was read from, for a refusal's ``line N``
        (default: its place in ``specs``, from 1)."""
        from .gcpause import paused

        self.load_cluster()  # max_delay, the guards' defaults, the resolution: the cluster's
        if not dry_run:
            self._not_moved()
        with paused():
            now = self.clock.now()
            if not dry_run and not _single:
                specs = specs if isinstance(specs, list) else list(specs)
                if self._streams(specs):
                    return self._streamed(specs, now, cwd, environ, lines)
            jobs, fps = self._built(specs, now, cwd, environ, _single, lines)
            if dry_run:
                return [AddResult(j, True, True) for j in jobs]
            return self._stored(jobs, fps)

    def _streams(self, specs: builtins.list[Any]) -> bool:
        """Whether a batch is stored while it is validated (``_streamed``): a batch of
        several chunks, none with an idempotency key (whose lookup needs the whole batch
        first; a spec that is no plain dict goes through ``jobspec.build``, which might find
        one)."""
        return (len(specs) >= 2 * _CHUNK
                and all(type(s) is dict and "idempotency_key" not in s for s in specs))

    def _streamed(self, specs: builtins.list[Any], now: datetime, cwd: str | None,
                  environ: dict[str, str] | None, lines: Sequence[int] | None
                  ) -> builtins.list[AddResult]:
        """``add_many`` of a large batch: each chunk of ``_CHUNK`` specs is validated while
        the chunk before is inserted (``add_chunks``: PostgreSQL's server, SQLite's writer
        thread; one transaction; a bad spec ends it with nothing stored, and its ``line N`` is
        its place in the whole batch). The store is asked before the batch is all validated: a
        bad spec on a store out of reach reads as the store's error, not the spec's."""
        def chunks() -> Iterator[tuple[builtins.list[Job], builtins.list[str | None]]]:
            for i in range(0, len(specs), _CHUNK):
                yield self._built(specs[i:i + _CHUNK], now, cwd, environ, False,
                                  lines[i:i + _CHUNK] if lines else range(i + 1, i + _CHUNK + 1))

        from .gcpause import quick_switches

        if not self.on_postgres:  # (measured on PostgreSQL's writer thread only)
            return self._written(self.store.add_chunks(chunks()))
        with quick_switches():
            added = self.store.add_chunks(chunks())
        return self._written(added)

    def add_parts(self, parts: Sequence[AddPart]) -> list[list[AddResult] | AwtyError]:
        """Several ``add_many`` calls in one transaction (serve's group commit: the adds of
        requests that arrived together). Each part is all or nothing on its own: a part with
        a bad spec gets its ``InvalidInput`` and the others are stored; when the store refuses
        the whole (a part's idempotency key taken with other fields, say), each part is added
        on its own, as if they had come one after the other. The parts' tokens are checked in
        that transaction (``Store.add``): a part whose token is unknown or revoked gets
        ``Revoked``, nothing of it stored, and the others go in without it. A ``StoreError``
        or ``Busy`` is every part's. Returns each part's results, or the error it raised."""
        self.load_cluster()
        self._not_moved()
        now = self.clock.now()
        out: list[list[AddResult] | AwtyError] = []
        built: dict[int, tuple[list[Job], list[str | None]]] = {}
        for i, p in enumerate(parts):
            try:
                built[i] = self._built(p.specs, now, p.cwd, p.environ, p.single)
            except AwtyError as e:
                out.append(e)
                continue
            out.append([])
        while True:
            jobs = [j for b in built.values() for j in b[0]]
            if not jobs:
                return out
            fps = [f for b in built.values() for f in b[1]]
            tokens = {t for t in (parts[i].token for i in built) if t is not None}
            try:
                added = self._stored(jobs, fps, tokens, now)
            except Revoked as e:  # rare: again without the parts of the tokens gone
                for i in [i for i in built if parts[i].token in e.hashes]:
                    out[i] = e
                    del built[i]
                continue
            except (StoreError, Busy):
                raise
            except AwtyError as e:
                if len(built) == 1:
                    return [e if i in built else r for i, r in enumerate(out)]
                return [self._part_alone(parts[i]) if i in built else r
                        for i, r in enumerate(out)]
            at = 0
            for i, (js, _) in built.items():
                out[i] = added[at:at + len(js)]
                at += len(js)
            return out

    def _part_alone(self, p: AddPart) -> list[AddResult] | AwtyError:
        return self.add_parts([p])[0]

    def _built(self, specs: Iterable[dict[str, Any]], now: datetime, cwd: str | None,
               environ: dict[str, str] | None, single: bool,
               lines: Sequence[int] | None = None) -> tuple[list[Job], list[str | None]]:
        """The jobs of ``specs`` and their fingerprints; ``InvalidInput`` naming the bad one."""
        from .specbatch import build_many

        return build_many(specs, now=now, settings=self.settings, local=self.tz,
                          cwd=cwd or os.getcwd(), environ=environ, single=single,
                          lines=lines)

    def _stored(self, jobs: list[Job], fps: list[str | None], tokens: Collection[str] = (),
                now: datetime | None = None) -> list[AddResult]:
        return self._written(self.store.add(jobs, fps, tokens=tokens, now=now))

    def _written(self, added: builtins.list[Added]) -> builtins.list[AddResult]:
        """The results of an add, once its new jobs' envelopes are in the slot tree."""
        try:
            self.tree.write_many(a.job for a in added if a.created)
        except OSError as e:
            # The rows are committed: the jobs are accepted and run without their
            # envelopes (SPEC 3). Failing here would have the caller add them again.
            self.logger().warning(f"add: envelope(s) not written ({e.strerror or e}); "
                                  "the jobs still run; `awty doctor --repair` writes them")
        return [AddResult(a.job, a.created) for a in added]

    # -- recurring schedules (awty/schedules.py) -----------------------------------------
    def schedule(self, name: str, target: str, *, cron: str | None = None,
                 every: Duration | None = None, start: str | datetime | None = None,
                 tz: str | None = None, missed: str | None = None,
                 missed_window: Duration | None = None, **job: Any) -> Schedule:
        """Keep a recurring schedule ``name`` firing ``target``: ``cron`` (five fields or an
        @ shorthand, wall times in ``tz``, default the local zone) or ``every`` (a duration,
        elapsed time, first at ``start``, default one interval from now). ``missed``: skip,
        once (default) or all (within ``missed_window``, default 24h). ``job``: the options
        of ``add`` (kind, payload, headers, entity, key, timeout, max_attempts…). Each
        occurrence is an ordinary job; only the next one is pending. Bad input raises
        ``InvalidInput`` naming the field, nothing stored."""
        from . import schedules

        job = {k: _seconds(v) if k in ("horizon", "timeout", "misfire_grace") else v
               for k, v in job.items() if v is not None or k == "_environ"}
        return schedules.make(self, name, target, cron=cron, every=_seconds(every),
                              start=start, tz=tz, missed=missed,
                              missed_window=_seconds(missed_window), **job)[0]

    def schedules(self, *, after: str | None = None,
                  limit: int | None = None) -> builtins.list[Any]:
        """Every schedule with its rule in words, jobs pending and last outcome
        (``schedules.ScheduleInfo``), by name; a page of them: the names after ``after``, at
        most ``limit``."""
        from . import schedules

        return schedules.infos(self, after=after, limit=limit)

    def schedule_info(self, name: str) -> Any:
        """One schedule as ``schedules`` lists it (``schedules.ScheduleInfo``); raises
        ``ScheduleNotFound``."""
        from . import schedules

        return schedules.infos(self, name=_schedule_name(name))[0]

    def get_schedule(self, name: str) -> Schedule:
        """Raises ``ScheduleNotFound``."""
        from . import schedules

        return schedules.get(self, _schedule_name(name))

    def pause(self, name: str) -> Schedule:
        """Stop a schedule: its pending occurrence is cancelled (one being delivered ends as
        it will); ``resume`` makes it pending again, its missed policy then applies."""
        return self.store.pause_schedule(_schedule_name(name), self.clock.now())

    def resume(self, name: str) -> Schedule:
        """Undo ``pause``: the occurrence it held is pending again (in the next slot when its
        own passed; the missed policy then decides what fires)."""
        self._not_moved()
        return self.store.resume_schedule(_schedule_name(name), self.clock.now())

    def remove_schedule(self, name: str) -> CancelResult:
        """Delete a schedule; its pending occurrences are cancelled."""
        return self.store.remove_schedule(_schedule_name(name), self.clock.now())

    def next_occurrences(self, name: str, n: int = 10) -> builtins.list[datetime]:
        """The next ``n`` occurrences (nominal times, aware UTC), the pending one first."""
        from . import schedules

        return schedules.next_occurrences(self, _schedule_name(name), n)

    def run_schedule(self, name: str) -> RunSummary:
        """Fire ``name``'s target now, as ``run_now``: a job of the schedule beside its
        occurrences (``occurrence`` None), so it never collides with one; the schedule's
        pending occurrence stays as it is."""
        from . import schedules

        return schedules.run(self, _schedule_name(name))

    # -- changing -------------------------------------------------------------------------
    def cancel(self, ids: str | Iterable[str]) -> CancelResult:
        """Cancel jobs by id (or unique prefix). Jobs a runner is delivering now are left
        alone and listed in ``running``: their real outcome goes to history. The result's
        ``cancelled``, ``running`` and ``missing`` are job ids (``as_dict()`` for JSON)."""
        if isinstance(ids, str):
            ids = [ids]
        wanted = list(dict.fromkeys(self.resolve_id(i, strict=False) for i in ids))
        result = self.store.cancel(wanted, self.clock.now())
        self._drop_envelopes(result)
        return result

    def cancel_entity(self, entity: str, key: str | None = None) -> CancelResult:
        """Cancel every pending job of ``entity`` (and ``key``, when given); the result as
        ``cancel``'s: job ids."""
        _filters(entity, key)
        result = self.store.cancel_entity(entity, key, self.clock.now())
        self._drop_envelopes(result)
        return result

    def resolve_id(self, text: str, *, strict: bool = True) -> str:
        """A job id from what a user typed: any case, or a unique prefix of at least
        ``MIN_PREFIX`` characters. An ambiguous prefix raises ``InvalidInput`` listing the
        candidates; an unknown one ``JobNotFound`` (``strict``) or comes back as typed."""
        try:
            job_id = normalise(text)
        except ValueError as e:
            raise InvalidInput(str(e)) from None
        if len(job_id) >= 26 or not ID_PREFIX.fullmatch(job_id):
            return job_id
        if len(job_id) < MIN_PREFIX:
            raise InvalidInput(f"id {text!r} is too short: give the whole id or at least "
                               f"{MIN_PREFIX} characters")
        found = self.store.match_ids(job_id, 6)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            more = ", …" if len(found) > 5 else ""
            raise InvalidInput(f"id prefix {text!r} is ambiguous: "
                               f"{', '.join(found[:5])}{more}")
        if strict:
            raise JobNotFound(text)
        return job_id

    def _drop_envelopes(self, result: CancelResult) -> None:
        """The store has ended the cancelled jobs; their files go, and slots left empty with
        them. A file that stays is an orphan the next run of its slot removes."""
        self._drop_files([result.jobs[i] for i in result.cancelled])

    def _drop_files(self, jobs: builtins.list[Job]) -> None:
        """These jobs are no longer pending where they were: their files leave their slots
        (``SlotTree.settle``: a batch file once none of its jobs is left in the slot, and a
        slot left empty)."""
        by_slot: dict[datetime, list[str]] = {}
        for j in jobs:
            by_slot.setdefault(j.next_check_at, []).append(j.id)
        for slot, ids in by_slot.items():
            self.tree.settle(slot, ids, pending=self._pending_in(slot))

    def _pending_in(self, slot: datetime) -> Callable[[builtins.list[str]], set[str]]:
        """Which of some ids are pending in ``slot``."""
        def pending(ids: builtins.list[str]) -> set[str]:
            return {i for i, at in self.store.find(ids).items() if at == slot}

        return pending

    def reschedule(self, job_id: str, *, at: str | datetime | None = None,
                   in_: Duration | None = None) -> Job:
        """Move a pending job to ``at`` or ``in_`` from now (as ``add`` reads them); raises
        ``JobNotFound`` for a job that is not pending."""
        self.load_cluster()
        self._not_moved()
        now = self.clock.now()
        from .jobspec import due_time

        if isinstance(at, datetime):
            at = at.isoformat()
        due = due_time({"at": at, "in": _seconds(in_)}, now, self.settings, self.tz)
        job_id = self.resolve_id(job_id)
        old = self.get_pending(job_id)
        job = self.store.reschedule(job_id, slot_for(due, self.settings.resolution), now)
        self.tree.write(job)
        if old.next_check_at != job.next_check_at:
            self._drop_files([old])
        return job

    def retry(self, ids: str | Iterable[str]) -> list[Job]:
        """Re-arm ended jobs (the dead letter) into the next slot with fresh attempts."""
        self.load_cluster()
        self._not_moved()
        now = self.clock.now()
        out = []
        for job_id in [self.resolve_id(i) for i in ([ids] if isinstance(ids, str) else ids)]:
            job = self.store.retry(job_id, next_slot_after(now, self.settings.resolution), now)
            self.tree.write(job)
            out.append(job)
        return out

    # -- reading --------------------------------------------------------------------------
    def get(self, job_id: str) -> JobView:
        """The job (id or unique prefix), pending or ended, as a ``JobView``: ``state``,
        ``job`` (while pending), ``ended`` (its history rows), ``as_dict()`` for JSON. Raises
        ``JobNotFound``."""
        job_id = self.resolve_id(job_id)
        job = self.store.get(job_id)
        if job is not None:
            return JobView.of(job, [])
        rows = self.store.get_history(job_id)
        if not rows:
            raise JobNotFound(job_id)
        return JobView.of(None, rows)

    def get_pending(self, job_id: str) -> Job:
        """The pending job with this exact id; raises ``JobNotFound`` (saying so when it has
        ended)."""
        job = self.store.get(job_id)
        if job is None:
            if self.store.get_history(job_id):
                raise JobNotFound(f"{job_id} (it has ended; see `awty show {job_id}`)")
            raise JobNotFound(job_id)
        return job

    def executions(self, job_id: str) -> list[Execution]:
        """Every delivery attempt of a job (id or unique prefix), oldest first."""
        return self.store.executions(self.resolve_id(job_id))

    def list(self, *, status: str | None = None, slot: datetime | None = None,
             entity: str | None = None, key: str | None = None, kind: str | None = None,
             limit: int | None = None, until: datetime | None = None,
             after: tuple[datetime, str] | None = None) -> Iterator[Job]:
        """Pending jobs matching every filter given, in run order (``(next_check_at, id)``);
        ``after``: only those past that ``(next_check_at, id)`` (a page's cursor)."""
        _filters(entity, key)
        if after is not None:
            after = (to_utc(after[0], self.tz), after[1])
        return self.store.list(status=status, slot=self._utc(slot), until=self._utc(until),
                               entity=entity, key=key, kind=kind, limit=_limit(limit),
                               **({"after": after} if after is not None else {}))

    def count(self, *, status: str | None = None, slot: datetime | None = None,
              until: datetime | None = None, entity: str | None = None,
              key: str | None = None, kind: str | None = None) -> int:
        """How many pending jobs ``list`` with the same filters gives."""
        _filters(entity, key)
        return self.store.count(status=status, slot=self._utc(slot), until=self._utc(until),
                                entity=entity, key=key, kind=kind)

    def slots(self) -> builtins.list[tuple[datetime, int]]:
        """Slots that hold pending work, oldest first, with their number of jobs."""
        return self.store.slots_with_work()

    def history(self, *, outcome: str | None = None, entity: str | None = None,
                key: str | None = None, since: datetime | None = None,
                limit: int | None = None) -> builtins.list[HistoryRow]:
        """Ended jobs matching every filter given (``since``: ended at or after), newest
        first."""
        return list(self.iter_history(outcome=outcome, entity=entity, key=key, since=since,
                                      limit=limit))

    def iter_history(self, *, outcome: str | None = None, entity: str | None = None,
                     key: str | None = None, since: datetime | None = None,
                     limit: int | None = None) -> Iterator[HistoryRow]:
        """``history`` a row at a time, as the store reads them (memory stays flat however
        many)."""
        _filters(entity, key)
        return self.store.history(outcome=outcome, entity=entity, key=key,
                                  since=self._utc(since), limit=_limit(limit))

    def _utc(self, at: datetime | None) -> datetime | None:
        """A datetime a caller gave, as aware UTC: a naive one is local wall time (see the
        class docstring)."""
        return None if at is None else to_utc(at, self.tz)

    def parse_time(self, text: str) -> datetime:
        """A start for read commands: a duration ago (1d) or a time, read backwards
        (yesterday, monday, 9): ``when.parse_since``."""
        try:
            return parse_since(text, self.clock.now(), self.tz)
        except (ValueError, OverflowError) as e:
            raise InvalidInput(str(e)) from None

    def stats(self, *, window: timedelta = timedelta(days=1),
              next_slots: int = 5) -> StoreStats:
        """Pending work now and what ended or ran over the last ``window`` (the figures
        ``awty stats`` shows), with the first ``next_slots`` slots holding work."""
        if window <= timedelta(0):
            raise InvalidInput("window must be more than zero")
        self.load_cluster()
        now = self.clock.now()
        return self.store.stats(now=now, since=now - window,
                                current=current_slot(now, self.settings.resolution),
                                next_slots=next_slots)

    # -- serve's tokens (awty token) --------------------------------------------------------
    def new_token(self, name: str, scopes: str | Iterable[str], *,
                  allow_callbacks: Iterable[str] = (), exec_dir: str | None = None,
                  exec_env: Iterable[str] = (), rate: str | None = None
                  ) -> tuple[ApiToken, str]:
        """Make a token for ``awty serve``; returns its record and the token itself, which is
        never stored (only its SHA-256) nor shown again. ``Conflict`` for a name in use."""
        from . import tokens

        token = tokens.make(name, scopes, self.clock.now(), allow_callbacks=allow_callbacks,
                            exec_dir=exec_dir, exec_env=exec_env, rate=rate)
        secret = tokens.new_secret()
        self.store.add_token(token, tokens.hash_of(secret))
        return token, secret

    def tokens(self) -> builtins.list[ApiToken]:
        """Every token of ``awty serve``, by name (their hashes stay in the store)."""
        return self.store.tokens()

    def revoke_token(self, name: str) -> None:
        """Forget a token: every serve process refuses it from its next request on."""
        from . import tokens

        if not tokens.NAME.fullmatch(name) or not self.store.revoke_token(name):
            from .errors import AwtyError

            raise AwtyError(f"no token named {name!r} (`awty token list` shows them)")

    def set_token_env(self, name: str, exec_env: Iterable[str]) -> ApiToken:
        """Change what exec and python jobs added with token ``name`` run with
        (``NAME=VALUE`` items; none: the default PATH, HOME and LANG), pending ones included:
        a job reads its token's environment when it runs. ``InvalidInput`` for a bad item,
        ``AwtyError`` for no such token."""
        from . import tokens

        env = tokens.parse_env(exec_env)
        token = self.store.set_token_env(name, env) if tokens.NAME.fullmatch(name) else None
        if token is None:
            from .errors import AwtyError

            raise AwtyError(f"no token named {name!r} (`awty token list` shows them)")
        return token

    def token_for(self, secret: str) -> ApiToken | None:
        """The token ``secret`` is, else None (unknown or revoked)."""
        from .tokens import hash_of

        return self.store.token_for(hash_of(secret), self.clock.now())

    # -- moving a home ----------------------------------------------------------------------
    def export(self, out: IO[str], *, move_to: str | None = None) -> Moved:
        """Write pending jobs and history as JSON lines to ``out`` (``transfer``); returns the
        counts written. ``move_to`` (where the home goes: a URL, a path) first marks this home
        as moved there, so that no add or run here comes after the export (a database URL's
        password is not kept)."""
        from .transfer import export

        if move_to is not None:
            self._mark_moved(move_to)
        return export(self.store, out)

    def _mark_moved(self, to: str) -> None:
        to = config_mod.redact(to.strip())
        if not to:
            raise InvalidInput("--move: say where the home goes (a database URL or a path)")
        self.store.mark_moved(to, now=self.clock.now())

    def import_export(self, lines: Iterable[str], *, allow_exec: bool = False) -> Moved:
        """Load what ``export`` wrote (from either store) into this home's empty store;
        returns the counts, checked against the export's own. Every job is checked as ``add``
        checks it (this home's settings: payload size, callback rules), exec and python jobs
        refused unless ``allow_exec``; a refused record raises ``InvalidInput`` naming its line
        and field, and nothing is stored. Jobs and history go in together or not at all."""
        from .transfer import Trust, load

        self.load_cluster()  # the guards' defaults, the resolution: the cluster's
        trust = Trust(self.clock.now(), self.settings, allow_exec)
        return load(self.store, self.tree, self.where, lines, trust)

    # -- running --------------------------------------------------------------------------
    def runner(self) -> Runner:
        """A ``Runner`` for this home (what ``run_slot`` and ``catchup`` use)."""
        from .run.runner import Runner

        self.load_cluster()
        self._not_moved()
        settings = self.settings
        if not self.on_postgres and not set(settings.runner_kinds) >= ALL_KINDS:
            self.notes.append(f"runner_kinds ({', '.join(settings.runner_kinds)}) is for hosts "
                              "sharing a PostgreSQL store: a SQLite home's runs claim every "
                              "kind")
            settings = settings.replace(runner_kinds=tuple(k.value for k in Kind))
        return Runner(store=self.store, tree=self.tree, settings=settings, clock=self.clock,
                      secret=self.signing_secrets, log=self.logger, on_event=self.on_event)

    def signing_secrets(self) -> tuple[bytes, ...]:
        """The keys callbacks are signed with (``AWTY_SIGNING_SECRET``, else the file
        ``signing_secret_file`` names, one secret a line); () when unsigned. Raises
        InvalidInput when the secret cannot be read or is malformed (never showing it)."""
        from .signing import load_secrets

        return load_secrets(self.settings, self.env)

    def current_slot(self) -> datetime:
        """The slot ``now`` falls in."""
        self.load_cluster()
        return current_slot(self.clock.now(), self.settings.resolution)

    def run_slot(self, slot: datetime | None = None, *, shard: tuple[int, int] | None = None,
                 dry_run: bool = False) -> SlotSummary:
        """Fire one slot; by default the current one as cron does, then (bounded, see
        ``Runner.run_late``) the past slots still holding work, in ``late``: a machine back
        from sleep fires what it missed at its first run. ``shard=(i, n)`` runs the i-th of n
        shards. Raises ``Busy`` when another runner holds the slot."""
        from .run.attempts import RunOptions

        runner, opts = self.runner(), RunOptions(shard=shard, dry_run=dry_run)
        if slot is not None:
            return runner.run_slot(to_utc(slot, self.tz), opts)
        slot = self.current_slot()
        summary = runner.run_slot(slot, opts)
        if not dry_run:
            summary.late = runner.run_late(slot, opts)
        return summary

    def run_now(self, ids: str | Iterable[str]) -> RunSummary:
        """Fire these pending jobs now (``awty run ID…``), each as its slot's run would; ids
        as ``resolve_id`` reads them. All or nothing: an unknown or ended job, or one a
        runner is delivering, raises (``JobNotFound``, ``Conflict``) and nothing is sent;
        an ambiguous prefix raises ``InvalidInput``. A job answering "check again" is
        re-slotted as usual."""
        wanted = list(dict.fromkeys(
            self.resolve_id(i) for i in ([ids] if isinstance(ids, str) else ids)))
        if not wanted:
            raise InvalidInput("give at least one job id")
        kinds = self.settings.runner_kinds if self.on_postgres else tuple(ALL_KINDS)
        for job_id in wanted:
            job = self.get_pending(job_id)  # unknown or ended: say which before any claim
            if job.kind.value not in kinds:
                from .errors import Conflict

                raise Conflict(f"job {job_id} is a {job.kind.value} job and this host claims "
                               f"only {', '.join(kinds)} (runner_kinds): run it on a host "
                               f"that claims {job.kind.value} jobs")
        return self.runner().run_ids(wanted)

    def catchup(self, *, until: datetime | None = None, dry_run: bool = False,
                misfire: str | None = None, misfire_grace: float | None = None,
                on_slot: Callable[[datetime, int], None] | None = None) -> CatchupSummary:
        """Run every past slot holding work, oldest first, then the current one. ``misfire``
        (fire or skip) overrides the setting for jobs past their grace."""
        from .run.attempts import RunOptions

        if misfire not in (None, "fire", "skip"):
            raise InvalidInput("--misfire must be fire or skip")
        return self.runner().catchup(until=self._utc(until), on_slot=on_slot, opts=RunOptions(
            dry_run=dry_run, misfire=MisfirePolicy(misfire) if misfire else None,
            misfire_grace=misfire_grace))

    def logger(self) -> Logger:
        """The log file of this home (rotated by size)."""
        if self._log is None:
            from .logbook import open_log

            self._log = open_log(self.home, self.settings.log_max_bytes,
                                 self.settings.log_format)
        return self._log


def _seconds(value: Duration | None) -> str | float | None:
    """A timedelta as seconds; text and numbers go on to the one duration parser as given."""
    return value.total_seconds() if isinstance(value, timedelta) else value


def open_store(a: Awty, *, mode: str = "use") -> Store:
    """This home's store (``store.open`` of its ``StoreSpec``): PostgreSQL when ``a`` has a
    database URL (psycopg is imported only then), else SQLite in home. ``mode``: see
    ``store.MODES`` (only ``awty init`` creates or migrates a PostgreSQL schema, since many
    hosts share it; ``read`` never creates nor migrates anything)."""
    from . import store as store_mod

    spec = store_mod.StoreSpec.of(a.settings, a.home)
    if spec.kind == "postgres":
        _own_schema(a)
        _one_store(a)
    return store_mod.open(spec, mode=mode, one_shot=a.one_shot)


def _schedule_name(name: str) -> str:
    """A schedule named by a user, as ``add`` checked it: a name no schedule can have (one a
    store cannot even look up, such as undecodable argv bytes) is bad input."""
    from .recurrence import parse_name

    return parse_name(name)


def _filters(entity: str | None, key: str | None) -> None:
    from .jobspec import filter_text

    filter_text("entity", entity)
    filter_text("key", key)


# Past what SQLite's LIMIT and PostgreSQL's bigint hold (`list --limit 10**40` was a
# traceback): as good as no limit.
_NO_LIMIT = 2**62


def _limit(limit: int | None) -> int | None:
    if limit is not None and limit < 0:
        raise InvalidInput("limit must be 0 or more")
    return None if limit is None or limit >= _NO_LIMIT else limit


def _own_schema(a: Awty) -> None:
    """``public`` is where an application's own tables usually are: awty's beside them only
    when ``database_public_schema`` says so (a guess of the schema's name is refused)."""
    if a.settings.database_schema.lower() == "public" and not a.settings.database_public_schema:
        raise InvalidInput(f"{a.sources.get('database_schema')}: database_schema \"public\" "
                           "would put awty's tables beside the application's: name a schema of "
                           "awty's own (default awty), or set database_public_schema = true")


def _one_store(a: Awty) -> None:
    """A PostgreSQL home that still holds jobs in its own awty.db is refused, whatever the
    command: adding to one store and firing from the other is how a host splits from the
    cluster. One stat when there is no awty.db (the usual case); a database that was moved
    (``export --move``) holds leftovers, not jobs."""
    if not a.db_path.exists():
        return
    from .errors import StoreError
    from .store.sqlite import left_behind

    n, moved = left_behind(a.db_path)
    if n and not moved:
        url_from = a.sources.get("database_url") or "the settings"
        raise StoreError(
            f"{a.db_path} holds {n} pending job(s) and {url_from} names PostgreSQL: keep one "
            f"store: for PostgreSQL, move them there (`awty export --database-url '' --move "
            f"{config_mod.redact(a.settings.database_url or '')} -o jobs.jsonl`, then `awty "
            f"import jobs.jsonl`); for SQLite, drop database_url ({url_from})")


def ensure_home(home: Path) -> None:
    """Home is 0700 whatever the umask: it holds the database and may hold the secret."""
    if not home.exists():
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if (home.stat().st_mode & 0o777) != 0o700:
        try:
            os.chmod(home, 0o700)
        except OSError:
            pass
