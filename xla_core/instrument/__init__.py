"""Process-wide debugging instruments that the compiler writes into and every layer above
uses: ``trace`` (a Chrome trace, ``OPENHLO_TRACE``) and ``dump`` (IR dumps,
``OPENHLO_DUMP_TO``). Both read their variable once, at first use, and cost a flag check
when unset. Runtime counters are the runtime's (pjrt/metrics.py)."""
from xla_core.instrument import dump, trace

__all__ = ["dump", "trace"]
