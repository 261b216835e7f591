"""Group commit of ``POST /v1/jobs`` and ``/v1/jobs/batch``: the adds of requests that arrive
while the store is busy with earlier ones wait in a queue, and one writer task hands them to
the store's thread together: their jobs go in one transaction (``Awty.add_parts``: each
request all or nothing on its own), which first checks their tokens again (a revoke seen at
once, whatever ``auth``'s cache holds: a revoked token's requests add nothing and get 401, the
others go in), and one envelope file a slot. Each request is answered only once that
transaction has committed: a 201 is never given for a job the store does not hold.

Alone, a request is a group of one and waits for nothing; under load a group holds what came
during the previous one's commit, so a transaction, a token check and a thread hop serve many
requests."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..api import AddPart
from ..errors import Revoked
from ..tokens import hash_of
from .auth import revoked
from .problems import Problem

if TYPE_CHECKING:
    from ..api import AddResult, Awty
    from ..model import ApiToken
    from .backend import Backend

# a group closes at this many jobs (one batch request alone may be bigger: it is its own group)
GROUP_JOBS = 5000


class _Ask:
    __slots__ = ("token", "secret", "specs", "single", "done")

    def __init__(self, token: ApiToken, secret: str | None, specs: list[Any], single: bool,
                 done: asyncio.Future[list[AddResult]]) -> None:
        self.token, self.secret, self.specs, self.single = token, secret, specs, single
        self.done = done


class Adds:
    def __init__(self, backend: Backend, tokens: dict[str, ApiToken]) -> None:
        self.backend = backend
        self.tokens = tokens  # auth's cache: a token found revoked leaves it
        self.waiting: list[_Ask] = []
        self.writer: asyncio.Task[None] | None = None

    async def add(self, token: ApiToken, secret: str | None, specs: list[Any],
                  single: bool) -> list[AddResult]:
        """Add ``specs`` (one request's, checked by ``jobs.admit``) for ``token``, presented as
        ``secret`` (None: --no-auth); raises the request's ``Problem`` or ``AwtyError``."""
        done: asyncio.Future[list[AddResult]] = asyncio.get_running_loop().create_future()
        self.waiting.append(_Ask(token, secret, specs, single, done))
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())
        return await done

    async def _write(self) -> None:
        try:
            while self.waiting:
                n, size = 0, 0
                while n < len(self.waiting) and (n == 0 or size + len(
                        self.waiting[n].specs) <= GROUP_JOBS):
                    size += len(self.waiting[n].specs)
                    n += 1
                group, self.waiting = self.waiting[:n], self.waiting[n:]
                try:
                    got = await self.backend.run(_commit, group)
                except Exception as e:  # the store's trouble is every request's
                    got = [e] * len(group)
                for ask, r in zip(group, got, strict=True):
                    if ask.done.done():  # its client went away: the jobs stand all the same
                        continue
                    if isinstance(r, BaseException):
                        if isinstance(r, Problem) and r.status == 401 and ask.secret:
                            self.tokens.pop(hash_of(ask.secret), None)
                        ask.done.set_exception(r)
                    else:
                        ask.done.set_result(r)
        finally:
            self.writer = None


def _commit(a: Awty, group: list[_Ask]) -> list[list[AddResult] | Exception]:
    """In the store's thread: the group's adds in one transaction, which checks their tokens
    again first (``AddPart.token``). A part's directory and environment come from the cached
    token: what they read of it (``exec_dir``, its name and ref) never changes while it lives."""
    from .. import tokens

    parts = []
    for ask in group:
        cwd, env = tokens.exec_environment(ask.token, str(a.home))
        parts.append(AddPart(ask.specs, cwd, env, ask.single,
                             None if ask.secret is None else hash_of(ask.secret)))
    return [revoked() if isinstance(r, Revoked) else r for r in a.add_parts(parts)]
