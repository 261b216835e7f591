"""The bench's sections, one module each: ``run(bench)`` measures its figures into the
report."""
