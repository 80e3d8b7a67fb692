"""Resource limits on what a program may ask for, checked before anything is allocated.

A program's text is small, but what it asks for need not be: a 300-byte program can nest
types ten thousand deep, or ask for a constant or a result of 10^11 elements. Each limit here
is checked by the layer that knows the size (the parser for nesting, the parser and the
constant folders for constants, the compile driver for buffers), before it allocates, and
failing it is an OpenHLO error that names the place and the limit's environment variable.

The defaults fit every upstream StableHLO program with a wide margin; each can be raised
(or lowered, in a service that compiles untrusted programs) with its environment variable.
Values are read at every check, so a test or a service can change them at run time.
"""
from __future__ import annotations

import os

from stablehlo.errors import OpenHLOError

NESTING_DEPTH_ENV = "OPENHLO_MAX_NESTING_DEPTH"
CONSTANT_BYTES_ENV = "OPENHLO_MAX_CONSTANT_BYTES"
BUFFER_BYTES_ENV = "OPENHLO_MAX_BUFFER_BYTES"
COLLECTIVE_TIMEOUT_ENV = "OPENHLO_COLLECTIVE_TIMEOUT_S"

# Upstream programs nest types, attributes and regions fewer than 10 deep; 128 leaves room
# for generated programs and keeps the recursive-descent parser far from Python's own
# recursion limit.
DEFAULT_NESTING_DEPTH = 128
# A constant is materialized in the compiler and in the executable; upstream constants are
# at most a few MiB. 1 GiB keeps a typo in a splat's shape from filling the memory.
DEFAULT_CONSTANT_BYTES = 1 << 30
# An instance of a multi-device run waits this long in a collective, send or recv for the
# others before failing (a failed or finished instance stops the wait at once; this catches
# instances stuck elsewhere). Long enough for a slow instance's compile-free work.
DEFAULT_COLLECTIVE_TIMEOUT_S = 120.0
# Across processes (a multi-process cpu client) the default is longer: the other processes
# may still be compiling or starting, and a dead peer is noticed at once anyway.
DEFAULT_CROSS_PROCESS_TIMEOUT_S = 300.0


def _read(env: str, default: int) -> int:
    raw = os.environ.get(env)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip(), 0)
    except ValueError:
        raise OpenHLOError(f"{env}={raw!r} is not an integer") from None
    if value <= 0:
        raise OpenHLOError(f"{env}={raw!r} must be positive")
    return value


def max_nesting_depth() -> int:
    """Deepest nesting of types, attributes and regions the parser accepts."""
    return _read(NESTING_DEPTH_ENV, DEFAULT_NESTING_DEPTH)


def max_constant_bytes() -> int:
    """Largest constant (in bytes, once materialized) the compiler and runtime will build.
    A splat constant is held as one element and costs nothing until it is materialized."""
    return _read(CONSTANT_BYTES_ENV, DEFAULT_CONSTANT_BYTES)


def constant_over_limit(what: str, nbytes: int):
    """A message saying ``what`` (a constant of ``nbytes`` bytes) is over
    ``max_constant_bytes()``, or None when it fits: the caller raises its own error type."""
    limit = max_constant_bytes()
    if nbytes <= limit:
        return None
    return f"{what} needs {nbytes} bytes, more than the limit of {limit} ({CONSTANT_BYTES_ENV})"


def max_buffer_bytes() -> int:
    """Largest single buffer (argument, result or temporary) a compiled program may need.
    Defaults to the machine's physical memory: a larger buffer could never be allocated."""
    return _read(BUFFER_BYTES_ENV, physical_memory_bytes())


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no limit we can know
        return 1 << 62


def collective_timeout_s(default: float = DEFAULT_COLLECTIVE_TIMEOUT_S) -> float:
    """Seconds any instance waits for the others in a collective, send or recv (every
    backend, one variable) before failing with an error naming what it waited for;
    ``default`` when the variable is unset (DEFAULT_CROSS_PROCESS_TIMEOUT_S across
    processes)."""
    raw = os.environ.get(COLLECTIVE_TIMEOUT_ENV)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise OpenHLOError(f"{COLLECTIVE_TIMEOUT_ENV}={raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise OpenHLOError(f"{COLLECTIVE_TIMEOUT_ENV}={raw!r} must be a positive number of "
                           f"seconds")
    return value
