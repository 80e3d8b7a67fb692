"""sharding-propagation: give every value of the entry function a sharding.

Sources, fixed and never changed by propagation (user annotations):
- the entry's argument shardings (``sdy.sharding`` / ``mhlo.sharding``); an argument without
  one is replicated, as JAX means an unspecified ``in_sharding`` (its lowering writes no
  attribute, and XLA does not propagate into parameters unless asked to);
- the result shardings, given to the returned value when it is an op result;
- ``sdy.sharding_constraint`` ops (and GSPMD's ``custom_call @Sharding``, rewritten into one),
  and shardings written on ops (``sdy.sharding`` per value, single-result ``mhlo.sharding``);
- constants and iotas: replicated.

Then, to a fixpoint: a forward sweep fills unknown results from their operands, a backward
sweep (in reverse order) fills unknown operands from the ops using them. A value's sharding is
set once (monotone, so it terminates); ops are visited in program order, so cheap pass-through
chains decide before the dots that consume them see them. Forward proposals that split
nothing though an operand is split (a broadcast of a scalar, a dot or reduce whose split dims
all contract) wait until everything else has propagated: such a value takes the sharding its
users want (a dot's partial sums are then sliced to it, or reduce-scattered, rather than kept
whole) rather than imposing replication on them. What is still unknown at the end is replicated.

Rules per op (the op's ``Split`` kind in ``op_rules.SPMD_RULES``, the maps in ``rules.py``):
elementwise ops (convert, compare, select included) and
constraints map dimension to dimension; transpose permutes; broadcast_in_dim keeps operand
dims that are not expanded; reshape maps the major dimension of runs of equal element count;
reduce drops reduced dims; dot_general maps batch and free dims (contracting dims drop out:
the partitioner turns them into partial sums); gather maps the operand's passthrough dims and
the indices' batch dims; scatter maps the input's passthrough dims (its scattered update dims
drop out like contracting ones); dynamic_slice and dynamic_update_slice map the dims they span
whole. Other ops get replicated results.

Control flow (while, case, if) is propagated through, its regions' ops being visited in program
order with the others. A while's carried value k is one value seen in four places (result k,
the condition's and the body's block argument k, the body's returned value k): they take one
sharding, decided once for all four, so each iteration starts from the layout the last one
left. Result k of a case/if and each branch's returned value k likewise. The operand k of a
while proposes the carried sharding (forward) and takes it (backward) like an elementwise
operand: the partitioner reshards it once, before the loop.

Conflicts, when operands propose different shardings (elementwise) or the same mesh axis for
two result dims (dot): the proposal splitting the value into more tiles wins, then the one
from the larger operand tensor, then the one from a user annotation, then the earlier operand.
Size before annotation: in a dot, the losing operand is the one gathered, so an FSDP weight
(annotated, small) yields to the activation (batch-split, large) as in XLA, rather than making
the activation gathered and the rest of the backward split on the weight's dim. Elementwise
operands have one shape, so there the annotation decides.

Each decision's source is kept in ``openhlo.sharding_origin`` next to the op's
``sdy.sharding``; ``explain(module)`` lists them, and the pass logs the same lines to the
``openhlo.spmd`` logger at INFO level (``openhlo opt --explain-sharding``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from stablehlo.ir.attributes import ArrayAttr, StringAttr
from stablehlo.ir.core import Func, Module, Operation, Value
from stablehlo.ir.ops.control_flow import custom_call_target
from stablehlo.ir.sharding import ShardingAttr, ShardingPerValueAttr
from stablehlo.ir.types import TensorType

from xla_core.passes.base import Pass, PassContext
from xla_core.spmd import rules
from xla_core.spmd.op_rules import DIM_MAPPED, Split, spmd_rule
from xla_core.spmd.annotations import (CONSTRAINT, MANUAL_COMPUTATION, ORIGIN, PER_VALUE,
                                       MeshInfo, automatic_target, gspmd_result_dims,
                                       gspmd_sharding, manual_dims,
                                       op_dims, read_dims, replicated, with_sharding)
from xla_core.spmd.sharding import SpmdUnsupportedError

LOGGER = logging.getLogger("openhlo.spmd")


@dataclass
class _Decision:
    dims: tuple
    origin: str
    user: bool = False


@dataclass(frozen=True)
class ShardingPropagationPass(Pass):
    name = "sharding-propagation"
    entry: str = "main"
    num_devices: int = 0

    def run(self, module: Module, ctx: PassContext) -> bool:
        target = automatic_target(module, self.entry, self.num_devices)
        if target is None:
            return False
        _Propagation(module, *target).run()
        if LOGGER.isEnabledFor(logging.INFO):
            for line in explain(module, self.entry):
                LOGGER.info("sharding of @%s %s", self.entry, line)
        return True


class _Propagation:
    def __init__(self, module: Module, func: Func, info: MeshInfo):
        self.module = module
        self.func = func
        self.info = info
        self.ops = list(_ops(func.body.operations))
        self.decided: dict = {}
        self.tied = _tied_values(self.ops)

    def run(self) -> None:
        self._check_types()
        self._rewrite_gspmd_constraints()
        self._seed()
        for final in (False, True):
            changed = True
            while changed:
                changed = self._forward(final) | self._backward()
        for op in self.ops:
            for r in op.results:
                self._decide(r, replicated(len(r.type.shape)), "default: nothing propagated "
                             "to it, replicated")
        self._write()

    def _check_types(self) -> None:
        for i, t in enumerate(self.func.type.inputs):
            if not isinstance(t, TensorType):
                raise SpmdUnsupportedError(f"@{self.func.name} argument {i} of type {t}: only "
                                           f"tensors are partitioned")
        for op in self.ops:
            for r in op.results:
                if not isinstance(r.type, TensorType):
                    raise SpmdUnsupportedError(f"{op.where()} result {r.index} of type "
                                               f"{r.type}: only tensors are partitioned")

    # -- sources -----------------------------------------------------------------------

    def _rewrite_gspmd_constraints(self) -> None:
        """``custom_call @Sharding`` (GSPMD's constraint) -> ``sdy.sharding_constraint``."""
        for i, op in enumerate(self.ops):
            if custom_call_target(op) != "Sharding":
                continue
            shape = op.results[0].type.shape
            sharding = gspmd_sharding(self.info, op.attributes["mhlo.sharding"], len(shape),
                                      op.where())
            constraint = Operation(CONSTRAINT, op.operands, op.result_types,
                                   {"sharding": ShardingAttr.of(sharding)}, (), op.location)
            constraint.results = op.results
            for r in op.results:
                r.owner = constraint
            constraint.parent = op.parent
            block = op.parent.operations
            block[block.index(op)] = constraint
            self.ops[i] = constraint

    def _seed(self) -> None:
        func = self.func
        for i, arg in enumerate(func.body.arguments):
            where = f"@{func.name} argument {i}"
            dims = read_dims(self.info, func.arg_attrs(i), arg.type.shape, where)
            if dims is not None:
                self.decided[arg] = _Decision(dims, f"{where} annotation", True)
            else:
                self.decided[arg] = _Decision(replicated(len(arg.type.shape)),
                                              f"{where} unannotated: replicated")
        for i, value in enumerate(func.body.terminator.operands):
            where = f"@{func.name} result {i}"
            dims = read_dims(self.info, func.result_attrs(i), value.type.shape, where)
            # a loop's result keeps the layout the loop runs in (from its operands and body),
            # resharded on return: a replicated result must not make the loop run whole
            if dims is not None and not value.is_block_argument and value not in self.decided \
                    and value.owner.name != "stablehlo.while":
                self.decided[value] = _Decision(dims, f"{where} annotation", True)
        for op in self.ops:
            if op.name == MANUAL_COMPUTATION:  # its body fixes how its results are laid out
                for r, dims in zip(op.results, manual_dims(self.info, op)[1]):
                    self.decided[r] = _Decision(dims, "manual computation out_shardings", True)
            elif op.name == CONSTRAINT:
                dims = op_dims(self.info, op)[0]
                self.decided[op.results[0]] = _Decision(dims, "sharding constraint", True)
            elif PER_VALUE in op.attributes:  # a sharding written on the op by the user
                for r, dims in zip(op.results, op_dims(self.info, op)):
                    self.decided[r] = _Decision(dims, "annotation on the op", True)
            elif "mhlo.sharding" in op.attributes and op.results:
                for r, dims in zip(op.results, gspmd_result_dims(self.info, op)):
                    self.decided[r] = _Decision(dims, "annotation on the op", True)
            elif spmd_rule(op).split is Split.REPLICATED:
                self.decided[op.results[0]] = _Decision(
                    replicated(len(op.results[0].type.shape)), f"{op.name}: replicated", True)
        # a carried value seeded in one of its places (an annotated while result, a constant
        # returned by the body) is seeded in all, the first seeded place deciding
        for value in [v for v in self.decided if v in self.tied]:
            self._decide(value, self.decided[value].dims, self.decided[value].origin)

    def _decide(self, value: Value, dims, origin: str) -> bool:
        if dims is None:
            return False
        # a proposal splitting a dim its axes do not divide leaves that dim whole
        size = self.info.mesh.axis_size
        dims = tuple(axes if extent % math.prod(size(a) for a in axes) == 0 else ()
                     for axes, extent in zip(dims, value.type.shape))
        user = value in self.decided and self.decided[value].user
        changed = False
        tied = f"as its loop carry or branch result: {origin}"
        for v in self.tied.get(value, (value,)):
            if v not in self.decided:
                self.decided[v] = _Decision(dims, origin if v is value else tied, user)
                changed = True
        return changed

    # -- sweeps ------------------------------------------------------------------------

    def _forward(self, final: bool) -> bool:
        changed = False
        for op in self.ops:
            if op.name == "stablehlo.while":  # operand k proposes carried value k
                for operand, r in zip(op.operands, op.results):
                    changed |= self._decide(r, self._known(operand), "from the while operand")
            elif op.results and any(r not in self.decided for r in op.results):
                proposal = self._from_operands(op, final)
                if proposal is not None and not final and self._loses_splits(op, proposal[0]):
                    continue  # a dot or reduce over split dims: its users may want a split
                if proposal is not None:
                    dims, origin = proposal
                    for r in op.results:
                        changed |= self._decide(r, dims, origin)
        return changed

    def _loses_splits(self, op: Operation, dims) -> bool:
        """Whether ``dims`` splits nothing though some operand of ``op`` is split."""
        return not any(dims) and any(any(self._known(v) or ()) for v in op.operands)

    def _backward(self) -> bool:
        changed = False
        for op in reversed(self.ops):
            for i, operand in enumerate(op.operands):
                if operand in self.decided:
                    continue
                proposal = self._from_result(op, i)
                if proposal is not None:
                    changed |= self._decide(operand, proposal,
                                            f"from its user {op.name} (operand {i})")
        return changed

    def _known(self, value: Value):
        decision = self.decided.get(value)
        return None if decision is None else decision.dims

    def _from_operands(self, op: Operation, final: bool):
        """``(dims, origin)`` proposed for ``op``'s results by its operands, or None."""
        name = op.name
        split = spmd_rule(op).split
        operands = [self._known(v) for v in op.operands]
        shape = op.results[0].type.shape
        if split is Split.ELEMENTWISE:
            same = [(i, d) for i, d in enumerate(operands)
                    if d is not None and len(d) == len(shape)]
            if not same:
                return None
            i, dims = max(same, key=lambda c: self._rank(op.operands[c[0]], c[1], c[0]))
            return dims, f"from operand {i} of {name}"
        mapped = rules.dim_map(op) if split in DIM_MAPPED else None
        if mapped is not None:  # each operand known proposes (a scatter's input often waits)
            return self._mapped_forward(op, operands, mapped[0])
        if operands and operands[0] is None:
            return None
        if split is Split.TRANSPOSE:
            perm = list(op.attributes["permutation"].values)
            return rules.transpose_forward(operands[0], perm), "from operand 0 of transpose"
        if split is Split.BROADCAST:
            if not final and not any(operands[0]):
                return None  # wait: its users may want it split
            mapping = list(op.attributes["broadcast_dimensions"].values)
            dims = rules.broadcast_forward(operands[0], op.operands[0].type.shape, shape, mapping)
            return dims, "from operand 0 of broadcast_in_dim"
        if split is Split.RESHAPE:
            dims = rules.reshape_map(operands[0], op.operands[0].type.shape, shape,
                                     self.info.mesh.axis_size)
            return dims, "from operand 0 of reshape"
        if split is Split.REDUCE:
            reduced = set(op.attributes["dimensions"].values)
            return rules.reduce_forward(operands[0], reduced), "from operand 0 of reduce"
        return None

    def _rank(self, value: Value, dims, index: int) -> tuple:
        """Conflict order: more tiles, larger tensor, user annotation, earlier operand."""
        decision = self.decided.get(value)
        return (self.info.tiles(dims), math.prod(value.type.shape),
                bool(decision and decision.user), -index)

    def _mapped_forward(self, op: Operation, operands, positions):
        """Each operand dim mapping to a result dim proposes its axes; a higher-ranked operand
        wins a dim, and an axis splits one result dim only."""
        if all(dims is None for dims in operands):
            return None
        rank = len(op.results[0].type.shape)
        proposals = []  # (rank key, result dim, axes, operand index)
        for index, (dims, at) in enumerate(zip(operands, positions)):
            if dims is None:
                continue
            key = self._rank(op.operands[index], dims, index)
            for d, r in at.items():
                if dims[d]:
                    proposals.append((key, r, dims[d], index))
        out = [()] * rank
        used: set = set()
        sources = set()
        for key, r, axes, index in sorted(proposals, key=lambda p: p[0], reverse=True):
            if out[r] or used & set(axes):
                continue  # the higher-ranked operand already split this dim or used the axes
            out[r] = axes
            used |= set(axes)
            sources.add(index)
        which = " and ".join(f"operand {i}" for i in sorted(sources)) or \
            "operands (no split dim reaches the result)"
        return tuple(out), f"from {which} of {op.name.removeprefix('stablehlo.')}"

    def _from_result(self, op: Operation, i: int):
        """Dims proposed for operand ``i`` of ``op`` by ``op``'s (known) result sharding."""
        if op.name == "stablehlo.while":  # carried value i proposes its operand's layout
            return self._known(op.results[i])
        if not op.results or op.results[0] not in self.decided:
            return None
        dims = self.decided[op.results[0]].dims
        operand = op.operands[i]
        name = op.name
        if name == MANUAL_COMPUTATION:
            return manual_dims(self.info, op)[0][i]
        split = spmd_rule(op).split
        if split is Split.ELEMENTWISE or name == CONSTRAINT:
            return dims if len(operand.type.shape) == len(dims) else None
        if split is Split.TRANSPOSE:
            return rules.transpose_backward(dims, list(op.attributes["permutation"].values))
        if split is Split.BROADCAST:
            mapping = list(op.attributes["broadcast_dimensions"].values)
            return rules.broadcast_backward(dims, operand.type.shape,
                                            op.results[0].type.shape, mapping)
        if split is Split.RESHAPE:
            return rules.reshape_map(dims, op.results[0].type.shape, operand.type.shape,
                                     self.info.mesh.axis_size)
        if split is Split.REDUCE and i < len(op.operands) // 2:
            reduced = set(op.attributes["dimensions"].values)
            return rules.reduce_backward(dims, len(operand.type.shape), reduced)
        mapped = rules.dim_map(op) if split in DIM_MAPPED else None
        if mapped is not None:
            return self._mapped_backward(op, i, dims, *mapped)
        return None

    def _mapped_backward(self, op: Operation, i: int, dims, positions, pairs) -> tuple:
        out = [()] * len(op.operands[i].type.shape)
        for d, r in positions[i].items():
            out[d] = dims[r]
        used = {a for axes in out for a in axes}
        for pair in pairs:  # split summed (scattered) dims alike: partial results, no gather
            if i not in (pair[0][0], pair[1][0]):
                continue
            (_, d), (j, e) = pair if pair[0][0] == i else pair[::-1]
            other = self._known(op.operands[j])
            if other is not None and not used & set(other[e]):
                out[d] = other[e]
                used |= set(other[e])
        return tuple(out)

    # -- output ------------------------------------------------------------------------

    def _write(self) -> None:
        info, func = self.info, self.func
        for op in self.ops:
            if op.name == CONSTRAINT or not op.results:
                continue
            decisions = [self.decided[r] for r in op.results]
            op.attributes.pop("mhlo.sharding", None)  # now spelled sdy.sharding
            op.attributes[PER_VALUE] = ShardingPerValueAttr.of(
                info.sharding(d.dims) for d in decisions)
            op.attributes[ORIGIN] = StringAttr("; ".join(d.origin for d in decisions))
        args = func.body.arguments
        func.op.attributes["arg_attrs"] = ArrayAttr(tuple(
            with_sharding(func.arg_attrs(i), info, self.decided[a].dims)
            for i, a in enumerate(args)))
        returned = func.body.terminator.operands
        results = []
        for i, value in enumerate(returned):
            dims = read_dims(info, func.result_attrs(i), value.type.shape, "")
            if dims is None:
                dims = self.decided[value].dims
            results.append(with_sharding(func.result_attrs(i), info, dims))
        func.op.attributes["res_attrs"] = ArrayAttr(tuple(results))


def _ops(operations):
    """The ops propagation decides, in program order: those of the function and, after a
    control-flow op, those of its regions (their terminators left out)."""
    for op in operations:
        if op.name in ("func.return", "stablehlo.return"):
            continue
        yield op
        if spmd_rule(op).split is Split.CONTROL_FLOW:
            for region in op.regions:
                yield from _ops(region.block.operations)


def _tied_values(ops) -> dict:
    """Value -> the values that must share its sharding (itself included): the places of a
    while's carried values, and a case/if's results with what its branches return."""
    groups: dict = {}

    def tie(values):
        merged = []
        for v in values:
            for w in groups.get(v, [v]):
                if w not in merged:
                    merged.append(w)
        for v in merged:
            groups[v] = merged

    for op in ops:
        if op.name == "stablehlo.while":
            cond, body = (r.block for r in op.regions)
            for places in zip(op.results, cond.arguments, body.arguments,
                              body.terminator.operands):
                tie(places)
        elif op.name in ("stablehlo.case", "stablehlo.if"):
            for k, r in enumerate(op.results):
                tie([r] + [region.block.terminator.operands[k] for region in op.regions])
    return groups


def explain(module: Module, entry: str = "main") -> list:
    """One line per op of a propagated entry function (ops in control-flow regions after
    their op, numbered on): op, shardings, and where they came from."""
    func = module.lookup(entry)
    lines = []
    for i, arg in enumerate(func.body.arguments):
        lines.append(f"argument {i}: {func.arg_attrs(i).get('sdy.sharding').text}")
    for n, op in enumerate(_ops(func.body.operations)):
        if op.name == CONSTRAINT:
            lines.append(f"op {n} {op.name}: {op.attributes['sharding'].text} (user constraint)")
        elif PER_VALUE in op.attributes:
            lines.append(f"op {n} {op.name}: {op.attributes[PER_VALUE].text} "
                         f"({op.attributes[ORIGIN].value})")
    return lines


__all__ = ["LOGGER", "ShardingPropagationPass", "explain"]
