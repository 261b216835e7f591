"""Standard Webhooks signing (https://www.standardwebhooks.com/), stdlib only.

A secret is written ``whsec_<base64>``. A message is signed as
``v1,<base64 HMAC-SHA256(secret, f"{msg_id}.{timestamp}.".encode() + body)>`` and sent in the
``webhook-signature`` header beside ``webhook-id`` and ``webhook-timestamp``; a receiver built
with the ``standardwebhooks`` library verifies it unchanged. A secret file may hold several
secrets, one a line (a rotation in progress): the header then carries one signature for each,
space-separated, and a receiver holding any one of them accepts.

The secret is never printed, logged or put in an error message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import stat
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput

if TYPE_CHECKING:
    from pathlib import Path

    from .config import Settings

PREFIX = "whsec_"
ENV_VAR = "AWTY_SIGNING_SECRET"
MIN_SECRET_BYTES = 1

_b2a = binascii.b2a_base64


def parse_secret(text: str) -> bytes:
    """``whsec_<base64>`` (or bare base64, padded or not) -> the raw key bytes.
    Raises InvalidInput when malformed; the message never contains the secret itself."""
    if not isinstance(text, str):
        raise InvalidInput("signing secret: expected text in the form whsec_<base64>")
    s = text.strip()
    if s.startswith(PREFIX):
        s = s[len(PREFIX):]
    if not s:
        raise InvalidInput("signing secret is empty (expected whsec_<base64>)")
    s = s.rstrip("=")
    s += "=" * (-len(s) % 4)
    try:
        key = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("signing secret is not valid base64 (expected whsec_<base64>; "
                           "`awty secret new` makes one)") from None
    if len(key) < MIN_SECRET_BYTES:
        raise InvalidInput("signing secret is empty (expected whsec_<base64>)")
    return key


def new_secret(nbytes: int = 32) -> str:
    """A fresh secret in the Standard Webhooks form: ``whsec_`` + base64 of 24–32 random bytes."""
    if not 24 <= nbytes <= 64:
        raise ValueError("a secret should have 24 to 64 random bytes")
    import secrets  # only `awty secret new` needs it: not every run's start

    return PREFIX + base64.b64encode(secrets.token_bytes(nbytes)).decode("ascii")


# Per secret, SHA-256 already fed its inner and outer padded key (RFC 2104: HMAC is
# H(K^opad, H(K^ipad, m))), copied per message: the key schedule is computed once, and a
# message costs six calls into hashlib's C where hmac.HMAC's Python wrapper (copy, update,
# digest) cost ~0.8 µs more of every callback. test_signing checks it against hmac.new.
_KEYED: dict[bytes, tuple[Any, Any]] = {}
_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def _keyed(secret: bytes) -> tuple[Any, Any]:
    pads = _KEYED.get(secret)
    if pads is None:
        if len(_KEYED) > 16:  # a process holds one or two secrets; never grow without bound
            _KEYED.clear()
        key = hashlib.sha256(secret).digest() if len(secret) > _BLOCK else secret
        key = key.ljust(_BLOCK, b"\0")
        pads = _KEYED[secret] = (hashlib.sha256(key.translate(_IPAD)),
                                 hashlib.sha256(key.translate(_OPAD)))
    return pads


def sign(secret: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>`` over ``f"{msg_id}.{timestamp}."`` + the exact body bytes."""
    inner, outer = _keyed(secret)
    h = inner.copy()
    h.update(f"{msg_id}.{timestamp}.".encode())
    h.update(body)
    o = outer.copy()
    o.update(h.digest())
    return "v1," + _b2a(o.digest(), newline=False).decode("ascii")


def parse_secrets(text: str) -> tuple[bytes, ...]:
    """Secrets one a line (blank lines and ``#`` comments skipped) -> their key bytes, in
    order. Raises InvalidInput naming the bad line (never its text)."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("#")]
    if not lines:
        raise InvalidInput("signing secret is empty (expected whsec_<base64>)")
    keys = []
    for n, line in lines:
        try:
            keys.append(parse_secret(line))
        except InvalidInput as e:
            raise InvalidInput(f"line {n}: {e}" if len(lines) > 1 else str(e)) from None
    return tuple(keys)


def signatures(secrets: tuple[bytes, ...], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one ``v1,…`` per secret, space-separated."""
    if len(secrets) == 1:  # nearly always: no generator and join per callback
        return sign(secrets[0], msg_id, timestamp, body)
    return " ".join(sign(k, msg_id, timestamp, body) for k in secrets)


