"""sharding-propagation: give every value of the entry function a sharding.

Sources, fixed and never changed by propagation (user annotations):
- the entry's argument shardings (``sdy.sharding`` / ``mhlo.sharding``);
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

Rules per op (``rules.py``): elementwise ops (convert, compare, select included) and
constraints map dimension to dimension; transpose permutes; broadcast_in_dim keeps operand
dims that are not expanded; reshape maps the major dimension of runs of equal element count;
reduce drops reduced dims; dot_general maps batch and free dims (contracting dims drop out:
the partitioner turns them into partial sums). Other ops get replicated results.

Conflicts, when operands propose different shardings (elementwise) or the same mesh axis for
two result dims (dot): the proposal splitting the value into more tiles wins, then the one
from a user annotation, then the larger operand tensor, then the earlier operand.

Each decision's source is kept in ``openhlo.sharding_origin`` next to the op's
``sdy.sharding``; ``explain(module)`` lists them, and the pass logs the same lines to the
``openhlo.spmd`` logger at INFO level (``openhlo opt --explain-sharding``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from stablehlo.ir.attributes import ArrayAttr, OpaqueAttr, StringAttr
from stablehlo.ir.core import Func, Module, Operation, Value
from stablehlo.ir.types import TensorType

from xla_core.passes.base import Pass, PassContext
from xla_core.spmd import rules
from xla_core.spmd.annotations import (automatic_target, CONSTRAINT, MANUAL_COMPUTATION, ORIGIN, PER_VALUE,
                                       MeshInfo, gspmd_sharding, manual_dims,
                                       op_dims, read_dims, replicated,
                                       with_sharding)
from xla_core.spmd.sharding import SpmdUnsupportedError

LOGGER = logging.getLogger("openhlo.spmd")
_REPLICATED_OPS = frozenset({"stablehlo.constant", "stablehlo.iota"})


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
        self.ops = [op for op in func.body.operations if op.name != "func.return"]
        self.decided: dict = {}

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
            target = op.attributes.get("call_target_name")
            if op.name != "stablehlo.custom_call" or getattr(target, "value", None) != "Sharding":
                continue
            shape = op.results[0].type.shape
            text = op.attributes["mhlo.sharding"].value
            sharding = gspmd_sharding(self.info, text, len(shape), op.where())
            constraint = Operation(CONSTRAINT, op.operands, op.result_types,
                                   {"sharding": OpaqueAttr(str(sharding))}, (), op.location)
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
        for i, value in enumerate(func.body.terminator.operands):
            where = f"@{func.name} result {i}"
            dims = read_dims(self.info, func.result_attrs(i), value.type.shape, where)
            if dims is not None and not value.is_block_argument and value not in self.decided:
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
            elif "mhlo.sharding" in op.attributes and len(op.results) == 1:
                shape = op.results[0].type.shape
                dims = read_dims(self.info, op.attributes, shape, op.where())
                self.decided[op.results[0]] = _Decision(dims, "annotation on the op", True)
            elif op.name in _REPLICATED_OPS:
                self.decided[op.results[0]] = _Decision(
                    replicated(len(op.results[0].type.shape)), f"{op.name}: replicated", True)

    def _decide(self, value: Value, dims, origin: str) -> bool:
        if value in self.decided or dims is None:
            return False
        # a proposal splitting a dim its axes do not divide leaves that dim whole
        size = self.info.mesh.axis_size
        dims = tuple(axes if extent % math.prod(size(a) for a in axes) == 0 else ()
                     for axes, extent in zip(dims, value.type.shape))
        self.decided[value] = _Decision(dims, origin)
        return True

    # -- sweeps ------------------------------------------------------------------------

    def _forward(self, final: bool) -> bool:
        changed = False
        for op in self.ops:
            if op.results and any(r not in self.decided for r in op.results):
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
        operands = [self._known(v) for v in op.operands]
        shape = op.results[0].type.shape
        if rules.is_elementwise(op):
            same = [(i, d) for i, d in enumerate(operands)
                    if d is not None and len(d) == len(shape)]
            if not same:
                return None
            i, dims = max(same, key=lambda c: self._rank(op.operands[c[0]], c[1], c[0]))
            return dims, f"from operand {i} of {name}"
        if operands and operands[0] is None:
            return None
        if name == "stablehlo.transpose":
            perm = list(op.attributes["permutation"].values)
            return rules.transpose_forward(operands[0], perm), "from operand 0 of transpose"
        if name == "stablehlo.broadcast_in_dim":
            if not final and not any(operands[0]):
                return None  # wait: its users may want it split
            mapping = list(op.attributes["broadcast_dimensions"].values)
            dims = rules.broadcast_forward(operands[0], op.operands[0].type.shape, shape, mapping)
            return dims, "from operand 0 of broadcast_in_dim"
        if name == "stablehlo.reshape":
            dims = rules.reshape_map(operands[0], op.operands[0].type.shape, shape,
                                     self.info.mesh.axis_size)
            return dims, "from operand 0 of reshape"
        if name == "stablehlo.reduce":
            reduced = set(op.attributes["dimensions"].values)
            return rules.reduce_forward(operands[0], reduced), "from operand 0 of reduce"
        if name in ("stablehlo.dot_general", "stablehlo.convolution") and \
                rules.contraction(op) is not None:
            return self._dot_forward(op, operands)
        return None

    def _rank(self, value: Value, dims, index: int) -> tuple:
        """Conflict order: more tiles, user annotation, larger tensor, earlier operand."""
        decision = self.decided.get(value)
        return (self.info.tiles(dims), bool(decision and decision.user),
                math.prod(value.type.shape), -index)

    def _dot_forward(self, op: Operation, operands):
        lhs, rhs = operands
        if lhs is None and rhs is None:
            return None
        lhs_pos, rhs_pos, _ = rules.contraction(op)
        rank = len(op.results[0].type.shape)
        proposals = []  # (rank key, result dim, axes, operand index)
        for index, (dims, positions) in enumerate(((lhs, lhs_pos), (rhs, rhs_pos))):
            if dims is None:
                continue
            key = self._rank(op.operands[index], dims, index)
            for d, r in positions.items():
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
        if not op.results or op.results[0] not in self.decided:
            return None
        dims = self.decided[op.results[0]].dims
        operand = op.operands[i]
        name = op.name
        if name == MANUAL_COMPUTATION:
            return manual_dims(self.info, op)[0][i]
        if rules.is_elementwise(op) or name == CONSTRAINT:
            return dims if len(operand.type.shape) == len(dims) else None
        if name == "stablehlo.transpose":
            return rules.transpose_backward(dims, list(op.attributes["permutation"].values))
        if name == "stablehlo.broadcast_in_dim":
            mapping = list(op.attributes["broadcast_dimensions"].values)
            return rules.broadcast_backward(dims, operand.type.shape,
                                            op.results[0].type.shape, mapping)
        if name == "stablehlo.reshape":
            return rules.reshape_map(dims, op.results[0].type.shape, operand.type.shape,
                                     self.info.mesh.axis_size)
        if name == "stablehlo.reduce" and i < len(op.operands) // 2:
            reduced = set(op.attributes["dimensions"].values)
            return rules.reduce_backward(dims, len(operand.type.shape), reduced)
        if name in ("stablehlo.dot_general", "stablehlo.convolution") and \
                rules.contraction(op) is not None:
            return self._dot_backward(op, i, dims)
        return None

    def _dot_backward(self, op: Operation, i: int, dims) -> tuple:
        lhs_pos, rhs_pos, pairs = rules.contraction(op)
        positions = (lhs_pos, rhs_pos)[i]
        other = self._known(op.operands[1 - i])
        lc, rc = [p[0] for p in pairs], [p[1] for p in pairs]
        mine, theirs = (lc, rc) if i == 0 else (rc, lc)
        out = [()] * len(op.operands[i].type.shape)
        for d, r in positions.items():
            out[d] = dims[r]
        used = {a for axes in out for a in axes}
        if other is not None:  # split contracting dims alike: partial sums, no gather
            for d, e in zip(mine, theirs):
                if not used & set(other[e]):
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
            op.attributes[PER_VALUE] = OpaqueAttr(
                "#sdy.sharding_per_value<[" + ", ".join(info.text(d.dims) for d in decisions)
                + "]>")
            op.attributes[ORIGIN] = StringAttr("; ".join(d.origin for d in decisions))
        args = func.body.arguments
        func.op.attributes["arg_attrs"] = ArrayAttr(tuple(
            with_sharding(func.arg_attrs(i), info, self._arg_dims(a)) for i, a in enumerate(args)))
        returned = func.body.terminator.operands
        results = []
        for i, value in enumerate(returned):
            dims = read_dims(info, func.result_attrs(i), value.type.shape, "")
            if dims is None:
                dims = self.decided[value].dims
            results.append(with_sharding(func.result_attrs(i), info, dims))
        func.op.attributes["res_attrs"] = ArrayAttr(tuple(results))

    def _arg_dims(self, arg: Value) -> tuple:
        decision = self.decided.get(arg)
        return decision.dims if decision else replicated(len(arg.type.shape))


def explain(module: Module, entry: str = "main") -> list:
    """One line per op of a propagated entry function: op, shardings, and where they came
    from."""
    func = module.lookup(entry)
    lines = []
    for i, arg in enumerate(func.body.arguments):
        lines.append(f"argument {i}: {func.arg_attrs(i).get('sdy.sharding').text}")
    for n, op in enumerate(func.body.operations):
        if op.name == CONSTRAINT:
            lines.append(f"op {n} {op.name}: {op.attributes['sharding'].text} (user constraint)")
        elif PER_VALUE in op.attributes:
            lines.append(f"op {n} {op.name}: {op.attributes[PER_VALUE].text} "
                         f"({op.attributes[ORIGIN].value})")
    return lines


__all__ = ["LOGGER", "ShardingPropagationPass", "explain"]
