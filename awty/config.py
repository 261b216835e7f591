"""Settings: ``<home>/awty.toml``, overridden by ``AWTY_<KEY>`` variables, overridden by flags.
Pure merge and validation; an unknown key or a bad value is an error naming where it came from."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from .errors import InvalidInput
from .model import MisfirePolicy
from .record import Record, _draft, _seal
from .slots import check_resolution, format_duration, parse_duration

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

CONFIG_NAME = "awty.toml"
SECRET_NAME = "signing.secret"  # the secret `awty init` writes when none is configured


# Every setting: (name, default, what the awty.toml template says of it, and the TOML text of
# an example value when the default is not one worth showing). ``TEMPLATE`` is generated from
# these: a new setting documents itself there. ``Settings`` below declares each one's type.
FIELDS: tuple[tuple[str, Any, str, str | None], ...] = (
    ("resolution", 15, "minutes between slots: 1 2 3 4 5 6 10 12 15 20 30 60", None),
    ("concurrency", 128, "callbacks in flight per runner", None),
    ("per_host_concurrency", 32, "callbacks in flight per host", None),
    ("timeout", 30.0, "wall-clock deadline per execution", None),
    ("max_checks", 5, "re-checks a job may ask for before it ends as expired", None),
    ("horizon", 7 * 86400.0, "a re-check beyond now + horizon ends the job", None),
    ("max_attempts", 6, "attempts for retryable failures, then the job fails", None),
    ("backoff", (10.0, 30.0, 120.0, 600.0, 1800.0), "delays between attempts", None),
    ("quick_retries", 1, "in-run retries of a check's first failure (later ones back off)",
     None),
    ("quick_retry_max_delay", 5.0, "only backoff steps up to this run in the same run", None),
    ("max_payload_bytes", 4096, "largest payload accepted at add", None),
    ("max_delay", 365 * 86400.0, "furthest due time accepted at add", None),
    ("max_response_bytes", 64 * 1024, "response bytes read per callback", None),
    ("allowed_callbacks", (), "URL prefixes callbacks must start with (empty: any http(s) URL)",
     '["https://hooks.example.com/"]'),
    ("deny_private_networks", False, "true refuses loopback and private ranges too", None),
    ("signing_secret_file", None, "a 0600 file of whsec_… secrets, one a line (init writes "
     "one; or AWTY_SIGNING_SECRET)",
     '"/etc/awty/secret"'),
    ("notify_command", None, "shell command run when a cron run has failures",
     """'mail -s "$1" me@example.com'"""),
    ("metrics_file", None, "run-slot and catchup write `awty metrics`' text here after each "
     "run, atomically (node_exporter's textfile collector; the serve extra)",
     '"/var/lib/node_exporter/textfile/awty.prom"'),
    ("misfire", MisfirePolicy.FIRE, 'or "skip": after downtime, jobs later than misfire_grace '
     "expire", '"fire"'),
    ("misfire_grace", None, "with misfire = \"skip\" (default: one slot)", '"1h"'),
    ("breaker_threshold", 5, "failures (of the last 20, at least half) that open a breaker",
     None),
    ("lease", 600.0, "how long a claimed job stays with its runner before others may take it",
     None),
    ("batch_size", 1000, "jobs claimed / recorded per transaction", None),
    ("busy_timeout", 5.0, "how long SQLite waits for a lock", None),
    ("history_output_bytes", 2000, "output kept per history row", None),
    ("log_max_bytes", 1_000_000, "awty.log size before it rotates", None),
    ("log_format", "text", 'or "json": awty.log as one JSON object a line (time, level, host, '
     "pid, command, slot, job, outcome, message), for a log shipper", '"text"'),
    ("dropin_kinds", ("http",), "kinds an envelope dropped into slots/ may create", None),
    ("runner_kinds", ("http", "exec", "python"), "kinds this host's runs claim (PostgreSQL: "
     "keep exec and python jobs on the hosts that can run them)", '["http"]'),
    ("ca_file", None, "PEM bundle trusted for https callbacks, beside the system's",
     '"/etc/awty/ca.pem"'),
    ("exec_env", True, "exec jobs run in the environment they were added in, as `at` does",
     None),
    ("exec_env_allow", (), "variables an exec job keeps although they look like secrets "
     "(names, or prefixes ending in *)", '["MY_APP_KEY", "GIT_*"]'),
    ("database_url", None, "several hosts: the PostgreSQL store instead of SQLite",
     '"postgresql://awty@db.example.com/awty"'),
    ("database_schema", "awty", "the PostgreSQL schema holding awty's tables", None),
    ("database_public_schema", False, "true lets database_schema be \"public\", beside the "
     "application's tables", None),
    ("database_pool_size", 4, "PostgreSQL connections a process keeps open at most", None),
    ("database_connect_timeout", 5.0, "how long a PostgreSQL connection may take to open",
     None),
    ("store_process", "auto", "a run's store work in a process of its own: auto (big slots "
     "and catch-ups on SQLite; not on PostgreSQL, where it does not pay), on, off", '"auto"'),
)
KEYS = tuple(f[0] for f in FIELDS)
# The settings every host of a cluster must agree on (a job added on one host is slotted,
# retried and ended by the runners of others): on PostgreSQL they live in the database,
# written by `awty init`, changed by `awty config --cluster`, read by every host.
CLUSTER_KEYS = ("resolution", "backoff", "max_checks", "horizon", "max_attempts", "max_delay")
DEFAULTS: dict[str, Any] = {f[0]: f[1] for f in FIELDS}


class Settings(Record):
    """Every setting (``FIELDS`` has their defaults and docs). ``Settings(**values)``: the
    defaults, with ``values`` in their place (checked by ``load``, not here)."""

    __slots__ = KEYS
    resolution: int
    concurrency: int
    per_host_concurrency: int
    timeout: float
    max_checks: int
    horizon: float
    max_attempts: int
    backoff: tuple[float, ...]
    quick_retries: int
    quick_retry_max_delay: float
    max_payload_bytes: int
    max_delay: float
    max_response_bytes: int
    allowed_callbacks: tuple[str, ...]
    deny_private_networks: bool
    signing_secret_file: str | None
    notify_command: str | None
    metrics_file: str | None
    misfire: MisfirePolicy
    misfire_grace: float | None
    breaker_threshold: int
    lease: float
    batch_size: int
    busy_timeout: float
    history_output_bytes: int
    log_max_bytes: int
    log_format: str
    dropin_kinds: tuple[str, ...]
    runner_kinds: tuple[str, ...]
    ca_file: str | None
    exec_env: bool
    exec_env_allow: tuple[str, ...]
    database_url: str | None
    database_schema: str
    database_public_schema: bool
    database_pool_size: int
    database_connect_timeout: float
    store_process: str

    def __new__(cls, *args: Any, **values: Any) -> Settings:
        if args:  # positional, in KEYS order (pickle, copy)
            values = {**dict(zip(KEYS, args, strict=False)), **values}
        unknown = set(values) - DEFAULTS.keys()
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        s = _draft(cls)
        for key, default in DEFAULTS.items():
            setattr(s, key, values.get(key, default))
        return _seal(s, cls)


_DURATION_KEYS = {"timeout", "horizon", "max_delay", "misfire_grace", "lease", "busy_timeout",
                  "quick_retry_max_delay", "database_connect_timeout"}
_INT_KEYS = {"resolution", "concurrency", "per_host_concurrency", "max_checks", "max_attempts",
             "quick_retries", "max_payload_bytes", "max_response_bytes", "breaker_threshold",
             "batch_size", "history_output_bytes", "log_max_bytes", "database_pool_size"}
# Sanity ceilings: past these a value is a typo, and would exhaust file descriptors or memory.
_INT_MAX = {"concurrency": 10_000, "per_host_concurrency": 10_000, "batch_size": 100_000,
            "quick_retries": 10, "max_checks": 1_000_000, "max_attempts": 1_000,
            "database_pool_size": 100}
# Optional text settings, and what they hold (for the error message).
_TEXT_KEYS = {"signing_secret_file": "a file path", "ca_file": "a file path",
              "notify_command": "a shell command (a string)",
              "metrics_file": "a file path"}
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*\*?"  # a variable name, or a prefix ending in *
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # a PostgreSQL name, never quoted wrong
SYSTEM_SCHEMA = "a PostgreSQL system schema: name one of awty's own, e.g. awty"


def system_schema(name: str) -> bool:
    """A schema PostgreSQL keeps for itself (its catalogs, TOAST, the SQL standard's views):
    awty's tables there would be the server's business, or refused half-way through init."""
    lower = name.lower()
    return lower == "information_schema" or lower.startswith("pg_")


def _coerce(key: str, value: Any, source: str) -> Any:
    where = f"{source}: {key}"
    try:
        if key in _INT_KEYS:
            if isinstance(value, bool):
                raise ValueError
            n = int(value)
            if isinstance(value, float) and n != value:
                raise ValueError
            if key == "resolution":
                check_resolution(n)
            elif n < (0 if key == "quick_retries" else 1):
                raise ValueError("must be positive")
            elif n > _INT_MAX.get(key, 1 << 40):
                raise ValueError(f"at most {_INT_MAX.get(key, 1 << 40)}")
            return n
        if key in _DURATION_KEYS:
            secs = parse_duration(value)
            if secs <= 0 and key != "quick_retry_max_delay":
                raise ValueError("must be more than zero")
            return secs
        if key == "backoff":
            items = value.split(",") if isinstance(value, str) else list(value)
            steps = tuple(parse_duration(x) for x in items if str(x).strip())
            if not steps:
                raise ValueError("needs at least one duration")
            return steps
        if key == "allowed_callbacks":
            items = value.split(",") if isinstance(value, str) else list(value)
            prefixes = tuple(str(x).strip() for x in items if str(x).strip())
            for p in prefixes:
                if not p.startswith(("http://", "https://")):
                    raise ValueError(f"{p!r} is not an http(s) URL prefix")
            return prefixes
        if key in ("dropin_kinds", "runner_kinds"):
            items = value.split(",") if isinstance(value, str) else list(value)
            kinds = tuple(dict.fromkeys(str(x).strip().lower() for x in items if str(x).strip()))
            for k in kinds:
                if k not in ("http", "exec", "python"):
                    raise ValueError(f"{k!r} is not one of http, exec, python")
            return kinds
        if key == "exec_env_allow":
            items = value.split(",") if isinstance(value, str) else list(value)
            allow = tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))
            for name in allow:
                if not re.fullmatch(ENV_NAME, name):
                    raise ValueError(f"{name!r} is not a variable name (or a prefix ending in *)")
            return allow
        if key in ("deny_private_networks", "exec_env", "database_public_schema"):
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("1", "true", "yes", "on"):
                return True
            if s in ("0", "false", "no", "off", ""):
                return False
            raise ValueError("must be true or false")
        if key == "log_format":
            s = str(value).strip().lower()
            if s not in ("text", "json"):
                raise ValueError("must be 'text' or 'json'")
            return s
        if key == "store_process":
            s = str(value).strip().lower()
            if s not in ("auto", "on", "off"):
                raise ValueError("must be 'auto', 'on' or 'off'")
            return s
        if key == "misfire":
            s = str(value).strip().lower()
            if s not in ("fire", "skip"):
                raise ValueError("must be 'fire' or 'skip'")
            return MisfirePolicy(s)
        if key in _TEXT_KEYS:
            if value in (None, ""):
                return None
            if not isinstance(value, str):
                raise ValueError(f"must be {_TEXT_KEYS[key]}")
            return value
        if key == "database_url":
            if value in (None, ""):
                return None
            if not isinstance(value, str) or not value.startswith(("postgresql://",
                                                                    "postgres://")):
                raise ValueError("must be a postgresql:// URL")
            return value
        if key == "database_schema":
            if not isinstance(value, str) or not SCHEMA_NAME.fullmatch(value):
                raise ValueError("must be a plain SQL name (letters, digits, _)")
            if system_schema(value):
                raise ValueError(SYSTEM_SCHEMA)
            return value
    except (ValueError, TypeError, OverflowError) as e:  # OverflowError: int(inf)
        detail = f" ({e})" if str(e) else ""
        shown = redact(value) if key == "database_url" and isinstance(value, str) else value
        raise InvalidInput(f"{where}: bad value {shown!r}{detail}") from None
    raise InvalidInput(f"{where}: unknown setting")


# a URL's password: ``scheme://user:password@`` and ``password=`` (compiled when first used)
_PASSWORD_IN_URL = r"(?i)^([a-z][a-z0-9+.-]*://[^/?#@:]*:)[^/?#]*@"
_PASSWORD_PARAM = r"(?i)([?&]password=)[^&#]*"


def url_passwords(url: str) -> list[str]:
    """The password a database URL holds (``user:secret@``, ``password=``), as written and
    percent-decoded: what a message quoting the URL (a parse error) must not show."""
    from urllib.parse import unquote

    found = [m.group(0)[len(m.group(1)):-1] for m in [re.match(_PASSWORD_IN_URL, url)] if m]
    found += [m.group(0)[len(m.group(1)):] for m in re.finditer(_PASSWORD_PARAM, url)]
    return [p for w in found if w for p in dict.fromkeys((w, unquote(w)))]


def redact(url: str) -> str:
    """A database URL fit to print or log: the password (``user:secret@`` or ``password=``)
    shown as ``***``. libpq reads passwords from PGPASSWORD or ~/.pgpass too, which never
    appear in a URL."""
    return re.sub(_PASSWORD_PARAM, r"\1***", re.sub(_PASSWORD_IN_URL, r"\1***@", url))


def read_toml(home: Path) -> dict[str, Any]:
    path = home / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read ({e.strerror})") from None
    simple = _simple_toml(raw)
    if simple is not None:  # the file `init` writes: skip tomllib's ~10 ms import
        return simple
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{path}: not valid TOML ({e})") from None
    return data


# The lines `init` writes, and most hand-written ones: a key, and a string without escapes, an
# integer or a boolean; a comment may follow.
# The lines `init` writes, and most hand-written ones: a key, and a string without escapes, an
# integer or a boolean; a comment may follow. Compiled on first use (``_simple_line``): most
# homes' awty.toml holds comments only, and `awty add` would pay for the compile.
_SIMPLE_LINE = (r'[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*(?:"([^"\\\x00-\x1f\x7f]*)"|'
                r"(-?(?:0|[1-9][0-9]*))|(true|false))[ \t]*(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?")
# What TOML allows nowhere in a comment.
_CONTROL = frozenset(map(chr, [*range(0x09), *range(0x0A, 0x20), 0x7F]))


def _simple_toml(raw: bytes) -> dict[str, Any] | None:
    """``raw`` read without tomllib when every line is blank, a comment or a simple line (see
    ``_SIMPLE_LINE``); None when it needs the real parser (which also says what is wrong:
    bytes that are not UTF-8, a key given twice…)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text.replace("\r\n", ""):
        return None  # a lone carriage return
    out: dict[str, Any] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        stripped = line.strip(" \t")
        if not stripped:
            continue
        if stripped.startswith("#"):
            if not _CONTROL.isdisjoint(stripped):
                return None
            continue
        m = re.fullmatch(_SIMPLE_LINE, line)
        if m is None:
            return None
        key, string, number, flag = m.groups()
        if key in out:
            return None
        out[key] = (string if string is not None else
                    int(number) if number is not None else flag == "true")
    return out


def load(home: Path, env: Mapping[str, str] | None = None, flags: dict[str, Any] | None = None,
         *, file_data: dict[str, Any] | None = None,
         sources: dict[str, str] | None = None) -> Settings:
    """Merge defaults < awty.toml < AWTY_* environment < flags, validating every value.
    ``sources``, when given, is filled with where each setting not left at its default came
    from: the file's path, the variable's name, or the flag (``--database-url``)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    where = {} if sources is None else sources
    data = read_toml(home) if file_data is None else file_data
    source = str(home / CONFIG_NAME)
    for key, value in data.items():
        if key not in KEYS:
            raise InvalidInput(f"{source}: unknown setting {key!r} (known: {', '.join(KEYS)})")
        values[key], where[key] = _coerce(key, value, source), source
    for key in KEYS:
        name = f"AWTY_{key.upper()}"
        if name in env and env[name] != "":
            values[key], where[key] = _coerce(key, env[name], name), name
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key not in KEYS:
            raise InvalidInput(f"--{key.replace('_', '-')}: unknown setting")
        flag = "--" + key.replace("_", "-")
        values[key], where[key] = _coerce(key, value, flag), flag
    return Settings(**values)


def file_value(home: Path, key: str, data: dict[str, Any]) -> Any:
    """The value awty.toml's ``data`` (``read_toml``) gives ``key``, checked as ``load``
    checks it; None when the file does not name it."""
    if key not in data:
        return None
    return getattr(load(home, {}, file_data={key: data[key]}), key)


def cluster_values(settings: Settings) -> dict[str, Any]:
    """``settings``' cluster settings as a store keeps them (JSON: numbers, seconds)."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in ((k, getattr(settings, k)) for k in CLUSTER_KEYS)}


def read_cluster(stored: Mapping[str, Any], source: str = "the cluster's settings"
                 ) -> dict[str, Any]:
    """Cluster settings a store keeps, checked as awty.toml's are; keys this awty does not
    share across hosts (a newer one's) are left out."""
    return {k: _coerce(k, stored[k], source) for k in CLUSTER_KEYS if k in stored}


def shown(key: str, value: Any) -> str:
    """A setting's value as a person writes it (``15``, ``7d``, ``10s, 30s, 2m``), a
    database URL's password hidden."""
    if value is None:
        return "-"
    if key == "database_url":
        return redact(value)
    return _toml(key, value).replace('"', "").strip("[]")


def from_file(source: str | None) -> bool:
    """Did a setting whose ``sources`` entry is this come from awty.toml (or its default)?"""
    return source is None or source.endswith(CONFIG_NAME)


def default_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("AWTY_HOME"):
        return Path(env["AWTY_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "awty"


def _toml(key: str, value: Any) -> str:
    """A default as the TOML text a user would write for it."""
    if isinstance(value, MisfirePolicy):
        return f'"{value.value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(key, v) for v in value) + "]"
    if key in _DURATION_KEYS or key == "backoff":
        return f'"{format_duration(value)}"'
    if isinstance(value, str):
        return toml_string(value)
    return str(value)


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's)."""
    import json

    return json.dumps(text, ensure_ascii=False)


def toml_line(key: str, value: Any) -> str:
    """``key = value`` as awty.toml holds it (what ``init`` writes for a setting it keeps)."""
    return f"{key} = {_toml(key, value)}"


def template(values: Mapping[str, Any] | None = None) -> str:
    """The commented awty.toml ``init`` writes: every setting, commented out with its default
    (or an example), but those in ``values``, written out (``database_url`` given to
    ``init``)."""
    values = values or {}
    lines = ["# awty settings. Every key may also be set as AWTY_<KEY> in the environment."]
    for name, default, doc, example in FIELDS:
        if name in values:
            lines.append(toml_line(name, values[name]).ljust(40) + f"  # {doc}")
            continue
        shown = example or _toml(name, default)
        lines.append(f"# {name} = {shown}".ljust(40) + f"  # {doc}")
    return "\n".join(lines) + "\n"


TEMPLATE = template()
