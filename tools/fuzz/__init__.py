"""``openhlo fuzz``: coverage-guided fuzzing of OpenHLO against its error contract (issue 14).

Bad input may only raise an OpenHLOError, promptly, without crashing the process. See
tools/README.md (``openhlo fuzz``) for how to run it; contract.py for what a finding is.
"""
