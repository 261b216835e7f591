"""The store contract suite (one package, so its conftest never shadows tests/conftest.py)."""
