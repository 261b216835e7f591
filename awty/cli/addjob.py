"""The body of ``awty add``, free of Typer: the Typer command (``jobs.add``) and the quick
path for a plain ``awty add`` (``quickadd``) both run it, so a one-job add under a crontab or a
script loop never imports the parser it does not need."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from ..errors import InvalidInput
from . import render as r

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

# Input read for one job (--payload @file or -, one --batch line) stops here: far above any
# payload awty stores, and @/dev/zero or an endless pipe is refused instead of filling memory.
MAX_INPUT = 1 << 20


def read_payload(payload: str | None) -> str | None:
    if payload is None:
        return None
    if payload == "-":
        data: str | bytes = sys.stdin.read(MAX_INPUT + 1)
    elif payload.startswith("@"):
        try:
            with open(payload[1:], "rb") as f:
                data = f.read(MAX_INPUT + 1)
        except OSError as e:
            raise InvalidInput(f"--payload {payload}: {e.strerror}") from None
    else:
        return payload
    if len(data) > MAX_INPUT:
        raise InvalidInput(f"--payload {payload}: more than {MAX_INPUT} bytes")
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise InvalidInput(f"--payload {payload}: not UTF-8 text") from None


def run_add(target: str | None, *, at: str | None = None, in_: str | None = None,
            exec_: bool = False, call: bool = False, payload: str | None = None,
            entity: str | None = None, key: str | None = None,
            idempotency_key: str | None = None, header: list[str] | None = None,
            max_checks: int | None = None, horizon: str | None = None,
            timeout: str | None = None, max_attempts: int | None = None,
            misfire_grace: str | None = None, batch: str | None = None,
            dry_run: bool = False, as_json: bool = False, utc: bool = False,
            home: Path | None = None) -> None:
    """``awty add``'s body; the ``Awty`` it opens is closed when the command ends
    (``session.reporting_errors``)."""
    from .session import open_awty

    if batch is not None:
        if target is not None:
            raise InvalidInput("give TARGET or --batch, not both")
        from ..gcpause import paused

        with paused():  # reading the lines too: a spec is a few objects that all live on
            specs, lines = read_batch(batch)
            results = open_awty(home, one_shot=True).add_many(specs, dry_run=dry_run,
                                                              lines=lines)
            r.added(results, utc, as_json)
        return
    if target is None:
        raise InvalidInput("missing TARGET (a URL, or a command with --exec; see --help)")
    if exec_ and call:
        raise InvalidInput("--exec and --call exclude each other")
    kind = "exec" if exec_ else "python" if call else "http"
    res = open_awty(home, one_shot=True).add(
        target, at=at, in_=in_, kind=kind, payload_json=read_payload(payload),
        entity=entity, key=key, idempotency_key=idempotency_key, headers=header or None,
        max_checks=max_checks, horizon=horizon, timeout=timeout,
        max_attempts=max_attempts, misfire_grace=misfire_grace, dry_run=dry_run)
    r.added([res], utc, as_json)


# json.loads's C scanner, without its Python around it (typeshed does not list the attribute)
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"  # what json.loads skips around a value (not all str.isspace)


def _json_line(line: str) -> Any:
    """``json.loads(line)``, a third cheaper for a line that is one object: a line it would
    refuse (or read otherwise) goes through it, for its message."""
    if line[:1] == "{":
        try:
            value, end = _SCAN(line, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            if not line[end:].strip(_JSON_SPACE):
                return value
    return json.loads(line)


def read_batch(source: str) -> tuple[list[dict[str, Any]], list[int]]:
    """UTF-8 JSON lines, split on "\\n" only (a "\\r" before it or inside a line is JSON's
    whitespace; JSON text may hold U+2028 and friends raw), each line
    read up to MAX_INPUT; with each spec's line (blank lines are skipped: a refusal names
    the line in the file, not the spec's place)."""
    specs = []
    lines = []
    try:
        # newline="\n": universal newlines would end a line at a lone "\r" too, and a
        # refusal's line number would not be the one an editor shows
        f = (io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="\n")
             if source == "-" else open(source, encoding="utf-8", newline="\n"))
        try:
            n = 0
            while line := f.readline(MAX_INPUT + 1):
                n += 1
                if len(line) > MAX_INPUT:
                    raise InvalidInput(f"line {n}: longer than {MAX_INPUT} characters")
                if not line.strip():
                    continue
                try:
                    spec = _json_line(line)
                except ValueError as e:
                    raise InvalidInput(f"line {n}: not JSON ({e})") from None
                except RecursionError:
                    raise InvalidInput(f"line {n}: not JSON (nested too deeply)") from None
                if not isinstance(spec, dict):
                    raise InvalidInput(f"line {n}: not a JSON object")
                specs.append(spec)
                lines.append(n)
        finally:
            if source == "-":
                f.detach()  # sys.stdin's buffer stays open
            else:
                f.close()
    except OSError as e:
        raise InvalidInput(f"--batch {source}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"--batch {source}: not UTF-8 text") from None
    if not specs:
        raise InvalidInput(f"--batch {source}: no jobs in it")
    return specs, lines
