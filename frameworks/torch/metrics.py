"""The runtime counters from PyTorch, like torch_xla's ``metrics_report()``.

    import frameworks.torch as oht
    compiled = torch.compile(model, backend="openhlo")
    compiled(x); compiled(x)
    print(oht.metrics_report())     # compiles, executions, eager fallbacks by op, ...
    oht.reset_metrics()

The counts are pjrt's (pjrt/counters.py); the torch backend adds its eager fallbacks (each run
of an op outside compiled code) and its recompilations (a graph specialized again for new
input shapes, dtypes or values, or a new graph from Dynamo after a guard failed), and
below the table its dynamic-dim buckets (bounded_shapes.py): bucketed calls, bucket hits,
the padding overhead, and the graphs compiled per size with why.
"""
from __future__ import annotations

import pjrt

from frameworks.torch.bounded_shapes import STATS as _BUCKETS


def metrics_report(reset: bool = False) -> str:
    """The report table of the counts so far; ``reset=True`` zeroes them after reading."""
    text = pjrt.metrics().report()
    buckets = _BUCKETS.report()
    if buckets:
        text = f"{text}\n{buckets}"
    if reset:
        reset_metrics()
    return text


def reset_metrics() -> None:
    """Zero the counts (all of pjrt's, and the torch backend's buckets)."""
    pjrt.reset_metrics()
    _BUCKETS.reset()
