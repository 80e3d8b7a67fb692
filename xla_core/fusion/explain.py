"""Explanations of fusion decisions: one line per fusion made or refused.

Lines go to the ``openhlo.fusion`` logger at INFO level (``openhlo opt
--explain-fusion`` prints them on stderr) and are kept on the ``Explain``
object, whose ``counters`` (fused, refused, not_fusible, fusions) tests assert
on. Values are named as the printer names them in the module before fusion (``%3``,
``%cst_1``, ``%arg0``: ``FusionGraph.names``), so a line can be matched with the text of
``openhlo opt`` run with the passes before ``fusion``.
"""
from __future__ import annotations

import logging
from collections import Counter

from xla_core.fusion.graph import FusionGraph, FusionNode
from xla_core.fusion.legality import describe

LOGGER = logging.getLogger("openhlo.fusion")


class Explain:
    """Collects explanation lines; formatting is skipped when nobody listens."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = LOGGER.isEnabledFor(logging.INFO) if enabled is None else enabled
        self.lines: list[str] = []
        self.counters: Counter = Counter()
        self.names: dict = {}  # of the graph being explained (``explain_graph``)

    def explain_graph(self, graph: FusionGraph) -> None:
        """Name values as ``graph`` does from now on."""
        self.names = graph.names

    def _describe(self, node: FusionNode) -> str:
        return describe(node, self.names)

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        LOGGER.info(line)

    def fused(self, producer: FusionNode, consumers: list[FusionNode], saved: float) -> None:
        self.counters["fused"] += 1
        if self.enabled:
            into = ", ".join(self._describe(c) for c in sorted(consumers, key=lambda n: n.last))
            self._emit(f"fused {self._describe(producer)} into {into}: "
                       f"saves {saved * 1e6:.2f} us")

    def merged(self, a: FusionNode, b: FusionNode, how: str, saved: float) -> None:
        self.counters["multi_output"] += 1
        if self.enabled:
            self._emit(f"merged {self._describe(a)} with {self._describe(b)} "
                       f"({how} multi-output): saves {saved * 1e6:.2f} us")

    def refused(self, producer: FusionNode, consumer: FusionNode | None, reason: str) -> None:
        self.counters["refused"] += 1
        if self.enabled:
            into = f" into {self._describe(consumer)}" if consumer is not None else ""
            self._emit(f"refused {self._describe(producer)}{into}: {reason}")

    def not_fusible(self, node: FusionNode) -> None:
        self.counters["not_fusible"] += 1
        if self.enabled:
            self._emit(f"not fusible {self._describe(node)}: {node.why_not}")

    def made(self, name: str, kind: str, n_ops: int, n_inputs: int, n_outputs: int) -> None:
        self.counters["fusions"] += 1
        self.counters[f"fusions_{kind}"] += 1
        if self.enabled:
            self._emit(f"made @{name} ({kind}): {n_ops} ops, {n_inputs} operands, "
                       f"{n_outputs} results")
