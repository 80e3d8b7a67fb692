"""``openhlo jax-suite``: JAX's own test files run on a JAX platform against a baseline.

Each test file runs under pytest twice in child processes, first with ``JAX_PLATFORMS`` set
to the baseline (``cpu``: XLA), then set to the platform under test, on the tests that
passed in the baseline. ``plugin.py`` is loaded into those pytest processes and streams
each test's outcome; ``runner.py`` drives the processes (shards, per-test timeouts, restart
after a crash); ``report.py`` compares the two runs and groups the failure causes;
``command.py`` is the subcommand.
"""
