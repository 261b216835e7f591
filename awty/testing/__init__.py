"""awty's test kit, shipped with it: ``awty.testing.receiver`` is a scriptable HTTP receiver
for callbacks (``python -m awty.testing.receiver`` serves one from a shell). Nothing in awty
itself imports this package."""
