"""awty's benchmark: the SPEC 11 figures, measured on this machine, against a fast local receiver.

Run it through ``scripts/bench`` (which builds .venv with the ``test,bench`` extras):

    ./scripts/bench                      # full sizes, 3 runs each, writes BENCHMARKS.md
    ./scripts/bench --quick --output /tmp/BENCH.md      # small sizes, 1 run each, < 1 minute
    ./scripts/bench --only slot,rss --runs 5            # some sections only
    ./scripts/bench --peers              # awty beside the alternatives (installs them from PyPI)

What it does:
  * starts a receiver on 127.0.0.1 answering ``204`` with keep-alive: nginx when installed, else
    awty's test receiver in load mode (uvloop + httptools, 2 processes sharing the port with
    SO_REUSEPORT); measures that receiver's own ceiling first, with a light load generator;
  * creates temporary homes under ``.bench/`` and measures each SPEC 11 figure (median of the
    runs, min and max shown), prints one table (rich) and writes a Markdown report;
  * stops everything it started (finally, atexit, and PR_SET_PDEATHSIG on its children).

Library measurements use ``awty.clock.FixedClock``; CLI subprocesses get ``AWTY_NOW``, so slots
are due without waiting. The figures are measurements, never pass/fail tests: the exit code is
non-zero only when the bench itself could not measure something (e.g. callbacks that failed).

Layout: ``main`` (options, the run, section time limits), ``context`` (what sections share),
``sections/`` (one module per figure group: ceiling, cli, batch, slot, clislot, flat, catchup,
rss), ``receivers``, ``stamps`` (the timing receiver: figures from the receiver's clock),
``peers/`` (``--peers``: awty beside APScheduler, Huey, a naive cron + SQL runner and at),
``references`` (bare asyncio and requests clients), ``homes``, ``disk`` (a quiet disk between
timed runs), ``report`` (the table and BENCHMARKS.md), ``machine``, ``profiling``, ``common``.
"""
