"""awty's version, in a module of its own: whatever needs it (the CLI, the http executor's
User-Agent) imports this leaf rather than the ``awty`` package, whose lazy re-exports reach
back to the facade (an import cycle)."""

__version__ = "0.1.0"
