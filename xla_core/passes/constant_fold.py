"""constant-fold: evaluate ops whose operands are all constants, at compile time.

An op folds when every operand (and every value its regions use from outside
them) is a ``stablehlo.constant`` with a dense value, when it is pure and
deterministic (see ``_foldable``), and when its results are static tensors of
non-quantized types holding at most ``max_elements`` elements together. It is
evaluated by the reference interpreter's own kernel for it (``KERNELS`` and
``quantization.plan``, called as the evaluator calls them, under the same
IEEE error state), and replaced by one ``stablehlo.constant`` per result,
in its place. Ops are visited in program order, nested blocks included, so a
chain of ops on constants folds in one run: each folded result counts as a
constant for the ops after it.

Not folded, and left exactly as they are:

* ops whose definition declares an effect (``op_effects``: infeed/outfeed,
  send/recv, rng, collectives, replica_id/partition_id, check ops, barriers,
  async ops, side-effecting custom calls) and unregistered ops;
* ops that are pure but must stay by design (``_NEVER`` below);
* ops with regions holding any such op (an ``if`` with a ``while`` inside);
* ops whose evaluation raises: the error is the program's, and surfaces when
  it runs, not when it compiles;
* operands or results that are dynamic, quantized, tokens, tuples, or carry
  an encoding;
* results with more than ``max_elements`` elements in all, splats included:
  a folded broadcast of a scalar to a huge tensor would bloat the program
  (one limit, no exceptions, so what folds is easy to predict);
* operands of more than ``stablehlo.limits.max_constant_bytes()`` together: a
  splat constant is held as one element, and evaluating the op would
  materialize it.

Constants that only fed folded ops are erased, so a folded chain leaves one
constant; constants that were already unused are left to ``dce``.

A folded value is the reference interpreter's result. Where the spec leaves
an order open (float reductions, scatter with repeated indices) a backend
computing the op at run time might round differently; the fold fixes the
interpreter's answer, as XLA's constant folding fixes its evaluator's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from stablehlo.interpreter import KERNELS, EvalContext, quantization
from stablehlo.interpreter.values import coerce
from stablehlo.ir.attributes import DenseElementsAttr, dense
from stablehlo.ir.core import Block, Module, Operation, Value
from stablehlo.ir.ops.base import Effect, op_effects
from stablehlo.ir.types import QuantizedType, TensorType, Type, element_facts
from stablehlo.limits import max_constant_bytes


from xla_core.ir_utils import blocks_of, replace_uses
from xla_core.passes.base import Pass, PassContext

_CONSTANT = "stablehlo.constant"

# Never folded though pure: rng_bit_generator draws random numbers (a program
# keeps its generator to run it); a custom call without side effects is still
# the backend's to run (the interpreter knows only the check targets); a while
# loop's trip count is unknown until it runs, so evaluating it could take any
# time (its body is still folded inside); calls and composites are as pure as
# their callees, which this pass does not analyse (run inline first).
_NEVER = frozenset({
    "stablehlo.rng_bit_generator", "stablehlo.custom_call", "stablehlo.while", "func.call",
    "stablehlo.composite",
})


@dataclass(frozen=True)
class ConstantFoldPass(Pass):
    name = "constant-fold"
    max_elements: int = 65536

    def run(self, module: Module, ctx: PassContext) -> bool:
        folder = _Folder(module, self.max_elements)
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            folder.start_function()
            if folder.fold_block(func.body):
                replace_uses(func.op, folder.replacements)
                _erase_orphans(func.op, folder.orphans)
                changed = True
        return changed


class _Folder:
    """Folding state for one function: known constants, replacements, orphans."""

    def __init__(self, module: Module, max_elements: int):
        self.module = module
        self.max_elements = max_elements
        self._ctx: EvalContext | None = None
        self.start_function()

    def start_function(self) -> None:
        self.constants: dict[Value, np.ndarray] = {}   # value -> its array
        self.replacements: dict[Value, Value] = {}    # folded result -> new constant
        self.orphans: set[Operation] = set()          # constants that may now be unused

    def fold_block(self, block: Block) -> bool:
        changed = False
        ops = []
        for op in block.operations:
            if op.name == _CONSTANT:
                self._record_constant(op)
                ops.append(op)
                continue
            captured = _captured_values(op) if op.regions else set()
            outs = self._evaluate(op, captured) if self._foldable(op, captured) else None
            if outs is None:
                for region in op.regions:
                    for inner in region.blocks:
                        changed |= self.fold_block(inner)
                ops.append(op)
                continue
            ops.extend(self._replace(op, outs, captured, block))
            changed = True
        if changed:
            block.operations[:] = ops
        return changed

    def _record_constant(self, op: Operation) -> None:
        value = op.attributes.get("value")
        if isinstance(value, DenseElementsAttr) and len(op.results) == 1:
            self.constants[op.results[0]] = value.array

    def _foldable(self, op: Operation, captured: set[Value]) -> bool:
        """Pure, deterministic, constant inputs, foldable result types within the limit."""
        # Cheapest test first: most ops have an operand that is not a constant.
        constants = self.constants
        if not all(v in constants for v in op.operands):
            return False
        if not all(v in constants for v in captured):
            return False
        if not op.results or not all(_plain_static_tensor(r.type) for r in op.results):
            return False
        if not all(_plain_static_tensor(v.type) for v in op.operands):
            return False
        if sum(r.type.num_elements for r in op.results) > self.max_elements:
            return False
        # A splat operand is held as one element; evaluating the op would materialize it.
        if sum(_bytes(v.type) for v in op.operands) > max_constant_bytes():
            return False
        return all(_pure(inner) for inner in op.walk())

    def _evaluate(self, op: Operation, captured: set[Value]) -> list[np.ndarray] | None:
        """The op's results as the interpreter computes them, or None if it raises."""
        kernel = KERNELS.lookup(op.name)
        if kernel is None:
            return None
        if self._ctx is None:
            self._ctx = EvalContext(self.module)
        # The evaluator binds values used inside regions through the running
        # scope; here that is just the captured constants (the CPU backend's
        # interpreter fallback binds its captured values the same way).
        self._ctx.bind({v: self.constants[v] for v in captured})
        run, kernel_op = quantization.plan(kernel, op)
        try:
            with np.errstate(all="ignore"):
                outs = run(self._ctx, kernel_op, *[self.constants[v] for v in op.operands])
            if len(outs) != len(op.results):
                return None
            return [coerce(out, r.type, f"result #{r.index} of {op.where()}")
                    for out, r in zip(outs, op.results)]
        except Exception:  # noqa: BLE001 - any failure: leave the op to fail at run time
            return None

    def _replace(self, op: Operation, outs: list, captured: set[Value],
                 block: Block) -> list[Operation]:
        """One constant per result of ``op``, recorded as known and as replacements."""
        for value in list(op.operands) + list(captured):
            self.orphans.add(value.owner)
        new_ops = []
        for result, array in zip(op.results, outs):
            const = Operation(_CONSTANT, [], [result.type],
                              {"value": dense(array, result.type)}, (), op.location)
            # Diagnostics and interpreter.print name a value by its source name.
            const.results[0].name_hint = result.name_hint
            const.parent = block
            self.constants[result] = const.attributes["value"].array
            self.replacements[result] = const.results[0]
            self.orphans.add(const)
            new_ops.append(const)
        op.parent = None
        return new_ops


