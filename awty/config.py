"""Settings: ``<home>/awty.toml``, overridden by ``AWTY_<KEY>`` variables, overridden by flags.
Pure merge and validation; an unknown key or a bad value is an error naming where it came from."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .errors import InvalidInput
from .model import MisfirePolicy
from .slots import check_resolution, parse_duration

CONFIG_NAME = "awty.toml"


@dataclass(frozen=True)
class Settings:
    resolution: int = 15  # minutes; one of slots.RESOLUTIONS
    concurrency: int = 128  # callbacks in flight per runner
    per_host_concurrency: int = 32
    timeout: float = 30.0  # seconds per execution, wall clock
    max_checks: int = 5
    horizon: float = 7 * 86400.0
    max_attempts: int = 6
    backoff: tuple[float, ...] = (10.0, 30.0, 120.0, 600.0, 1800.0)
    quick_retries: int = 1  # in-run retries before a failure is re-slotted
    quick_retry_max_delay: float = 5.0  # only backoff steps up to this run in the same run
    max_payload_bytes: int = 4096
    max_delay: float = 365 * 86400.0
    max_response_bytes: int = 64 * 1024
    allowed_callbacks: tuple[str, ...] = ()
    deny_private_networks: bool = False
    signing_secret_file: str | None = None
    notify_command: str | None = None  # shell command run when a cron run has failures
    misfire: MisfirePolicy = MisfirePolicy.FIRE
    misfire_grace: float | None = None  # seconds; with misfire = "skip"
    breaker_threshold: int = 5  # failures (of the last 20, at least half) that open a breaker
    lease: float = 600.0  # seconds a claimed job stays with its runner before others may take it
    batch_size: int = 1000  # jobs claimed / recorded per transaction
    busy_timeout: float = 5.0  # seconds SQLite waits for a lock
    history_output_bytes: int = 2000
    log_max_bytes: int = 1_000_000
    dropin_kinds: tuple[str, ...] = ("http",)  # kinds a dropped-in envelope may create
    ca_file: str | None = None  # PEM bundle trusted for https callbacks, beside the system's
    exec_env: bool = True  # exec jobs run in the environment they were added in, as `at` does
    database_url: str | None = None  # postgresql://…: the PostgreSQL store instead of SQLite
    database_schema: str = "awty"  # the PostgreSQL schema holding awty's tables


_DURATION_KEYS = {"timeout", "horizon", "max_delay", "misfire_grace", "lease", "busy_timeout",
                  "quick_retry_max_delay"}
_INT_KEYS = {"resolution", "concurrency", "per_host_concurrency", "max_checks", "max_attempts",
             "quick_retries", "max_payload_bytes", "max_response_bytes", "breaker_threshold",
             "batch_size", "history_output_bytes", "log_max_bytes"}
# Sanity ceilings: past these a value is a typo, and would exhaust file descriptors or memory.
_INT_MAX = {"concurrency": 10_000, "per_host_concurrency": 10_000, "batch_size": 100_000,
            "quick_retries": 10, "max_checks": 1_000_000, "max_attempts": 1_000}
# Optional text settings, and what they hold (for the error message).
_TEXT_KEYS = {"signing_secret_file": "a file path", "ca_file": "a file path",
              "notify_command": "a shell command (a string)"}
KEYS = tuple(f.name for f in fields(Settings))
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # a PostgreSQL name, never quoted wrong


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
        if key == "dropin_kinds":
            items = value.split(",") if isinstance(value, str) else list(value)
            kinds = tuple(dict.fromkeys(str(x).strip().lower() for x in items if str(x).strip()))
            for k in kinds:
                if k not in ("http", "exec", "python"):
                    raise ValueError(f"{k!r} is not one of http, exec, python")
            return kinds
        if key in ("deny_private_networks", "exec_env"):
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("1", "true", "yes", "on"):
                return True
            if s in ("0", "false", "no", "off", ""):
                return False
            raise ValueError("must be true or false")
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
            return value
    except (ValueError, TypeError, OverflowError) as e:  # OverflowError: int(inf)
        detail = f" ({e})" if str(e) else ""
        raise InvalidInput(f"{where}: bad value {value!r}{detail}") from None
    raise InvalidInput(f"{where}: unknown setting")


def read_toml(home: Path) -> dict[str, Any]:
    path = home / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read ({e.strerror})") from None
    if all(not line.strip() or line.lstrip().startswith(b"#") for line in raw.splitlines()):
        return {}  # only comments (the file `init` writes): skip tomllib's ~10 ms import
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{path}: not valid TOML ({e})") from None
    return data


def load(home: Path, env: Mapping[str, str] | None = None, flags: dict[str, Any] | None = None,
         *, file_data: dict[str, Any] | None = None) -> Settings:
    """Merge defaults < awty.toml < AWTY_* environment < flags, validating every value."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    data = read_toml(home) if file_data is None else file_data
    source = str(home / CONFIG_NAME)
    for key, value in data.items():
        if key not in KEYS:
            raise InvalidInput(f"{source}: unknown setting {key!r} (known: {', '.join(KEYS)})")
        values[key] = _coerce(key, value, source)
    for key in KEYS:
        name = f"AWTY_{key.upper()}"
        if name in env and env[name] != "":
            values[key] = _coerce(key, env[name], name)
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key not in KEYS:
            raise InvalidInput(f"--{key.replace('_', '-')}: unknown setting")
        values[key] = _coerce(key, value, "--" + key.replace("_", "-"))
    return replace(Settings(), **values)


def default_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("AWTY_HOME"):
        return Path(env["AWTY_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "awty"


TEMPLATE = """\
# awty settings. Every key may also be set as AWTY_<KEY> in the environment.
# resolution = 15            # minutes between slots: 1 2 3 4 5 6 10 12 15 20 30 60
# concurrency = 128          # callbacks in flight per runner
# per_host_concurrency = 32
# timeout = "30s"            # wall-clock deadline per execution
# max_checks = 5             # re-checks a job may ask for before it ends as expired
# horizon = "7d"             # a re-check beyond now + horizon ends the job
# max_attempts = 6           # attempts for retryable failures, then the job fails
# backoff = ["10s", "30s", "2m", "10m", "30m"]
# max_payload_bytes = 4096
# max_delay = "365d"
# allowed_callbacks = ["https://hooks.example.com/"]   # empty: any http(s) URL
# deny_private_networks = false   # true refuses loopback and private ranges too
# signing_secret_file = "/etc/awty/secret"              # or AWTY_SIGNING_SECRET
# notify_command = 'mail -s "$1" me@example.com'        # run when a cron run has failures
# misfire = "fire"           # or "skip": after downtime, jobs later than misfire_grace expire
# misfire_grace = "1h"
# dropin_kinds = ["http"]    # kinds an envelope dropped into slots/ may create
# ca_file = "/etc/awty/ca.pem"   # trust this CA for https callbacks (default: the system's)
# exec_env = true            # exec jobs run with the environment of their `add`, as `at` does
# database_url = "postgresql://awty@db.example.com/awty"  # several hosts: PostgreSQL store
# database_schema = "awty"
"""
