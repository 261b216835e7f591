"""``awty serve``: the HTTP API under ``/v1``, the console at ``/``, ``/metrics`` and the health
checks, on the home's own store. Starlette and uvicorn, in the ``serve`` extra: nothing here is
imported by any other command.

- ``options``: what serve is started with (address, TLS, proxies, auth, limits)
- ``app``: the Starlette app: one ``Awty`` used from one worker thread, the routes of each area
- ``deadline``: the read deadline of each request (slow clients); ``limits``: tokens' rates
- ``problems``: errors as RFC 9457 ``application/problem+json``
- ``auth``: Bearer tokens (``awty token``) and their scopes
- ``jobs``, ``schedules``, ``reads``: the ``/v1`` routes; ``openapi``: the document they are
  held to
- ``health``: ``/healthz``, ``/readyz``, ``/metrics`` (``metrics``: the families and
  histograms); ``console``: the web console
"""

from __future__ import annotations

from ..errors import AwtyError

EXTRA = "pip install 'awty[serve]'"


def require() -> None:
    """Raise one line naming the install command when the serve extra is missing."""
    try:
        import jinja2  # noqa: F401
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise AwtyError(f"awty serve needs {e.name or 'its extra'}: {EXTRA}") from None
