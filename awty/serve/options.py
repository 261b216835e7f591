"""What ``awty serve`` is started with."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..errors import InvalidInput

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8421
MAX_BODY = 1024 * 1024  # serve_max_body: a request body past this is refused with 413
MAX_BATCH = 10_000  # serve_max_batch: jobs in one POST /v1/jobs/batch
# --read-timeout: a request's head and body must arrive within this (slowloris: deadline.py)
READ_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServeOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    certfile: str | None = None
    keyfile: str | None = None
    no_auth: bool = False
    run_slots: bool = False
    max_body: int = MAX_BODY
    max_batch: int = MAX_BATCH
    read_timeout: float = READ_TIMEOUT
    # reverse proxies whose X-Forwarded-Proto/-For are believed (addresses or networks)
    forwarded_allow_ips: tuple[str, ...] = ()

    def check(self) -> None:
        """Refuse what cannot work, before anything listens (``InvalidInput``)."""
        if not 0 < self.port < 65536:
            raise InvalidInput(f"--port: {self.port} is not a TCP port (1-65535)")
        if not 0 < self.read_timeout <= 3600:
            raise InvalidInput(f"--read-timeout: {self.read_timeout:g} is not 0 to 3600 "
                               "seconds")
        for proxy in self.forwarded_allow_ips:
            try:
                ipaddress.ip_network(proxy)  # an address is a network of one
            except ValueError:
                raise InvalidInput(f"--forwarded-allow-ips: {proxy!r} is not an IP address or "
                                   "network (e.g. 127.0.0.1 or 10.0.0.0/8)") from None
        if bool(self.certfile) != bool(self.keyfile):
            raise InvalidInput("--certfile and --keyfile go together")
        if self.no_auth and not is_loopback(self.host):
            raise InvalidInput(f"--no-auth listens on loopback only (127.0.0.1, ::1, "
                               f"localhost), not {self.host}: create a token with "
                               "`awty token new NAME --scope jobs:read,jobs:write`")


def proxies(text: str | None) -> tuple[str, ...]:
    """``--forwarded-allow-ips`` as given: comma-separated, blanks dropped."""
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
