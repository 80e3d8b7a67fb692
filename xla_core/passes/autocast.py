"""autocast: automatic mixed precision, PyTorch's autocast as a StableHLO rewrite.

``autocast{dtype=bf16}`` runs a program's f32 matrix products in bf16 and keeps what needs
the range and precision of f32 in f32, with the three op classes of PyTorch's autocast
(aten/src/ATen/autocast_mode.h):

* lower precision (``_CONTRACTIONS``): ``dot_general``, ``dot`` and ``convolution`` with f32
  operands take them converted to bf16 and accumulate in f32; the result stays f32
  (``contraction-result=f32``, the default), or is rounded to bf16 as PyTorch's bf16
  matmuls return it (``contraction-result=bf16``). A product whose ``precision_config``
  asks for HIGHEST, or that names an ``algorithm``, asked for its precision and keeps it.
* promote (``_PROMOTE``: elementwise arithmetic that rounds correctly in any precision, and
  data movement): runs in bf16 when its float operands are bf16 already, else in f32, so a
  bf16 value never forces a wider one down (PyTorch's "widest input type"). Constants and
  broadcasts of constants or of parameters (a bias) adapt to the other operands, as
  PyTorch's linear converts its bias with its weight.
* f32 (everything else): reductions (``reduce``, ``reduce_window``, collectives, scatter),
  and therefore softmax, norms and losses, the exp/log family, rsqrt and power, control
  flow, calls and the function's results take f32 operands (a bf16 value is widened once
  per block and reused).

Only f32 values are touched (f64 and the integer types are left as they are, as PyTorch
leaves float64); the function signatures never change. No value goes bf16 -> f32 -> bf16:
a value has at most one converted form per block, the bf16 form of ``convert(bf16 -> f32)``
is its operand, and a ``convert`` to bf16 of a value already in bf16 disappears. The bf16
form of a constant is a constant (converted here, not at every run), and that of a broadcast
is the broadcast of its operand's bf16 form (the smaller tensor is converted).

The pass rewrites whatever it is given. Whether a program should be autocast on given
hardware is its caller's decision: the compile driver asks the backend whether it computes
bf16 natively (``xla_core/compile/driver.py``, option ``autocast``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stablehlo.ir.attributes import ArrayAttr, DenseElementsAttr, held_as_splat
from stablehlo.ir.core import Block, Module, Operation, Value
from stablehlo.ir.types import FloatType, TensorType, numpy_dtype
from xla_core.ir_utils import blocks_of, resolve
from xla_core.passes.base import Pass, PassContext, PassError

_F32 = FloatType("f32")
_LOW_TYPES = {"bf16": FloatType("bf16")}
_CONVERT = "stablehlo.convert"
_CONSTANT = "stablehlo.constant"
_BROADCAST = "stablehlo.broadcast_in_dim"
_CONTRACTIONS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
# PyTorch's fallthrough/promote ops: exact or correctly rounded in the operands' precision
_PROMOTE = frozenset("stablehlo." + name for name in (
    "abs", "add", "ceil", "clamp", "compare", "divide", "floor", "is_finite", "logistic",
    "maximum", "minimum", "multiply", "negate", "round_nearest_afz", "round_nearest_even",
    "select", "sign", "sqrt", "subtract", "tanh",
    "broadcast_in_dim", "concatenate", "dynamic_slice", "dynamic_update_slice", "gather",
    "pad", "reshape", "reverse", "slice", "transpose"))


@dataclass(frozen=True)
class AutocastPass(Pass):
    name = "autocast"
    dtype: str = "bf16"
    contraction_result: str = "f32"

    def __post_init__(self):
        if self.dtype not in _LOW_TYPES:
            raise PassError(f"pass 'autocast': option 'dtype' must be one of "
                            f"{sorted(_LOW_TYPES)}, got {self.dtype!r}")
        if self.contraction_result not in ("f32", self.dtype):
            raise PassError(f"pass 'autocast': option 'contraction-result' must be f32 or "
                            f"{self.dtype}, got {self.contraction_result!r}")

    def run(self, module: Module, ctx: PassContext) -> bool:
        low = _LOW_TYPES[self.dtype]
        changed = False
        for func in module.functions():
            if func.body is not None:
                rewriter = _Rewriter(low, self.contraction_result != "f32")
                for block in list(blocks_of(func.op)):
                    rewriter.rewrite(block)
                changed |= rewriter.changed
        return changed


def _is(value: Value, element) -> bool:
    return isinstance(value.type, TensorType) and value.type.element_type == element


class _Rewriter:
    """Rewrites the blocks of one function, outer blocks before inner ones, so a value's
    precision is settled before any nested use of it is seen. A value computed in bf16
    changes its type in place; ``original`` remembers its f32 type."""

    def __init__(self, low: FloatType, round_contractions: bool):
        self.low = low
        self.round_contractions = round_contractions
        self.original: dict[Value, TensorType] = {}
        self.replacements: dict[Value, Value] = {}  # removed converts -> their operand
        self.changed = False

    def rewrite(self, block: Block) -> None:
        self.out: list[Operation] = []
        self.forms: dict[tuple[Value, str], Value] = {}  # (value, "f32"|"low") -> form here
        for op in block.operations:
            given = list(op.operands)
            op.operands = [resolve(v, self.replacements) for v in given]
            if op.name in _CONTRACTIONS and self._contraction_applies(op):
                self._lower_contraction(op)
            elif op.name == _CONVERT and _is(op.operands[0], self.low) \
                    and _is(op.result, self.low):
                self.replacements[op.result] = op.operands[0]  # bf16 -> bf16: gone
                self.changed = True
                continue
            elif op.name in _PROMOTE and self._runs_low(op):
                self._lower_promoted(op)
            else:
                # a removed convert's operand is already of the type this op was given
                op.operands = [v if v is not g else self.f32_form(v, op)
                               for g, v in zip(given, op.operands)]
            self.out.append(op)
        for op in self.out:
            op.parent = block
        block.operations[:] = self.out

    # -- the three op classes ------------------------------------------------------------

    def _contraction_applies(self, op: Operation) -> bool:
        if "algorithm" in op.attributes or "HIGHEST" in str(op.attributes.get(
                "precision_config", ArrayAttr(()))):
            return False
        floats = [v for v in op.operands[:2] if _is(v, _F32) or _is(v, self.low)]
        return len(floats) == 2 and any(self._wanted(v) == _F32 for v in floats) \
            and _is(op.result, _F32)

    def _lower_contraction(self, op: Operation) -> None:
        # dot_general(x: f32, w: f32) -> f32  =>  dot_general(bf16(x), bf16(w)) -> f32 (or bf16)
        op.operands[:2] = [self.low_form(v, op) for v in op.operands[:2]]
        if self.round_contractions:
            self._retype(op.result)
        self.changed = True

    def _runs_low(self, op: Operation) -> bool:
        floats = [v for v in op.operands if self._wanted(v) == _F32 or _is(v, self.low)]
        native = [v for v in floats if _is(v, self.low) and self._wanted(v) == _F32]
        return bool(native) and all(v in native or self._adapts(v) for v in floats)

    def _lower_promoted(self, op: Operation) -> None:
        # add(x: bf16 computed, broadcast(bias)) -> add(x, broadcast(bf16(bias))): bf16
        op.operands = [self.low_form(v, op) if self._wanted(v) == _F32 else v
                       for v in op.operands]
        for result in op.results:
            if _is(result, _F32):
                self._retype(result)
        self.changed = True

    def _adapts(self, value: Value) -> bool:
        """Constants, and broadcasts of constants or of the function's parameters: cheap to
        convert, so they follow the precision of the values they meet."""
        owner = value.owner
        if isinstance(owner, Block):
            return False
        if owner.name == _CONSTANT:
            return True
        return owner.name == _BROADCAST and (isinstance(owner.operands[0].owner, Block)
                                             or self._adapts(owner.operands[0]))

    # -- forms of a value ------------------------------------------------------------------

    def _wanted(self, value: Value):
        """The element type the program gave ``value``."""
        return self.original.get(value, value.type).element_type \
            if isinstance(value.type, TensorType) else None

    def _retype(self, value: Value) -> None:
        self.original[value] = value.type
        value.type = value.type.with_element_type(self.low)

    def f32_form(self, value: Value, user: Operation) -> Value:
        """``value`` in the type the program gave it (widened once per block if it was
        computed in bf16)."""
        if value not in self.original:
            return value
        return self._form(value, "f32", user,
                          lambda: self._emit(_CONVERT, [value], self.original[value], user))

    def low_form(self, value: Value, user: Operation) -> Value:
        """``value`` (an f32 or bf16 value) in bf16."""
        if _is(value, self.low):
            return value
        owner = value.owner
        if isinstance(owner, Operation) and owner.name == _CONVERT \
                and _is(owner.operands[0], self.low):
            return owner.operands[0]  # bf16(f32(x)) = x
        return self._form(value, "low", user, lambda: self._make_low(value, user))

    def _make_low(self, value: Value, user: Operation) -> Value:
        owner = value.owner
        low_type = value.type.with_element_type(self.low)
        if isinstance(owner, Operation) and owner.name == _CONSTANT \
                and isinstance(owner.attributes.get("value"), DenseElementsAttr):
            array = _converted(owner.attributes["value"].array, numpy_dtype(self.low))
            return self._emit(_CONSTANT, [], low_type, user,
                              {"value": DenseElementsAttr(low_type, array)})
        if isinstance(owner, Operation) and owner.name == _BROADCAST:
            source = self.low_form(owner.operands[0], user)
            return self._emit(_BROADCAST, [source], low_type, user, owner.attributes)
        return self._emit(_CONVERT, [value], low_type, user)

    def _form(self, value: Value, kind: str, user: Operation, make) -> Value:
        key = (value, kind)
        if key not in self.forms:
            self.forms[key] = make()
            self.changed = True
        return self.forms[key]

    def _emit(self, name: str, operands: list, result_type: TensorType, user: Operation,
              attributes=None) -> Value:
        op = Operation(name, operands, [result_type], dict(attributes or {}), (),
                       user.location)
        self.out.append(op)
        return op.result


def _converted(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` in ``dtype``; a splat (one element viewed at every index) stays one."""
    if held_as_splat(array):
        return np.broadcast_to(np.asarray(array[(0,) * array.ndim], dtype), array.shape)
    return np.asarray(array, dtype)
