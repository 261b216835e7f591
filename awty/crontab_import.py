"""Reading a user's crontab for ``awty schedule import-crontab``: each line becomes an exec
schedule, or is named with the reason it cannot be one. Pure: text in, records out.

Read as cron reads a user crontab (crontab(5), Vixie/Debian and cronie):

- blank lines and lines starting with ``#`` are skipped;
- ``NAME = value`` sets a variable for the commands on the lines after it (quotes around the
  value are removed); ``CRON_TZ`` (cronie) is the zone of the schedules after it, ``SHELL`` the
  shell their commands run in (awty's exec jobs run ``/bin/sh -c``: another shell is kept by
  running it from sh); the rest become the jobs' environment;
- five fields and a command, or an ``@`` shorthand and a command.

Not carried over, each with its reason: ``@reboot`` (not a schedule), a command with an
unescaped ``%`` (cron turns it into a newline and the rest into standard input; ``\\%`` is a
plain ``%`` and is carried over as one), a line of six time fields (seconds), a field awty does
not read (unknown names, Quartz's ``L W #``), and awty's own lines (run-slot and catch-up, which
stay in cron). System crontabs (``/etc/crontab``, ``/etc/cron.d``) have a user field after the
time fields, which this reader would take for the command: import a user's crontab.
"""

from __future__ import annotations

import re
import shlex

from .errors import InvalidInput
from .record import Record, _draft, _seal
from .recurrence import parse_cron, parse_zone

_ENV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
# A sixth field of numbers, ranges, lists, steps or day names: seconds-first lines (some
# schedulers read six fields) put the command after it, where cron would run it as the command.
_TIME_FIELD = re.compile(r"(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?(,(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?)*")
_MARKER = " # awty:"  # the end of every line ``awty crontab --install`` writes
SH = "/bin/sh"
# Words that run the command after them: the schedule is named after that command.
_WRAPPERS = {"sudo", "nice", "ionice", "nohup", "env", "exec", "time", "chronic", "flock",
             "timeout", "setlock", "run-one", "cronic", "systemd-cat", "caffeinate"}
_PRELUDES = {"cd", "source", ".", "export", "umask", "ulimit", "set", "sleep"}
_INTERPRETERS = re.compile(r"(python|php|perl|ruby|node|bash|sh|zsh|dash)[0-9.]*")


class Entry(Record):
    """One crontab line that becomes an exec schedule."""

    __slots__ = ("line", "name", "cron", "command", "zone", "env")
    line: int  # 1-based, in the text read
    name: str  # derived from the command, unique within the text
    cron: str  # five fields, as ``recurrence.parse_cron`` spells them
    command: str  # for ``/bin/sh -c``
    zone: str | None  # CRON_TZ in force (None: the importing user's zone, as cron's own)
    env: dict[str, str]  # the NAME=value lines in force before it, in order

    def __new__(cls, line: int, name: str, cron: str, command: str, zone: str | None,
                env: dict[str, str]) -> Entry:
        s = _draft(cls)
        s.line = line
        s.name = name
        s.cron = cron
        s.command = command
        s.zone = zone
        s.env = env
        return _seal(s, cls)


class Refused(Record):
    """A crontab line that cannot be carried over, and why."""

    __slots__ = ("line", "text", "reason")
    line: int
    text: str
    reason: str

    def __new__(cls, line: int, text: str, reason: str) -> Refused:
        s = _draft(cls)
        s.line = line
        s.text = text
        s.reason = reason
        return _seal(s, cls)


def read_crontab(text: str, taken: set[str] | frozenset[str] = frozenset()
                 ) -> tuple[list[Entry], list[Refused]]:
    """The schedules ``text`` holds and the lines refused, both in line order. Names are
    unique among themselves and not in ``taken`` (the schedules that exist already)."""
    entries: list[Entry] = []
    refused: list[Refused] = []
    env: dict[str, str] = {}
    shell = SH
    zone: str | None = None
    used = set(taken)
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if _MARKER in s:
            refused.append(Refused(n, s, "awty's own line (it stays in cron)"))
            continue
        var = _ENV.fullmatch(s)
        if var and not s[0].isdigit():
            name, value = var.group(1), _unquote(var.group(2).strip())
            if name == "CRON_TZ":
                try:
                    zone = parse_zone(value) if value else None
                except InvalidInput:
                    refused.append(Refused(n, s, f"CRON_TZ: unknown time zone {value!r}; "
                                                 "the lines after it keep the zone before"))
                continue
            if name == "SHELL":
                shell = value or SH
                continue
            env[name] = value
            continue
        got = _entry(n, s, shell, zone, env)
        if isinstance(got, Refused):
            refused.append(got)
            continue
        name = _unique(name_for(got.command), used)
        used.add(name)
        entries.append(got.replace(name=name))
    return entries, refused


