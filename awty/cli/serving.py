"""``awty serve`` (the HTTP API, console and metrics; the serve extra), ``awty metrics`` and
``awty token new|list|revoke`` (who may call it)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from . import render as r
from .options import Home, Json, new_app, new_group, open_awty, reports_errors

commands = new_app()
token_app = new_group(help="Tokens for `awty serve` (Authorization: Bearer …).")


@commands.command()
@reports_errors
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every "
                                      "interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8421,
    certfile: Annotated[Optional[str], typer.Option(help="TLS certificate (PEM), with "
                                                    "--keyfile; or TLS at a reverse proxy."
                                                    )] = None,
    keyfile: Annotated[Optional[str], typer.Option(help="TLS private key (PEM).")] = None,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No tokens: loopback "
                                          "addresses only.")] = False,
    run_slots: Annotated[bool, typer.Option("--run-slots", help="Also fire each slot at its "
                                            "boundary, catching up at start (where there "
                                            "is no cron).")] = False,
    read_timeout: Annotated[float, typer.Option(
        help="Seconds a request's head and body may take to arrive (slow clients are "
             "cut off).")] = 30.0,
    forwarded_allow_ips: Annotated[Optional[str], typer.Option(
        help="Behind a reverse proxy: its addresses or networks, comma-separated (e.g. "
             "127.0.0.1); X-Forwarded-Proto/-For are believed from them only.")] = None,
    home: Home = None,
) -> None:
    """Serve the HTTP API (/v1), the console (/) and /metrics on this home's store.

    Needs the serve extra (pip install 'awty[serve]') and a token (`awty token new`).

    Examples:

      awty token new billing --scope jobs:read,jobs:write

      awty serve --port 8421

      awty serve --host 0.0.0.0 --certfile cert.pem --keyfile key.pem --run-slots

      awty serve --forwarded-allow-ips 127.0.0.1     # behind nginx or Caddy on this host
    """
    from ..serve import require

    require()
    from ..serve.app import check_tokens
    from ..serve.app import serve as run
    from ..serve.options import ServeOptions, proxies

    opts = ServeOptions(host=host, port=port, certfile=certfile, keyfile=keyfile,
                        no_auth=no_auth, run_slots=run_slots, read_timeout=read_timeout,
                        forwarded_allow_ips=proxies(forwarded_allow_ips))
    a = open_awty(home)
    check_tokens(a, opts)
    r.err(f"awty serve: listening on http{'s' if certfile else ''}://"
          f"{'[' + host + ']' if ':' in host else host}:{port} ({a.where})")
    run(a, opts)


@commands.command()
@reports_errors
def metrics(home: Home = None) -> None:
    """Print the Prometheus metrics of this home's store (what GET /metrics shows), e.g. for
    node_exporter's textfile collector (or set metrics_file: run-slot and catchup then write
    it after each run).

    Example:  awty metrics --home /srv/awty

    For node_exporter, redirect it into the collector's directory, e.g. to
    /var/lib/node_exporter/awty.prom.
    """
    from ..serve import require

    require()
    from ..serve.metrics import exposition

    r.out(exposition(open_awty(home)).decode().rstrip("\n"))


@token_app.command("new")
@reports_errors
def token_new(
    name: Annotated[str, typer.Argument(help="What the token is for (e.g. billing).")],
    scope: Annotated[str, typer.Option(help="Comma-separated: jobs:read, jobs:write, "
                                       "jobs:exec (exec and python jobs; never implied), "
                                       "admin.")],
    allow_callbacks: Annotated[Optional[list[str]], typer.Option(
        help="Only callbacks to URLs starting with this (repeatable).")] = None,
    exec_dir: Annotated[Optional[str], typer.Option(
        help="Where exec jobs added with this token run (default: the awty home).")] = None,
    exec_env: Annotated[Optional[list[str]], typer.Option(
        help="NAME=VALUE: the whole environment of those jobs (repeatable; default: "
             "PATH, HOME and LANG only), read when each runs: kept with the token, never in "
             "a job's row (`token env` changes it). token list shows the names only.")] = None,
    rate: Annotated[Optional[str], typer.Option(
        help="At most N requests a second, minute or hour: N/s, N/min, N/h (e.g. 100/s); "
             "answered 429 past it. Counted in each serve process (default: no "
             "limit).")] = None,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Make a token for `awty serve` and print it once (only its SHA-256 is kept).

    Examples:

      awty token new shop --scope jobs:read,jobs:write --allow-callbacks https://shop.internal/

      awty token new ops --scope jobs:read,jobs:write,jobs:exec --exec-dir /srv/jobs

      awty token new crm --scope jobs:write --rate 100/s
    """
    token, secret = open_awty(home).new_token(
        name, scope, allow_callbacks=allow_callbacks or (), exec_dir=exec_dir,
        exec_env=exec_env or (), rate=rate)
    if as_json:
        r.emit_json({"name": token.name, "scopes": list(token.scopes), "rate": token.rate,
                     "token": secret})
        return
    r.out(secret)
    limit = f", at most {token.rate}" if token.rate else ""
    r.err(f"awty: token {token.name!r} ({', '.join(token.scopes)}{limit}): shown once, keep "
          "it now")


@token_app.command("list")
@reports_errors
def token_list(as_json: Json = False, home: Home = None) -> None:
    """The tokens: name, scopes, created, last used, rate limit (never the tokens
    themselves; of --exec-env, the names only: --json shows each value as ***)."""
    from ..documents import token_dict

    found = open_awty(home).tokens()
    docs = [token_dict(t) for t in found]
    if as_json:
        r.emit_json(docs)
        return
    r.table(None, ["name", "scopes", "created", "last used", "rate", "callbacks"],
            ([d["name"], ",".join(d["scopes"]), r.when(t.created_at, short=True),
              r.when(t.last_used_at, short=True), t.rate or "-",
              " ".join(d["allow_callbacks"]) or "any"]
             for d, t in zip(docs, found, strict=True)))


@token_app.command("env")
@reports_errors
def token_env(name: Annotated[str, typer.Argument(help="The token's name.")],
              exec_env: Annotated[Optional[list[str]], typer.Option(
                  help="NAME=VALUE (repeatable): the new whole environment (none: PATH, "
                       "HOME and LANG only).")] = None,
              home: Home = None) -> None:
    """Change the environment of the exec and python jobs added with a token, the pending
    ones included (each reads it when it runs): rotate a password without a new token.

      awty token env ops --exec-env PATH=/usr/bin:/bin --exec-env DATABASE_URL=postgresql://…
    """
    token = open_awty(home).set_token_env(name, exec_env or [])
    names = ", ".join(token.exec_env) or "none: PATH, HOME and LANG only"
    r.out(f"token {token.name}: exec environment set ({names})")


@token_app.command("revoke")
@reports_errors
def token_revoke(name: Annotated[str, typer.Argument(help="The token's name.")],
                 home: Home = None) -> None:
    """Revoke a token: every serve process refuses it from its next request on."""
    open_awty(home).revoke_token(name)
    r.out(f"revoked {name}")
