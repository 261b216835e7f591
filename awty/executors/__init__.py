"""Executors run one check of one job and answer with a ``Result``; see ``base.Executor``."""
