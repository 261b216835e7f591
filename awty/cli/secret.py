"""Signing commands: ``secret new`` (a fresh secret) and ``verify`` (check a received
callback's signature, as a receiver would)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InvalidInput
from . import render as r
from .options import Home, new_app, new_group, open_awty, reports_errors

commands = new_app()
secret_app = new_group(help="Signing secrets for callbacks (Standard Webhooks).")


@secret_app.command("new")
def secret_new() -> None:
    """Print a fresh signing secret (whsec_…). `awty init` already wrote one to
    <home>/signing.secret; to rotate, append the new one there (every callback is then signed
    with each, one a line), move the receiver to it, then delete the old line."""
    from ..signing import new_secret

    r.out(new_secret())


@commands.command()
@reports_errors
def verify(
    request: Annotated[Path, typer.Argument(help="A saved request: header lines, a blank "
                                            "line, then the body (as `curl -i` or a raw "
                                            "HTTP dump shows it); - for stdin.")],
    secret_file: Annotated[Optional[Path], typer.Option(
        help="File with the whsec_ secret (one a line). Default: the secret the home's "
             "callbacks are signed with ($AWTY_SIGNING_SECRET, else signing_secret_file).")]
    = None,
    tolerance: Annotated[str, typer.Option(help="Accepted age of webhook-timestamp.")] = "5m",
    home: Home = None,
) -> None:
    """Check a received callback's Standard Webhooks signature, as a receiver would, with
    the secret this home signs with (or --secret-file)."""
    from ..signing import parse_secrets
    from ..signing import verify as verify_sig
    from ..slots import parse_duration

    if secret_file is not None:
        try:
            keys = parse_secrets(secret_file.read_text())
        except OSError as e:
            raise InvalidInput(f"--secret-file: {e.strerror}") from None
        except InvalidInput as e:
            raise InvalidInput(f"--secret-file: {e}") from None
    else:
        keys = open_awty(home).signing_secrets()
    if not keys:
        raise InvalidInput("no secret: this home signs nothing (`awty init` writes one); give "
                           "--secret-file or set AWTY_SIGNING_SECRET")
    raw = sys.stdin.buffer.read() if str(request) == "-" else _read_bytes(request)
    headers, body = _split_request(raw)
    from ..clock import default_clock

    verify_sig(keys, headers, body, default_clock().now(), parse_duration(tolerance))
    job = headers.get("x-awty-job-id")
    what = f"job {job}, check {headers.get('x-awty-check')}; " if job else ""
    r.out(f"signature ok ({what}webhook-id {headers.get('webhook-id')})")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise InvalidInput(f"{path}: {e.strerror}") from None


def _split_request(raw: bytes) -> tuple[dict[str, str], bytes]:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    head, _, body = raw.partition(sep)
    headers = {}
    for line in head.decode("latin-1").splitlines():
        if ":" in line and not line.upper().startswith(("POST ", "HTTP/")):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if not headers:
        raise InvalidInput("no headers found: save the request as header lines, a blank line, "
                           "then the body")
    return headers, body