def _entry(n: int, s: str, shell: str, zone: str | None, env: dict[str, str]
           ) -> Entry | Refused:
    if s.startswith("@"):
        word, _, command = s.partition(" ")
        fields = word
        if word.lower() == "@reboot":
            return Refused(n, s, "@reboot runs at boot, not on a schedule: keep it in cron")
    else:
        parts = s.split(None, 5)
        if len(parts) < 6:
            return Refused(n, s, "not a crontab entry (five time fields, then a command)")
        fields, command = " ".join(parts[:5]), parts[5]
        sixth = command.split(None, 1)
        if len(sixth) == 2 and _TIME_FIELD.fullmatch(sixth[0]):
            return Refused(n, s, "six time fields (a seconds field): cron has none, and awty "
                                 "fires at slot resolution")
    command = command.strip()
    if not command:
        return Refused(n, s, "no command")
    if re.search(r"(?<!\\)%", command):
        return Refused(n, s, "a % in the command: cron sends what follows it to standard "
                             "input, which an exec schedule cannot carry (write \\% for a %)")
    try:
        cron = parse_cron(fields)
    except InvalidInput as e:
        return Refused(n, s, str(e))
    command = command.replace("\\%", "%")
    if shell != SH:
        command = f"exec {shlex.quote(shell)} -c {shlex.quote(command)}"
    return Entry(n, "", cron, command, zone, dict(env))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def name_for(command: str) -> str:
    """A schedule name from a command: the program it runs (past ``cd … &&``, variable
    assignments and wrappers such as ``nice`` or ``flock FILE``; for an interpreter, its script
    or ``-m`` module), then its first plain argument (``manage.py clearsessions`` ->
    ``manage-clearsessions``), or for curl and wget the host called. The same command always
    gives the same name."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an open quote
        words = command.split()
    words = _skip_wrappers(_last_command(words))
    if not words:
        return "job"
    program, args = words[0], words[1:]
    base = program.rsplit("/", 1)[-1]
    if _INTERPRETERS.fullmatch(base):
        while args and args[0].startswith("-") and args[0] != "-m":
            if re.fullmatch(r"-[a-z]*c[a-z]*", args[0]) and len(args) > 1:
                return name_for(args[1])  # sh -c 'the command': named after it
            args = args[1:]
        if args[:1] == ["-m"] and len(args) > 1:
            program, base, args = args[1], _slug(args[1]), args[2:]
        elif args and not args[0].startswith("-"):
            program, args = args[0], args[1:]
            base = program.rsplit("/", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    stem = _slug(stem if dot and ext.lower() in _SCRIPT_EXTENSIONS else base) or "job"
    url = next((a for a in args if a.startswith(("http://", "https://"))), None)
    if base in ("curl", "wget") and url:
        stem = f"{stem}-{_slug(url.split('/')[2].split('@')[-1].split(':')[0])}"
    elif args and re.fullmatch(r"[A-Za-z][A-Za-z0-9_:.-]*", args[0]):
        stem = f"{stem}-{_slug(args[0])}"
    return stem[:48].strip("-") or "job"


_SCRIPT_EXTENSIONS = {"sh", "bash", "py", "php", "pl", "rb", "js", "ts"}


def _skip_wrappers(words: list[str]) -> list[str]:
    """The words from the program that does the work: past ``VAR=value`` and wrappers (with
    their options, ``flock``'s lock file and ``timeout``'s duration)."""
    i = 0
    while i < len(words):
        w = words[i]
        base = w.rsplit("/", 1)[-1]
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", w):
            i += 1
        elif base in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
                if len(words[i - 1]) == 2 and i < len(words) and words[i].isdigit():
                    i += 1  # an option's number (nice -n 19, ionice -c 3)
            if base in ("flock", "setlock", "timeout") and i < len(words):
                i += 1  # the lock file, or the duration
        else:
            break
    return words[i:]


def _last_command(words: list[str]) -> list[str]:
    """The words of the command after any that only set the scene (``cd /srv && ./backup`` is
    named after ``backup``). Pipes and redirections end the command."""
    start = 0
    for j, w in enumerate(words):
        if w in ("&&", ";", "||") and j > start and words[start] in _PRELUDES:
            start = j + 1
    out = []
    for w in words[start:]:
        if w[:1] in "|&;<>()" or w[:2] in ("1>", "2>"):
            break
        out.append(w)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _unique(name: str, used: set[str]) -> str:
    if name not in used:
        return name
    k = 2
    while f"{name}-{k}" in used:
        k += 1
    return f"{name}-{k}"
