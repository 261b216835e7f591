"""``scripts/bench --peers``: awty beside the alternatives on one workload, N jobs all due at
once, one timing receiver (bench/stamps.py), interleaved rounds with the peers in rotating
order, every figure taken from the receiver's clock. The peers are in ``kinds``; what each run
measures is ``measure``; the table it writes into BENCHMARKS.md is ``table``."""

from .run import run_peers

__all__ = ["run_peers"]
