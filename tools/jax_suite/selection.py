"""Which tests of a JAX test file a child pytest runs, and the variables that say so.

``openhlo jax-suite`` (runner.py) sets these variables; the pytest plugin (plugin.py) reads
them in the child. Kept apart from the plugin so that the command, which never imports
pytest, can share the names and the hash.
"""
from __future__ import annotations

import zlib

STREAM_ENV = "OPENHLO_JAX_SUITE_STREAM"
SELECT_ENV = "OPENHLO_JAX_SUITE_SELECT"
SAMPLE_ENV = "OPENHLO_JAX_SUITE_SAMPLE"
SHARD_ENV = "OPENHLO_JAX_SUITE_SHARD"
TEST_DUT_ENV = "OPENHLO_JAX_SUITE_TEST_DUT"


def key_of(nodeid: str) -> str:
    """``tests/lax_test.py::LaxTest::testAdd`` -> ``LaxTest::testAdd``."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def key_hash(key: str) -> int:
    """A stable hash (unlike ``hash``), so samples and shards are the same in every run."""
    return zlib.crc32(key.encode())


def select(keys: list[str], sample: int | None, shard: tuple[int, int] | None,
           only: set[str] | None) -> set[str]:
    """The keys to run: the ``sample`` with the smallest hashes, then shard ``i`` of ``n``
    by hash, then those in ``only``. Hash order spreads a sample over the whole file."""
    chosen = keys
    if sample is not None:
        chosen = sorted(chosen, key=lambda k: (key_hash(k), k))[:sample]
    if shard is not None:
        index, count = shard
        chosen = [k for k in chosen if key_hash(k) % count == index]
    if only is not None:
        chosen = [k for k in chosen if k in only]
    return set(chosen)
