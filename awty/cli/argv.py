"""The command line as people type it, put in the order Typer reads: pure list work, run
before any command module is imported.

- ``--home DIR``, ``--json`` and ``--utc`` before the command (``awty --home DIR list``, as git,
  docker and kubectl take them) move after it; a command that has no such option says so.
- ``--database-url URL`` anywhere before ``--`` is taken out (``take_database_url``): every
  command accepts it, as the AWTY_DATABASE_URL setting for this run.
- ``awty --version`` / ``-V`` is ``awty version``; ``awty help [CMD …]`` is ``awty [CMD …] --help``.
"""

from __future__ import annotations

# Set by the shell hook `awty completion SHELL` prints, when the shell asks for completions.
COMPLETE_VAR = "_AWTY_COMPLETE"
# Options every command that reads or changes a home accepts; the value-taking ones first.
GLOBAL_VALUED = ("--home", "--database-url")
GLOBAL_FLAGS = ("--json", "--utc")
# Commands that are groups: their sub-command name belongs to the command path.
GROUPS = ("secret", "schedule", "token")


def normalise(args: list[str]) -> list[str]:
    """``args`` (without the program name) rewritten as described above."""
    hoisted, i = _leading_globals(args)
    rest = args[i:]
    if rest[:1] and rest[0] in ("--version", "-V"):
        return ["version", *rest[1:]]
    if rest[:1] == ["help"]:
        return [*_words(rest[1:]), "--help"]
    if not hoisted or not rest or rest[0].startswith("-"):
        return args
    path = rest[:2] if rest[0] in GROUPS and len(rest) > 1 else rest[:1]
    return [*path, *hoisted, *rest[len(path):]]


def unpassable(args: list[str]) -> str | None:
    """A one-line complaint about the first argument no real command line can carry (a NUL
    byte, or text the file-system encoding cannot give back as bytes, such as a lone
    "\\ud800"), else None. Only a caller running the app in-process can pass one, and the
    option it lands in would fail in ``open()`` or the store rather than refuse it."""
    import os

    for n, a in enumerate(args, 1):
        try:
            os.fsencode(a)
            ok = "\0" not in a
        except UnicodeEncodeError:
            ok = False
        if not ok:
            shown = repr(a) if len(a) <= 40 else repr(a[:30]) + "…"
            return f"argument {n} {shown} holds a NUL byte or is not text"
    return None


def _leading_globals(args: list[str]) -> tuple[list[str], int]:
    hoisted: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in GLOBAL_VALUED and i + 1 < len(args):
            hoisted += args[i:i + 2]
            i += 2
        elif a.startswith(tuple(f"{o}=" for o in GLOBAL_VALUED)) or a in GLOBAL_FLAGS:
            hoisted.append(a)
            i += 1
        else:
            break
    return hoisted, i


def _words(args: list[str]) -> list[str]:
    """The command path named after ``help`` (options after it are ignored)."""
    out = []
    for a in args:
        if a.startswith("-"):
            break
        out.append(a)
    return out


def take_database_url(args: list[str]) -> tuple[list[str], str | None]:
    """``args`` without ``--database-url URL`` / ``--database-url=URL``, and the URL (the
    last one given). Arguments after ``--`` are left alone."""
    out: list[str] = []
    url = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i:]
            break
        if a == "--database-url" and i + 1 < len(args):
            url = args[i + 1]
            i += 2
            continue
        if a.startswith("--database-url="):
            url = a.split("=", 1)[1]
        else:
            out.append(a)
        i += 1
    return out, url
