"""Shared pieces of the per-op verifiers and type inference.

Every op family declares its constraints in a sibling ``*_rules.py`` file as a
``Rule`` and passes it as ``verify=`` to ``define``. A Rule has two parts:

* ``infer(op) -> list[Type]``: the result types implied by the op's operands,
  attributes and regions (never by ``op.results``). It also checks every
  constraint it relies on, so it can run on an op that is still being built.
* ``check(op)``: the constraints that involve the declared result types or
  that inference does not need (e.g. ``convert``'s result shape).

The verifier calls the Rule on a finished op: ``check`` first, then the
inferred types are compared with the declared ones. The builder calls
``infer`` on an op without results to fill in its result types, so builder
and verifier share one copy of every shape rule.

Dynamic dimensions (``None``) are compatible with any size. Errors are raised
through ``op_error`` so they name the op, its location and the offending
operand or attribute with the expected and actual values.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from stablehlo.ir.attr_readers import MISSING, AttrReader, struct_ints  # noqa: F401 (re-export)
from stablehlo.ir.attributes import DenseElementsAttr, StructAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.types import (
    ComplexType, FloatType, IndexType, IntegerType, QuantizedType, TensorType, TokenType,
    TupleType, Type, element_facts,
)


class Rule:
    """The ``verify=`` entry of an op: ``check`` plus inferred result types.

    ``compare`` says how inferred and declared results are matched:
    ``"type"`` (shape and element type), ``"shape"`` (shape only: the element
    type is free or checked by ``check``), ``"baseline"`` (shape, and element
    types equal up to quantization scales and zero points) or ``"storage"``
    (like baseline, but the per-axis quantization dimension may move too).
    """
    __slots__ = ("infer", "check", "compare")

    def __init__(self, infer: Optional[Callable] = None, check: Optional[Callable] = None,
                 compare: str = "type"):
        self.infer = infer
        self.check = check
        self.compare = compare

    def __call__(self, op) -> None:
        if self.check is not None:
            self.check(op)
        if self.infer is not None:
            check_results(op, self.infer(op), self.compare)


def checks(*fns: Callable) -> Callable:
    """One ``check`` that runs several in order."""
    def run(op) -> None:
        for fn in fns:
            fn(op)
    return run


# ---------------------------------------------------------------------------
# Types

def is_quant(e: Type) -> bool:
    return isinstance(e, QuantizedType)


def is_pred(e: Type) -> bool:
    return isinstance(e, IntegerType) and e.width == 1


def is_int(e: Type) -> bool:
    """Signed or unsigned integer, not i1."""
    return isinstance(e, IntegerType) and e.width != 1


def is_signed_int(e: Type) -> bool:
    return is_int(e) and e.signed


def is_unsigned_int(e: Type) -> bool:
    return is_int(e) and not e.signed


def is_float(e: Type) -> bool:
    return isinstance(e, FloatType)


def is_complex(e: Type) -> bool:
    return isinstance(e, ComplexType)


def is_index_like(e: Type) -> bool:
    return is_int(e) or isinstance(e, IndexType)


def bit_width(e: Type) -> int:
    """Bits of one element as StableHLO counts them (``ElementFacts.bits``)."""
    try:
        return element_facts(e).bits
    except TypeError:
        raise ValueError(f"no bit width for {e}") from None


INT64_MAX = 2**63 - 1


def check_fits_int64(op, what: str, t: Type) -> None:
    """``t``'s element count and byte size fit in int64 (the tensors of a tuple too).

    Backends size buffers with int64 arithmetic, so a larger type would wrap around there;
    rejecting it here keeps it a verification error. A type that fits but is merely too big
    to allocate is valid and fails at execution instead. Dynamic dimensions are skipped.
    """
    if isinstance(t, TupleType):
        for part in t.types:
            check_fits_int64(op, what, part)
        return
    if not isinstance(t, TensorType):
        return
    count = 1
    for d in t.shape:
        count *= 1 if d is None else d
    try:
        element_bytes = (bit_width(t.element_type) + 7) // 8
    except ValueError:  # an opaque element type: its size is unknown, count 1 byte each
        element_bytes = 1
    if count * element_bytes > INT64_MAX:
        raise op_error(op, f"{what} type {t} has {count} elements ({count * element_bytes} "
                           f"bytes), more than fit in int64 ({INT64_MAX})")


def baseline(e: Type):
    """An element type with quantization scales and zero points forgotten.

    Two element types have the same baseline when they are equal, or both
    quantized with equal storage/expressed types, storage range and axis.
    """
    if isinstance(e, QuantizedType):
        return ("quant", e.storage_type, e.expressed_type, e.axis, e.min_value, e.max_value)
    return e


def _storage_key(e: Type):
    if isinstance(e, QuantizedType):
        return ("quant", e.storage_type, e.expressed_type, e.min_value, e.max_value)
    return e


def is_promotable(x: Type, y: Type) -> bool:
    """The spec's ``is_promotable``: same kind and ``bitwidth(x) <= bitwidth(y)``."""
    if is_pred(x) or is_pred(y):
        return is_pred(x) and is_pred(y)
    if is_quant(x) or is_quant(y):
        return (is_quant(x) and is_quant(y) and x.expressed_type == y.expressed_type
                and x.storage_type.width <= y.storage_type.width)
    same_kind = ((is_int(x) and is_int(y)) or (is_float(x) and is_float(y))
                 or (is_complex(x) and is_complex(y)))
    return same_kind and bit_width(x) <= bit_width(y)


