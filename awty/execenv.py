"""The environment an ``exec`` job runs in: recorded at ``add`` and restored at run time, as
``at`` does, so that a job added from a shell with ``mytool`` on PATH and ``MYVAR`` exported
finds both under cron's bare environment.

Never recorded: variables whose name looks like a secret (``SECRET_MARKERS``: the database of
jobs is no place for credentials), and the ones that describe the adding shell rather than the
job (``VOLATILE``, the same list ``at`` skips, plus the working directory's, which is kept as
the job's ``cwd``). The record is capped at ``MAX_BYTES``; past it the largest variables are
left out (PATH never) and their names listed in ``AWTY_ENV_DROPPED`` so the job (and ``show``)
can see what is missing."""

from __future__ import annotations

from collections.abc import Mapping

SECRET_MARKERS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL",
                  "AUTH", "COOKIE", "PRIVATE", "AWTY_SIGNING")
VOLATILE = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "TERM", "DISPLAY", "COLUMNS", "LINES"})
MAX_BYTES = 64 * 1024  # of NAME=value text: what a shell's environment usually stays under
DROPPED = "AWTY_ENV_DROPPED"


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS)


def capture(environ: Mapping[str, str], limit: int = MAX_BYTES) -> dict[str, str]:
    """What to record of ``environ`` for an exec job (see the module's docstring)."""
    env = {k: v for k, v in environ.items()
           if k not in VOLATILE and not is_secret(k) and "\0" not in k + v and _text(k + v)}
    size = sum(_size(k, v) for k, v in env.items())
    if size <= limit:
        return env
    dropped = []
    for name in sorted(env, key=lambda k: -_size(k, env[k])):
        if size <= limit - 1024:  # room for the list of what was left out
            break
        if name == "PATH":
            continue
        size -= _size(name, env.pop(name))
        dropped.append(name)
    env[DROPPED] = ",".join(sorted(dropped))[:1000]
    return env


def restore(recorded: Mapping[str, str] | None, ours: Mapping[str, str],
            never: tuple[str, ...]) -> dict[str, str]:
    """The base environment of a job's process: what was recorded at add, else ours; never the
    names in ``never`` (the signing secret and where it lives)."""
    base = ours if recorded is None else recorded
    return {k: v for k, v in base.items() if k not in never}


def _size(name: str, value: str) -> int:
    return len(name.encode()) + len(value.encode()) + 2


def _text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes (surrogateescape): cannot be stored
        return False
    return True
