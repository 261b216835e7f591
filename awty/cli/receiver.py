"""``awty receiver``: the test receiver (``awty.testing.receiver``) from the awty command, so
that an install with only the ``awty`` script on PATH (pipx) has it too. Its options are the
receiver's own: everything after ``receiver`` goes to it, ``--help`` included."""

from __future__ import annotations

import typer

from .options import new_app

commands = new_app()


@commands.command(add_help_option=False, context_settings={
    "allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})
def receiver(ctx: typer.Context) -> None:
    """Run a test receiver on 127.0.0.1 that prints each callback (job, check, attempt,
    payload, signature check) with the answer it gave; --answer scripts answers. From a
    terminal it runs until Ctrl-C; started by a script it stops by itself after --lifetime
    (600 s). All its options: awty receiver --help.

    For instance, in a second terminal: `awty receiver --port 8080 --secret
    "$AWTY_SIGNING_SECRET"`, then `awty add http://127.0.0.1:8080/hook --in 1m`.
    """
    from ..testing.receiver import main

    main(ctx.args, prog="awty receiver")
