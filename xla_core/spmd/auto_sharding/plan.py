"""A chosen plan: the sharding of every argument, result and op of the entry function, what
each costs by the model, the objective's breakdown, and how the solve went.

``Plan.explain()`` is what ``openhlo opt --auto-sharding --explain-sharding`` prints: one line
per argument and op (layout, compute, communication, resharding into it, bytes per device),
then the totals and the solver's status and time.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Func, Operation
from stablehlo.ir.sharding import Mesh
from stablehlo.ir.types import TensorType

from xla_core.spmd.auto_sharding.costs import CostModel
from xla_core.spmd.auto_sharding.graph import CostGraph, last_uses
from xla_core.spmd.auto_sharding.layouts import layout_text
from xla_core.spmd.auto_sharding.solver import Solution


@dataclass(frozen=True)
class OpChoice:
    op: Operation | None  # None: an argument
    label: str  # "argument 0", "op 3 stablehlo.dot_general"
    outs: tuple  # per result: its layout (None: not a tensor)
    ins: tuple  # per operand: the layout it is used in
    compute_s: float
    communication_s: float
    resharding_s: float  # of its operands into ``ins``
    memory_bytes: float  # of its results, per device
    note: str


@dataclass(frozen=True)
class Plan:
    mesh: Mesh
    hardware: str
    arguments: tuple  # per argument: its layout
    results: tuple  # per result: its layout
    choices: tuple  # OpChoice per argument, then per op in program order
    compute_s: float
    communication_s: float
    resharding_s: float
    peak_memory_bytes: float  # per device, of the values live at the busiest point
    memory_limit: float | None
    solution: Solution

    @property
    def step_seconds(self) -> float:
        """The objective: estimated seconds of one step (nothing overlapped)."""
        return self.compute_s + self.communication_s + self.resharding_s

    def layouts(self) -> list:
        """Per op of the entry function (program order): its results' layouts."""
        return [c.outs for c in self.choices if c.op is not None]

    def explain(self) -> list:
        lines = [f"auto-sharding on mesh {self.mesh} with hardware {self.hardware!r}:"]
        for c in self.choices:
            outs = ", ".join("-" if o is None else layout_text(o) for o in c.outs)
            line = (f"{c.label}: {outs}  compute {_us(c.compute_s)}, communication "
                    f"{_us(c.communication_s)}, resharding {_us(c.resharding_s)}, memory "
                    f"{c.memory_bytes:.0f} B")
            lines.append(line + (f" ({c.note})" if c.note else ""))
        limit = "none" if self.memory_limit is None else f"{self.memory_limit:.0f} B"
        s = self.solution
        lines += [
            f"objective: {_us(self.step_seconds)} = compute {_us(self.compute_s)} + "
            f"communication {_us(self.communication_s)} + resharding "
            f"{_us(self.resharding_s)}",
            f"memory per device: peak {self.peak_memory_bytes:.0f} B (limit {limit})",
            f"solver: {s.status} in {s.seconds:.3f} s ({s.variables} variables, "
            f"{s.constraints} constraints)" + ("; the plan is the greedy fallback's"
                                               if s.fallback else ""),
        ]
        return lines


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def build_plan(func: Func, graph: CostGraph, solution: Solution, model: CostModel,
               hardware: str, memory_limit: float | None) -> Plan:
    choices = []
    totals = [0.0, 0.0, 0.0]
    layout = {}
    for g, k in enumerate(solution.choice):
        for member in graph.groups[g].members:
            for v, dims in zip(member.values, member.strategies[k].outs):
                layout[v] = dims
    number = {op: n for n, op in enumerate(func.body.operations)}
    members = sorted((m for group in graph.groups for m in group.members),
                     key=lambda m: (m.position, -1 if m.op is None else number[m.op]))
    args = list(func.body.arguments)
    copies = [0.0] * (len(func.body.operations) + 1)  # bytes of broadcast copies per position
    for member in members:
        g = graph.place[member.values[0]][0]
        s = member.strategies[solution.choice[g]]
        resharding = 0.0
        if member.op is not None:
            resharding = sum(graph.arrival_seconds(v, layout[v], want, model, member.op)
                             for v, want in zip(member.op.operands, s.ins)
                             if want is not None and v in layout)
            copies[member.position] += sum(
                model.local_bytes(v.type, want) for v, want in zip(member.op.operands, s.ins)
                if v in graph.copies and graph.first_users[v] is not member.op)
        memory = sum(model.local_bytes(v.type, d) for v, d in zip(member.values, s.outs)
                     if isinstance(v.type, TensorType))
        label = f"argument {args.index(member.values[0])}" if member.op is None \
            else f"op {number[member.op]} {member.op.name}"
        choices.append(OpChoice(member.op, label, s.outs, s.ins, s.compute, s.communication,
                                resharding, memory, s.note))
        totals[0] += s.compute
        totals[1] += s.communication
        totals[2] += resharding
    returned = func.body.terminator.operands
    return Plan(model.mesh, hardware, tuple(layout[a] for a in args),
                tuple(layout.get(v) for v in returned), tuple(choices), *totals,
                _peak_memory(func, layout, model, graph, copies), memory_limit, solution)


def _peak_memory(func: Func, layout: dict, model: CostModel, graph: CostGraph,
                 copies: list) -> float:
    """Bytes per device live at the busiest point of the program order under ``layout``,
    with ``copies[position]`` bytes of broadcast copies live at that position alone."""
    ops = func.body.operations
    last = last_uses(func, graph.first_users)
    born = {a: 0 for a in func.body.arguments}
    for position, op in enumerate(ops[:-1], start=1):
        for r in op.results:
            born[r] = position
    change = [0.0] * (len(ops) + 2)
    for position, nbytes in enumerate(copies):
        change[position] += nbytes
        change[position + 1] -= nbytes
    for v, start in born.items():
        if isinstance(v.type, TensorType) and layout.get(v) is not None:
            nbytes = model.local_bytes(v.type, layout[v])
            change[start] += nbytes
            change[last.get(v, start) + 1] -= nbytes
    peak, live = 0.0, 0.0
    for delta in change:
        live += delta
        peak = max(peak, live)
    return peak


__all__ = ["OpChoice", "Plan", "build_plan"]
