"""The runtime counters from PyTorch, like torch_xla's ``metrics_report()``.

    import frameworks.torch as oht
    compiled = torch.compile(model, backend="openhlo")
    compiled(x); compiled(x)
    print(oht.metrics_report())     # compiles, executions, eager fallbacks by op, ...
    oht.reset_metrics()

The counts are pjrt's (pjrt/counters.py); the torch backend adds its eager fallbacks (each run
of an op outside compiled code) and its recompilations (a graph specialized again for new
input shapes, dtypes or values, or a new graph from Dynamo after a guard failed).
"""
from __future__ import annotations

import pjrt


def metrics_report(reset: bool = False) -> str:
    """The report table of the counts so far; ``reset=True`` zeroes them after reading."""
    text = pjrt.metrics().report()
    if reset:
        pjrt.reset_metrics()
    return text


def reset_metrics() -> None:
    """Zero the counts (all of pjrt's, not only the torch backend's)."""
    pjrt.reset_metrics()