def _plain_static_tensor(type: Type) -> bool:
    return (isinstance(type, TensorType) and type.is_static and type.encoding is None
            and not isinstance(type.element_type, QuantizedType))


def _bytes(type: TensorType) -> int:
    return type.num_elements * element_facts(type.element_type).host_bytes


def _pure(op: Operation) -> bool:
    """Whether ``op`` itself may run at compile time (its regions are walked separately)."""
    return op.name not in _NEVER and op_effects(op) == Effect.PURE


def _captured_values(op: Operation) -> set[Value]:
    """Values used inside ``op``'s regions but defined outside them."""
    defined: set[Value] = set()
    used: set[Value] = set()
    for block in blocks_of(op):
        defined.update(block.arguments)
        for inner in block.operations:
            used.update(inner.operands)
            defined.update(inner.results)
    return used - defined


def _erase_orphans(root: Operation, candidates: set[Operation]) -> None:
    """Erase the candidate constants that nothing under ``root`` uses any more."""
    uses = Counter(v for op in root.walk() for v in op.operands)
    dead = {op for op in candidates if op.name == _CONSTANT and op.parent is not None
            and uses[op.results[0]] == 0}
    for block in list(blocks_of(root)):
        if any(op in dead for op in block.operations):
            block.operations[:] = [op for op in block.operations if op not in dead]
    for op in dead:
        op.parent = None
