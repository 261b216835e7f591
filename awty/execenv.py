"""The environment an ``exec`` job runs in: recorded at ``add`` and restored at run time, as
``at`` does, so that a job added from a shell with ``mytool`` on PATH and ``MYVAR`` exported
finds both under cron's bare environment.

The database of jobs is no place for credentials (``export`` prints it; on PostgreSQL every
host reads it), so a variable is left out when its name looks like a secret
(``SECRET_MARKERS``) *or its value does* (``looks_secret``: a URL with a password, a
``key=``/``password=``… pair, a JWT, a PEM key, a known token prefix, a long random-looking
run of characters). The names in ``ALWAYS`` (PATH, HOME, LANG, LC_*, TZ…) are kept whatever
their value, and the names the ``exec_env_allow`` setting lists are kept too: the user's word
beats the guess. Also left out: the variables that describe the adding shell rather than the
job (``VOLATILE``, the same list ``at`` skips, plus the working directory's, which is kept as
the job's ``cwd``), and the signing secret whatever the setting says. The record is capped at
``MAX_BYTES``; past it the largest variables are left out (PATH never) and their names listed
in ``AWTY_ENV_DROPPED`` so the job (and ``show``) can see what is missing."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

SECRET_MARKERS = ("SECRET", "TOKEN", "PASS", "PWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE",
                  "PRIVATE", "JWT", "DSN", "WEBHOOK", "AWTY_SIGNING")
# Kept whatever the value: where programs and their locale are, nothing a credential lives in.
ALWAYS = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL",
                    "TMPDIR"})
ALWAYS_PREFIXES = ("LC_",)
NEVER = "AWTY_SIGNING"  # the signing secret and where it lives: not even when allowed
VOLATILE = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "TERM", "DISPLAY", "COLUMNS", "LINES"})
MAX_BYTES = 64 * 1024  # of NAME=value text: what a shell's environment usually stays under
DROPPED = "AWTY_ENV_DROPPED"
# A job added over HTTP records no environment but this one entry: which token's ``exec_env``
# it runs with, looked up when it runs (``token_ref``). '=' ends a variable's name, so no
# environment has this name and ``capture`` never records it.
TOKEN_REF = "=token"

# Prefixes of tokens that services issue (GitHub, GitLab, Slack, Stripe, OpenAI, AWS key ids,
# Google API keys, npm, PyPI, Hugging Face, SendGrid, DigitalOcean, Shopify, awty's own secret).
TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-",
                  "xoxp-", "xoxa-", "xoxs-", "xoxe-", "xapp-", "sk_live_", "sk_test_",
                  "rk_live_", "rk_test_", "pk_live_", "sk-", "AKIA", "ASIA", "AIza", "npm_",
                  "pypi-", "hf_", "SG.", "dop_v1_", "shpat_", "whsec_")
RANDOM_RUN = 20  # characters: shorter random-looking runs are ids and versions, not keys
HEX_RUN = 32  # a hex run this long is a key or a digest: 128 bits


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS)


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Compiled when first used: only an exec add or run needs them, and `awty add` is counted
    # in milliseconds.
    import re

    prefixes = "|".join(re.escape(p) for p in TOKEN_PREFIXES)
    credential = re.compile(
        # URL with a password, user or not; a scheme starts where no scheme character stands
        # before it (without that the search was quadratic: 50 KB of letters took 25 s)
        r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]+@"
        r"|(?:^|[\s;&?,])[-\w.]*(?:key|pass|passwd|password|pwd|secret|token|sig|signature"
        r"|credential|auth)\s*="  # key=, password=, AccountKey=, SharedAccessSignature=…
        r"|\beyJ[\w-]{8,}\.[\w-]{8,}\."  # a JWT: base64url '{"…' header.payload.signature
        r"|-----BEGIN [A-Z ]*PRIVATE KEY"
        r"|\b(?:bearer|basic)\s+[\w+/=.-]{8,}"  # an Authorization header's value
        rf"|(?<![A-Za-z0-9])(?:{prefixes})[\w-]{{8,}}",
        re.IGNORECASE)
    return credential, re.compile(r"[A-Za-z0-9+/=_-]{%d,}" % RANDOM_RUN)


def looks_secret(value: str) -> bool:
    """True for a value that holds a credential, whatever its variable is called (see the
    module's docstring)."""
    credential, run = _patterns()
    if credential.search(value):
        return True
    return any(_random(m.group(0)) for m in run.finditer(value))


def _random(run: str) -> bool:
    """A run of token characters that reads as a key rather than a word, a path, a name or a
    version: 32+ hex digits (letters and digits both); 20+ characters mixing upper case, lower
    case and digits the way random text does (the class changes from one character to the next
    more often than CamelCase does, and few characters repeat); 32+ of one case and digits,
    likewise."""
    if run.count("/") > 1:  # a path: its parts are what may be random
        return any(_random(part) for part in run.split("/"))
    s = run.strip("=-_/+")
    if len(s) >= HEX_RUN and all(c in "0123456789abcdefABCDEF" for c in s):
        return any(c.isdigit() for c in s) and not s.isdigit()
    core = [c for c in s if c.isalnum()]
    classes = [c.isdigit() and 2 or c.isupper() and 1 or 0 for c in core]
    n, kinds = len(core), set(classes)
    if n < RANDOM_RUN or 2 not in kinds or len(kinds) < 2 or (len(kinds) == 2 and n < HEX_RUN):
        return False
    changes = sum(a != b for a, b in zip(classes, classes[1:], strict=False))
    counts = Counter(core)
    entropy = -sum(k / n * math.log2(k / n) for k in counts.values())
    # random text over an alphabet of A symbols spreads over min(n, A) of them: ~log2 of that,
    # less ~0.6 bits; words and names repeat letters and fall well under it
    alphabet = 62 if len(kinds) == 3 else 36
    return (changes >= 0.4 * (n - 1) * (len(kinds) - 1) / 2
            and entropy >= math.log2(min(n, alphabet)) - 1.0)


def keeps(name: str, value: str, allow: Collection[str] = ()) -> bool:
    """Whether ``name=value`` is recorded for an exec job; ``allow`` is ``exec_env_allow``
    (names, or prefixes ending in ``*``)."""
    if name.upper().startswith(NEVER):
        return False
    if name in ALWAYS or name.startswith(ALWAYS_PREFIXES) or allowed(name, allow):
        return True
    return name not in VOLATILE and not is_secret(name) and not looks_secret(value)


def allowed(name: str, allow: Collection[str]) -> bool:
    return any(name == a or (a.endswith("*") and name.startswith(a[:-1])) for a in allow)


def token_ref(name: str, ref: str | None) -> dict[str, str]:
    """What a job added with the token ``name`` (made with ``ref``) keeps as its environment:
    a reference, never the token's values (the store's rows are read by export, history and
    every host of a shared store; the token's owner may change or revoke them meanwhile)."""
    return {TOKEN_REF: name if ref is None else f"{name}#{ref}"}


def token_of(env: Mapping[str, str] | None) -> tuple[str, str | None] | None:
    """The (name, ref) of the token whose environment ``env`` refers to, else None."""
    if not env or len(env) != 1 or TOKEN_REF not in env:
        return None
    name, _, ref = str(env[TOKEN_REF]).partition("#")
    return name, ref or None


def capture(environ: Mapping[str, str], limit: int = MAX_BYTES,
            allow: Collection[str] = ()) -> dict[str, str]:
    """What to record of ``environ`` for an exec job (see the module's docstring). A name
    holding '=' (only a file can give one) is left out: no process can be given it."""
    env = {k: v for k, v in environ.items()
           if "\0" not in k + v and "=" not in k and _text(k + v) and keeps(k, v, allow)}
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
