"""The conformance runner behind ``openhlo conformance``.

discover.py turns files into cases (RUN lines, ``// -----`` chunks), execute.py
runs one case, pool.py runs many in worker processes with deadlines,
report.py prints progress and the summary and writes JSON. FileCheck-driven
files are checked with xla_core.testing.filecheck.
"""
