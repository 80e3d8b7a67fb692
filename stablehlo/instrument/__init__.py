"""Process-wide debugging instruments that the compiler writes into and every layer above
uses (here, at the bottom of the house, so the runtime contract and the adapters reach them
without importing the compiler): ``trace`` (a Chrome trace, ``OPENHLO_TRACE``) and ``dump`` (IR dumps,
``OPENHLO_DUMP_TO``). Both read their variable once, at first use, and cost a flag check
when unset. Runtime counters are the runtime's (pjrt/counters.py)."""
from stablehlo.instrument import dump, trace

__all__ = ["dump", "trace"]
