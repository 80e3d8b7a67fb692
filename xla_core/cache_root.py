"""Where OpenHLO keeps what it caches between processes: one root folder for all of it.

``cache_root()`` is ``$OPENHLO_CACHE_DIR``, else ``openhlo_cache_home()``: ``openhlo`` under
``$XDG_CACHE_HOME``, else under ``~/.cache``. Each cache is a subfolder named for what it
holds (``hardware`` for the cost model's calibration, ``cpu_programs`` and ``cpu_kernels``
for the cpu backend); pointing ``OPENHLO_CACHE_DIR`` elsewhere (a test session, a cold
benchmark) moves them all. Files a user puts there by hand (the JAX test sources of
``openhlo jax-suite``) live under ``openhlo_cache_home()``, which the variable does not move.
"""
from __future__ import annotations

import os

CACHE_DIR_ENV = "OPENHLO_CACHE_DIR"


def openhlo_cache_home() -> str:
    """``$XDG_CACHE_HOME/openhlo``, else ``~/.cache/openhlo``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "openhlo")


def cache_root(*parts: str) -> str:
    """The cache root (``$OPENHLO_CACHE_DIR``, else ``openhlo_cache_home()``), joined with
    ``parts``."""
    return os.path.join(os.environ.get(CACHE_DIR_ENV) or openhlo_cache_home(), *parts)
