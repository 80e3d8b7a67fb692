"""The ``fusion`` pass: priority fusion, then multi-output fusion, then outlining.

Runs on every block of every function separately: function bodies and the
bodies of ``while`` / ``if`` / ``case`` (ops with regions never fuse as a whole;
their insides are fused in place). Decompositions of existing fusions are left
alone and existing composites are opaque, so running the pass again keeps
earlier fusions valid (it may still fuse ops around them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stablehlo.ir.core import Block, Module
from stablehlo.text.names import printed_names
from xla_core.cost import hardware as lookup_hardware
from xla_core.fusion.codegen_hook import GENERATE_ALL, CodegenHook
from xla_core.fusion.explain import Explain
from xla_core.fusion.graph import FusionGraph
from xla_core.fusion.legality import FUSION_NAME, why_not_fusible
from xla_core.fusion.multi_output import multi_output_fusion
from xla_core.fusion.outline import FusionNamer, outline_block
from xla_core.fusion.priority import CostCache, explain_refusals, priority_fusion
from stablehlo.instrument import dump
from xla_core.passes.base import Pass, PassContext

# Control flow whose bodies are fused separately (other regions are scalar
# combiners and comparators that stay as they are).
_BODY_OWNERS = frozenset({"stablehlo.while", "stablehlo.if", "stablehlo.case"})

DEFAULT_MAX_OPERANDS = 64


def fuse_module(module: Module, *, hardware: str = "cpu", devices_per_host: int = 0,
                max_operands: int = DEFAULT_MAX_OPERANDS, multi_output: bool = True,
                explain: Explain | None = None, codegen: CodegenHook = GENERATE_ALL) -> Explain:
    """Fuse ``module`` in place; returns the explanation (lines and counters). Costs are
    estimated on ``hardware`` shared by ``devices_per_host`` devices (0: as registered).
    ``codegen``: the backend's hook saying what its generated kernels can hold
    (codegen_hook.py)."""
    explain = explain if explain is not None else Explain()
    costs = CostCache(lookup_hardware(hardware, devices_per_host))
    namer = FusionNamer(module)
    names = printed_names(module.op)  # before any block is outlined (see explain.py)
    for block in fusible_blocks(module):
        costs.start_graph()
        graph = FusionGraph(block, why_not_fusible, costs.flops, names, codegen)
        explain.explain_graph(graph)
        priority_fusion(graph, costs, max_operands, explain)
        explain_refusals(graph, costs, max_operands, explain)
        if multi_output:
            multi_output_fusion(graph, costs, max_operands, explain)
        outline_block(module, graph, namer, explain)
    return explain


def fusible_blocks(module: Module) -> list[Block]:
    """Function bodies (not fusion decompositions) and control-flow bodies in them."""
    decompositions = set()
    for op in module.walk():
        if op.name == "stablehlo.composite" and \
                getattr(op.attributes.get("name"), "value", None) == FUSION_NAME:
            decompositions.add(op.attributes["decomposition"].name)
    blocks = []
    for func in module.functions():
        if func.name in decompositions or func.body is None:
            continue
        stack = [func.body]
        while stack:
            block = stack.pop()
            blocks.append(block)
            for op in block.operations:
                if op.name in _BODY_OWNERS:
                    stack.extend(b for r in op.regions for b in r.blocks)
    return blocks


@dataclass(frozen=True)
class FusionPass(Pass):
    """Priority fusion into loop / reduction / output fusions (see README.md, Fusion).
    ``codegen`` is the backend's hook (codegen_hook.py), set by the backend's pipeline
    construction; it is no command-line option."""
    name = "fusion"
    hardware: str = "cpu"
    devices_per_host: int = 0
    max_operands: int = DEFAULT_MAX_OPERANDS
    multi_output: bool = True
    codegen: CodegenHook = field(default=GENERATE_ALL, compare=False, repr=False)

    def run(self, module: Module, ctx: PassContext) -> bool:
        program_dump = dump.current()  # the decisions are spelled out only when dumped
        explain = fuse_module(module, hardware=self.hardware,
                              devices_per_host=self.devices_per_host,
                              max_operands=self.max_operands,
                              multi_output=self.multi_output, codegen=self.codegen,
                              explain=Explain(enabled=True) if program_dump else None)
        if program_dump is not None:
            program_dump.write("fusion.explain", "\n".join(explain.lines), "txt")
        return explain.counters["fusions"] > 0
