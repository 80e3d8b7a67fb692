"""Where the shared conformance suites live, for tests that use them as data.

The suites are not part of the repository: they sit in ``shared/`` next to the
checkout (``../shared/conformance/stablehlo``). Tests that need them skip
when they are absent.
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE_ROOT = REPO_ROOT.parent / "shared" / "conformance" / "stablehlo"


def conformance_dir(suite: str = "") -> Path | None:
    """``CONFORMANCE_ROOT / suite`` if it exists, else None."""
    path = CONFORMANCE_ROOT / suite if suite else CONFORMANCE_ROOT
    return path if path.is_dir() else None
