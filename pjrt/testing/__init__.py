"""Checks a backend runs to show it keeps the runtime contract (backend_suite.py)."""
from pjrt.testing.backend_suite import (FAIL, PASS, SKIP, CheckFailed, CheckResult, Skipped,
                                        Suite, failures, run_suite, summary_table)

__all__ = ["FAIL", "PASS", "SKIP", "CheckFailed", "CheckResult", "Skipped", "Suite",
           "failures", "run_suite", "summary_table"]
