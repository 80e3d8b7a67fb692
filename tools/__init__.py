"""Command-line tools: the ``openhlo`` command, the conformance runner, benchmarks."""