def load_secrets(settings: Settings, env: Mapping[str, str] | None = None) -> tuple[bytes, ...]:
    """The signing keys: ``AWTY_SIGNING_SECRET`` wins, else ``settings.signing_secret_file``
    (which must not be readable by group or others), else none (callbacks go unsigned).
    Either may hold several secrets, one a line: each callback is signed with every one."""
    env = os.environ if env is None else env
    text = env.get(ENV_VAR)
    if text:
        try:
            return parse_secrets(text)
        except InvalidInput as e:
            raise InvalidInput(f"{ENV_VAR}: {e}") from None
    path = getattr(settings, "signing_secret_file", None)
    if not path:
        return ()
    path = os.path.expanduser(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise InvalidInput(f"signing_secret_file {path}: cannot read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"signing_secret_file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise InvalidInput(
                f"signing_secret_file {path}: readable by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); run: chmod 600 {path}")
        raw = b""
        while chunk := os.read(fd, 65536):
            raw += chunk
            if len(raw) > 65536:
                raise InvalidInput(f"signing_secret_file {path}: too large to be a secret")
    except OSError as e:
        raise InvalidInput(f"signing_secret_file {path}: cannot read ({e.strerror})") from None
    finally:
        os.close(fd)
    try:
        return parse_secrets(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(f"signing_secret_file {path}: not text (expected whsec_<base64>)") \
            from None
    except InvalidInput as e:
        raise InvalidInput(f"signing_secret_file {path}: {e}") from None


def write_new_secret(path: Path) -> bool:
    """Create ``path`` (0600) holding a fresh secret; False when anything is there already
    (a secret the operator keeps: never replaced)."""
    from .safeio import write_new

    return write_new(path, (new_secret() + "\n").encode(), 0o600)


def verify(secret: bytes | Iterable[bytes], headers: Mapping[str, str], body: bytes,
           now: datetime, tolerance: float = 300) -> None:
    """Check a received webhook: the three ``webhook-*`` headers (any case), a timestamp within
    ``tolerance`` seconds of ``now``, and at least one ``v1`` signature among the
    space-separated ones matching the secret (or any of several: a receiver's own rotation).
    Raises InvalidInput saying what is wrong; returns None when good."""
    lower = {str(k).lower(): v for k, v in headers.items()}
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        if not lower.get(name):
            raise InvalidInput(f"missing header {name}")
    msg_id = str(lower["webhook-id"]).strip()
    ts_text = str(lower["webhook-timestamp"]).strip()
    try:
        ts = int(ts_text)
    except ValueError:
        raise InvalidInput(f"bad webhook-timestamp {ts_text[:40]!r} "
                           "(expected integer seconds since the epoch)") from None
    age = now.timestamp() - ts
    if age > tolerance:
        raise InvalidInput(f"timestamp too old ({age:.0f}s ago; tolerance {tolerance:g}s)")
    if -age > tolerance:
        raise InvalidInput(f"timestamp too new ({-age:.0f}s ahead; tolerance {tolerance:g}s)")
    expected = []
    for key in (secret,) if isinstance(secret, bytes) else secret:
        # hmac's own, not sign's: a receiver's check does not lean on the sender's code
        expected.append(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
    seen_v1 = False
    for item in str(lower["webhook-signature"]).split():
        version, sep, sig = item.partition(",")
        if not sep or version != "v1":
            continue
        seen_v1 = True
        try:
            given = base64.b64decode(sig, validate=True)
        except (binascii.Error, ValueError):
            continue
        if any(hmac.compare_digest(e, given) for e in expected):
            return None
    if not seen_v1:
        raise InvalidInput("signature mismatch (no v1 signature in webhook-signature)")
    raise InvalidInput("signature mismatch")