def dims_compatible(a: Optional[int], b: Optional[int]) -> bool:
    return a is None or b is None or a == b


def shapes_compatible(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b))


def merge_dims(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """The more refined of two compatible dimensions."""
    return b if a is None else a


def merge_shapes(a: Sequence, b: Sequence) -> tuple:
    return tuple(merge_dims(x, y) for x, y in zip(a, b))


def types_compatible(actual: Type, expected: Type, compare: str = "type") -> bool:
    """Whether ``actual`` may stand where ``expected`` was inferred.

    Tensors match on rank and compatible dims (encodings are ignored); see
    ``Rule`` for ``compare``. Tuples match elementwise; other types exactly.
    """
    if isinstance(actual, TensorType) and isinstance(expected, TensorType):
        if not shapes_compatible(actual.shape, expected.shape):
            return False
        if compare == "shape":
            return True
        if compare == "baseline":
            return baseline(actual.element_type) == baseline(expected.element_type)
        if compare == "storage":
            return _storage_key(actual.element_type) == _storage_key(expected.element_type)
        return actual.element_type == expected.element_type
    if isinstance(actual, TupleType) and isinstance(expected, TupleType):
        return len(actual.types) == len(expected.types) and all(
            types_compatible(a, e, compare) for a, e in zip(actual.types, expected.types))
    return actual == expected


def fmt_shape(shape: Sequence) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


# ---------------------------------------------------------------------------
# Operands and results

def operand_type(op, index: int) -> Type:
    if index >= len(op.operands):
        raise op_error(op, f"expected at least {index + 1} operands, got {len(op.operands)}")
    return op.operands[index].type


def tensor_operand(op, index: int, what: str = "") -> TensorType:
    """The type of operand ``index``, which must be a tensor."""
    t = operand_type(op, index)
    if not isinstance(t, TensorType):
        name = what or f"operand #{index}"
        raise op_error(op, f"{name} must be a tensor, got {t}")
    return t


def tensor_operands(op) -> list:
    return [tensor_operand(op, i) for i in range(len(op.operands))]


def tensor_result(op, index: int = 0) -> TensorType:
    if index >= len(op.results):
        raise op_error(op, f"expected at least {index + 1} results, got {len(op.results)}")
    t = op.results[index].type
    if not isinstance(t, TensorType):
        raise op_error(op, f"result #{index} must be a tensor, got {t}")
    return t


def expect_num_operands(op, count: int, lo: Optional[int] = None) -> None:
    """Exactly ``count`` operands, or at least ``lo`` when ``count`` is None."""
    n = len(op.operands)
    if count is not None and n != count:
        raise op_error(op, f"expected {count} operand(s), got {n}")
    if lo is not None and n < lo:
        raise op_error(op, f"expected at least {lo} operand(s), got {n}")


def expect_num_results(op, count: int) -> None:
    if len(op.results) != count:
        raise op_error(op, f"expected {count} result(s), got {len(op.results)}")


def check_results(op, inferred: Sequence[Type], compare: str = "type") -> None:
    """Declared result types must be compatible with the inferred ones."""
    if len(op.results) != len(inferred):
        raise op_error(op, f"expected {len(inferred)} result(s), got {len(op.results)}")
    for i, (result, want) in enumerate(zip(op.results, inferred)):
        if not types_compatible(result.type, want, compare):
            raise op_error(op, f"result #{i} has type {result.type}, expected {want} "
                               f"(inferred from operands and attributes)")


def check_element_kind(op, what: str, t: Type, allowed: str, pred: Callable) -> None:
    """``t``'s element type satisfies ``pred``; ``allowed`` describes it."""
    e = t.element_type if isinstance(t, TensorType) else t
    if not pred(e):
        raise op_error(op, f"{what} has element type {e}, expected {allowed}")


# ---------------------------------------------------------------------------
# Attributes

# Reading is shared with the interpreter (stablehlo.ir.attr_readers), strictly.
_READ = AttrReader(op_error, missing="requires attribute", strict=True)


def _default(default):
    """The verifier's ``None`` default means "required"."""
    return MISSING if default is None else default


def int_list(op, name: str, default: Optional[Sequence[int]] = None) -> list:
    """A 1-D integer array attribute; ``default`` when absent (required if None)."""
    return _READ.int_list(op, name, _default(default))


def bool_list(op, name: str, default: Optional[Sequence[bool]] = None) -> list:
    return _READ.bool_list(op, name, _default(default))


def int_attr(op, name: str, default: Optional[int] = None) -> int:
    return _READ.int_value(op, name, _default(default))


def bool_attr(op, name: str, default: bool = False) -> bool:
    return _READ.bool_value(op, name, default)


def enum_attr(op, name: str, kind: str, allowed: Iterable[str],
              default: Optional[str] = None) -> str:
    return _READ.enum_value(op, name, _default(default), kind, allowed)


def struct_attr(op, name: str, kind: str) -> StructAttr:
    return _READ.struct(op, name, kind)


def int_matrix(op, name: str, default_shape: Optional[tuple] = None) -> np.ndarray:
    """A 2-D integer DenseElementsAttr (padding, replica groups) as an int64 array."""
    return _READ.int_matrix(op, name, _default(default_shape))


def padding_pairs(op, name: str, rank: int) -> list:
    """A ``tensor<Nx2xi64>`` padding attribute as N (low, high) pairs; zeros if absent."""
    pad = int_matrix(op, name, (rank, 2))
    if pad.size == 0 and rank == 0:
        return []
    if pad.shape != (rank, 2):
        raise op_error(op, f"attribute '{name}' has shape {list(pad.shape)}, "
                           f"expected [{rank}, 2]")
    return [(int(lo), int(hi)) for lo, hi in pad]


# ---------------------------------------------------------------------------
# Dimension-list checks

def check_size(op, what: str, values: Sequence, size: int, why: str = "") -> None:
    if len(values) != size:
        note = f" ({why})" if why else ""
        raise op_error(op, f"{what} has size {len(values)}, expected {size}{note}")


def check_in_range(op, what: str, values: Iterable[int], lo: int, hi: int) -> None:
    """Every value in ``[lo, hi)``."""
    for v in values:
        if not lo <= v < hi:
            raise op_error(op, f"{what} contains {v}, expected values in [{lo}, {hi})")


def check_unique(op, what: str, values: Sequence[int]) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise op_error(op, f"{what} contains {v} more than once, expected unique values")
        seen.add(v)


def check_sorted(op, what: str, values: Sequence[int]) -> None:
    if list(values) != sorted(values):
        raise op_error(op, f"{what} is {list(values)}, expected it to be sorted")


def check_positive(op, what: str, values: Iterable[int]) -> None:
    for v in values:
        if v <= 0:
            raise op_error(op, f"{what} contains {v}, expected positive values")


def check_dims(op, what: str, dims: Sequence[int], rank: int, *, unique: bool = True,
               sorted_: bool = False) -> None:
    """Dimension numbers: in ``[0, rank)``, unique, and optionally sorted."""
    check_in_range(op, what, dims, 0, rank)
    if unique:
        check_unique(op, what, dims)
    if sorted_:
        check_sorted(op, what, dims)


# ---------------------------------------------------------------------------
# Regions

def region_block(op, index: int, what: str = ""):
    """The single block of region ``index``."""
    name = what or f"region #{index}"
    if index >= len(op.regions):
        raise op_error(op, f"expected {index + 1} region(s), got {len(op.regions)}")
    blocks = op.regions[index].blocks
    if len(blocks) != 1:
        raise op_error(op, f"{name} must have exactly one block, got {len(blocks)}")
    return blocks[0]


def block_arg_types(block) -> list:
    return [a.type for a in block.arguments]


def block_return_types(op, block, what: str) -> list:
    term = block.terminator
    if term is None or term.name not in ("stablehlo.return", "func.return"):
        raise op_error(op, f"{what} must end with stablehlo.return")
    return [v.type for v in term.operands]


def check_type_list(op, what: str, actual: Sequence[Type], expected: Sequence[Type],
                    compare: str = "type") -> None:
    """Two lists of types (region signatures) match element by element."""
    if len(actual) != len(expected):
        raise op_error(op, f"{what} has {len(actual)} value(s), expected {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        if not types_compatible(a, e, compare):
            raise op_error(op, f"{what} #{i} has type {a}, expected {e}")


def scalar_of(element_type: Type) -> TensorType:
    return TensorType((), element_type)


def reducer_types(op, index: int, inputs: Sequence[Type], inits: Sequence[Type],
                  what: str, init_name: str = "init value") -> list:
    """The accumulator element types of a reduction body (reduce, scatter, ...).

    The body takes ``(acc_0..acc_N-1, x_0..x_N-1)`` 0-d tensors and returns
    ``N`` of them, where each accumulator type ``Ei`` satisfies
    ``is_promotable(element_type(inputs[i]), Ei)`` and the init values have
    the inputs' element types. Returns ``[E0, ..., EN-1]``.
    """
    block = region_block(op, index, what)
    n = len(inputs)
    args = block_arg_types(block)
    rets = block_return_types(op, block, what)
    if len(args) != 2 * n:
        raise op_error(op, f"{what} must take {2 * n} arguments, got {len(args)}")
    if len(rets) != n:
        raise op_error(op, f"{what} must return {n} value(s), got {len(rets)}")
    accs = []
    for i in range(n):
        ret = rets[i]
        if not (isinstance(ret, TensorType) and ret.rank == 0):
            raise op_error(op, f"{what} result #{i} has type {ret}, expected a 0-d tensor")
        acc = ret.element_type
        for j in (i, n + i):
            if args[j] != ret:
                raise op_error(op, f"{what} argument #{j} has type {args[j]}, expected {ret} "
                                   f"(the type of the {what}'s result #{i})")
        if not is_promotable(inputs[i].element_type, acc):
            raise op_error(op, f"{what} accumulates in {acc}, which input element type "
                               f"{inputs[i].element_type} cannot be promoted to")
        if inits[i].element_type != inputs[i].element_type:
            raise op_error(op, f"{init_name} #{i} has element type {inits[i].element_type}, "
                               f"expected {inputs[i].element_type} (the input's)")
        accs.append(acc)
    return accs


def constant_ints(value) -> Optional[list]:
    """The integers of a value defined by ``stablehlo.constant``, else None.

    Lets the dynamic ops check what is statically known, as MLIR does.
    """
    owner = value.owner
    if getattr(owner, "name", None) != "stablehlo.constant":
        return None
    attr = owner.attributes.get("value")
    if not isinstance(attr, DenseElementsAttr) or attr.array.dtype.kind not in "iu":
        return None
    return [int(v) for v in attr.array.reshape(-1)]


def is_token(t: Type) -> bool:
    return isinstance(t, TokenType)


def window_output_size(size: Optional[int], window: int, stride: int, pad: tuple,
                       base_dilation: int = 1, window_dilation: int = 1) -> Optional[int]:
    """Number of window positions along one dimension (reduce_window, convolution).

    The input is dilated, then padded; the window is dilated; windows that do
    not fit entirely are dropped. None when ``size`` is dynamic.
    """
    if size is None:
        return None
    dilated = 0 if size == 0 else (size - 1) * base_dilation + 1
    padded = pad[0] + dilated + pad[1]
    dilated_window = 0 if window == 0 else (window - 1) * window_dilation + 1
    if padded <= 0 or dilated_window > padded:
        return 0
    return (padded - dilated_window) // stride + 1
