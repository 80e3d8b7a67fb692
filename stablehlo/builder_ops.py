"""Builder methods for the elementwise, linear-algebra, collective and token ops.

Mixins of ``stablehlo.builder.Builder`` (which provides ``_build``, ``op``
and ``_reducer``); kept apart so builder.py stays about structure, regions
and data movement. Every method infers its result types through the op's
Rule, exactly as the verifier does.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import (
    ArrayAttr, BoolAttr, ConvDimensionNumbersAttr, DenseElementsAttr, EnumAttr, FloatAttr,
    IntegerAttr, StructAttr, UnitAttr, bool_array, dense, i64_array, i64_attr,
)
from stablehlo.ir.core import Operation
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.shape_inference import is_complex, is_float, is_quant, is_signed_int
from stablehlo.ir.types import F32, I32, TensorType, Type

_UNARY = ["abs", "cbrt", "ceil", "cosine", "count_leading_zeros", "exponential",
          "exponential_minus_one", "floor", "imag", "is_finite", "log", "log_plus_one",
          "logistic", "negate", "popcnt", "real", "round_nearest_afz", "round_nearest_even",
          "rsqrt", "sign", "sine", "sqrt", "tan", "tanh"]
_BINARY = ["add", "atan2", "complex", "divide", "maximum", "minimum", "multiply", "power",
           "remainder", "shift_left", "shift_right_arithmetic", "shift_right_logical",
           "subtract", "xor"]
# Python keywords get a trailing underscore: b.and_, b.or_, b.not_
_KEYWORD_OPS = {"and_": "and", "or_": "or", "not_": "not"}


def _unary(name: str):
    def method(self, x):
        return self._build(f"stablehlo.{name}", [x])
    method.__name__ = name
    method.__doc__ = f"``stablehlo.{name}`` of ``x``."
    return method


def _binary(name: str):
    def method(self, lhs, rhs):
        return self._build(f"stablehlo.{name}", [lhs, rhs])
    method.__name__ = name
    method.__doc__ = f"``stablehlo.{name}`` of ``lhs`` and ``rhs`` (same types)."
    return method


def default_compare_type(element_type: Type) -> str:
    """The comparison_type the spec requires for an element type."""
    if is_quant(element_type):
        element_type = element_type.expressed_type
    if is_float(element_type) or is_complex(element_type):
        return "FLOAT"
    return "SIGNED" if is_signed_int(element_type) else "UNSIGNED"


class ElementwiseOps:
    def compare(self, lhs, rhs, direction: str, compare_type: Optional[str] = None):
        """``direction`` is EQ/NE/LT/LE/GT/GE; the compare type defaults from the operands."""
        kind = compare_type or default_compare_type(lhs.type.element_type)
        return self._build("stablehlo.compare", [lhs, rhs], {
            "comparison_direction": EnumAttr("comparison_direction", direction.upper()),
            "compare_type": EnumAttr("comparison_type", kind)})

    def select(self, pred, on_true, on_false):
        return self._build("stablehlo.select", [pred, on_true, on_false])

    def clamp(self, lo, x, hi):
        return self._build("stablehlo.clamp", [lo, x, hi])

    def convert(self, x, element_type: Type):
        return self._build("stablehlo.convert", [x], None,
                           [x.type.with_element_type(element_type)])

    def bitcast_convert(self, x, result_type: TensorType):
        return self._build("stablehlo.bitcast_convert", [x], None, [result_type])

    def reduce_precision(self, x, exponent_bits: int, mantissa_bits: int):
        return self._build("stablehlo.reduce_precision", [x], {
            "exponent_bits": IntegerAttr(exponent_bits, I32),
            "mantissa_bits": IntegerAttr(mantissa_bits, I32)})

    def uniform_quantize(self, x, quantized_type: Type):
        return self._build("stablehlo.uniform_quantize", [x], None,
                           [x.type.with_element_type(quantized_type)])

    def uniform_dequantize(self, x):
        return self._build("stablehlo.uniform_dequantize", [x])


for _name in _UNARY:
    setattr(ElementwiseOps, _name, _unary(_name))
for _name in _BINARY:
    setattr(ElementwiseOps, _name, _binary(_name))
for _method, _name in _KEYWORD_OPS.items():
    setattr(ElementwiseOps, _method, _unary(_name) if _name == "not" else _binary(_name))


def _precision(precision) -> Optional[ArrayAttr]:
    if precision is None:
        return None
    if isinstance(precision, str):
        precision = [precision, precision]
    return ArrayAttr(tuple(EnumAttr("precision", p.upper()) for p in precision))


DEFAULT_CONV_DIMENSIONS = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
_CONV_SPEC = re.compile(r"\[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]")


def conv_dimension_numbers(spec: str) -> ConvDimensionNumbersAttr:
    """``"[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"`` (MLIR's pretty form) as an attribute."""
    match = _CONV_SPEC.fullmatch(spec.replace(" ", ""))
    if match is None:
        raise VerificationError(f"bad convolution dimension numbers '{spec}', expected e.g. "
                                f"'[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]'")
    lhs, rhs, out = (part.split(",") for part in match.groups())

    def positions(labels, a, b):
        spatial = sorted((int(x), i) for i, x in enumerate(labels) if x.isdigit())
        return labels.index(a), labels.index(b), tuple(i for _, i in spatial)

    try:
        ib, if_, isp = positions(lhs, "b", "f")
        ki, ko, ksp = positions(rhs, "i", "o")
        ob, of, osp = positions(out, "b", "f")
    except ValueError:
        raise VerificationError(f"bad convolution dimension numbers '{spec}'") from None
    return ConvDimensionNumbersAttr(ib, if_, isp, ki, ko, ksp, ob, of, osp)


def _with_element(types, element_type):
    if element_type is None:
        return None
    return [t.with_element_type(element_type) for t in types]


class LinalgOps:
    def dot_general(self, lhs, rhs, *, contracting=((), ()), batching=((), ()),
                    precision=None, result_element_type: Optional[Type] = None):
        """``contracting=(lhs_dims, rhs_dims)``, ``batching=(lhs_dims, rhs_dims)``."""
        dnums = StructAttr("dot", (
            ("lhs_batching_dimensions", tuple(batching[0])),
            ("rhs_batching_dimensions", tuple(batching[1])),
            ("lhs_contracting_dimensions", tuple(contracting[0])),
            ("rhs_contracting_dimensions", tuple(contracting[1]))))
        attrs = {"dot_dimension_numbers": dnums, "precision_config": _precision(precision)}
        return self._typed("stablehlo.dot_general", [lhs, rhs], attrs, result_element_type)

    def convolution(self, lhs, rhs, *, dimension_numbers=DEFAULT_CONV_DIMENSIONS,
                    window_strides=None, padding=None, lhs_dilation=None, rhs_dilation=None,
                    window_reversal=None, feature_group_count: int = 1,
                    batch_group_count: int = 1, precision=None,
                    result_element_type: Optional[Type] = None):
        if isinstance(dimension_numbers, str):
            dimension_numbers = conv_dimension_numbers(dimension_numbers)
        attrs = {
            "window_strides": None if window_strides is None else i64_array(window_strides),
            "padding": None if padding is None else dense(
                np.asarray(padding, dtype=np.int64).reshape(-1, 2)),
            "lhs_dilation": None if lhs_dilation is None else i64_array(lhs_dilation),
            "rhs_dilation": None if rhs_dilation is None else i64_array(rhs_dilation),
            "window_reversal": None if window_reversal is None else bool_array(window_reversal),
            "dimension_numbers": dimension_numbers,
            "feature_group_count": i64_attr(feature_group_count),
            "batch_group_count": i64_attr(batch_group_count),
            "precision_config": _precision(precision)}
        return self._typed("stablehlo.convolution", [lhs, rhs], attrs, result_element_type)

    def _typed(self, name: str, operands, attrs: dict, element_type):
        """Build with inferred shapes and an optional different result element type."""
        if element_type is None:
            return self._build(name, operands, attrs)
        probe = Operation(name, operands, (), {k: v for k, v in attrs.items() if v is not None})
        inferred = OPS.get(name).verify.infer(probe)
        return self._build(name, operands, attrs, _with_element(inferred, element_type))

    def fft(self, x, fft_type: str, fft_length: Sequence[int]):
        return self._build("stablehlo.fft", [x], {
            "fft_type": EnumAttr("fft_type", fft_type.upper()),
            "fft_length": i64_array(fft_length)})

    def cholesky(self, a, lower: bool = False):
        return self._build("stablehlo.cholesky", [a], {"lower": BoolAttr(lower)})

    def triangular_solve(self, a, b, *, left_side: bool, lower: bool,
                         unit_diagonal: bool = False, transpose_a: str = "NO_TRANSPOSE"):
        return self._build("stablehlo.triangular_solve", [a, b], {
            "left_side": BoolAttr(left_side), "lower": BoolAttr(lower),
            "unit_diagonal": BoolAttr(unit_diagonal),
            "transpose_a": EnumAttr("transpose", transpose_a)})

    def batch_norm_inference(self, x, scale, offset, mean, variance, *, epsilon: float,
                             feature_index: int):
        return self._build("stablehlo.batch_norm_inference",
                           [x, scale, offset, mean, variance], _bn_attrs(epsilon, feature_index))

    def batch_norm_training(self, x, scale, offset, *, epsilon: float, feature_index: int):
        return self._build("stablehlo.batch_norm_training", [x, scale, offset],
                           _bn_attrs(epsilon, feature_index))

    def rng_bit_generator(self, state, shape: Sequence[int], element_type: Type,
                          algorithm: str = "DEFAULT"):
        """Returns ``[output_state, output]``."""
        return self._build("stablehlo.rng_bit_generator", [state],
                           {"rng_algorithm": EnumAttr("rng_algorithm", algorithm)},
                           [state.type, TensorType(tuple(shape), element_type)])

    def rng(self, a, b, shape, distribution: str = "UNIFORM"):
        """``shape`` is a 1-D integer tensor Value; the result shape is read from it if constant."""
        dims = _constant_dims(shape)
        result = TensorType(tuple(dims), a.type.element_type)
        return self._build("stablehlo.rng", [a, b, shape],
                           {"rng_distribution": EnumAttr("rng_distribution", distribution)},
                           [result])


def _bn_attrs(epsilon: float, feature_index: int) -> dict:
    return {"epsilon": FloatAttr(float(epsilon), F32), "feature_index": i64_attr(feature_index)}


def _constant_dims(shape_value) -> list:
    owner = shape_value.owner
    value = getattr(owner, "attributes", {}).get("value")
    if getattr(owner, "name", None) != "stablehlo.constant" or not isinstance(
            value, DenseElementsAttr):
        raise VerificationError("rng needs its shape operand to be a stablehlo.constant")
    return [int(v) for v in value.array.reshape(-1)]


def _groups(replica_groups) -> DenseElementsAttr:
    return dense(np.asarray(replica_groups, dtype=np.int64).reshape(len(replica_groups), -1))


def _channel(channel_id: Optional[int]):
    if channel_id is None:
        return None
    return StructAttr("channel_handle", (("handle", int(channel_id)), ("type", 1)))


class CollectiveOps:
    def all_reduce(self, operands, body, replica_groups, *, channel_id: Optional[int] = None,
                   use_global_device_ids: bool = False):
        operands = [operands] if not isinstance(operands, (list, tuple)) else list(operands)
        region = self._reducer(body, [v.type for v in operands])
        attrs = {"replica_groups": _groups(replica_groups), "channel_handle": _channel(channel_id)}
        if use_global_device_ids:
            attrs["use_global_device_ids"] = UnitAttr()
        return self._build("stablehlo.all_reduce", operands, attrs, regions=[region])

    def all_gather(self, x, all_gather_dim: int, replica_groups, *,
                   channel_id: Optional[int] = None):
        return self._build("stablehlo.all_gather", [x], {
            "all_gather_dim": i64_attr(all_gather_dim),
            "replica_groups": _groups(replica_groups), "channel_handle": _channel(channel_id)})

    def reduce_scatter(self, x, body, scatter_dimension: int, replica_groups, *,
                       channel_id: Optional[int] = None):
        region = self._reducer(body, [x.type])
        return self._build("stablehlo.reduce_scatter", [x], {
            "scatter_dimension": i64_attr(scatter_dimension),
            "replica_groups": _groups(replica_groups), "channel_handle": _channel(channel_id)},
            regions=[region])

    def all_to_all(self, x, split_dimension: int, concat_dimension: int, split_count: int,
                   replica_groups, *, channel_id: Optional[int] = None):
        return self._build("stablehlo.all_to_all", [x], {
            "split_dimension": i64_attr(split_dimension),
            "concat_dimension": i64_attr(concat_dimension),
            "split_count": i64_attr(split_count),
            "replica_groups": _groups(replica_groups), "channel_handle": _channel(channel_id)})

    def collective_permute(self, x, source_target_pairs, *, channel_id: Optional[int] = None):
        pairs = dense(np.asarray(source_target_pairs, dtype=np.int64).reshape(-1, 2))
        return self._build("stablehlo.collective_permute", [x], {
            "source_target_pairs": pairs, "channel_handle": _channel(channel_id)})

    def replica_id(self):
        return self._build("stablehlo.replica_id", [])

    def partition_id(self):
        return self._build("stablehlo.partition_id", [])


class MiscOps:
    def after_all(self, tokens: Sequence = ()):
        return self._build("stablehlo.after_all", list(tokens))

    def optimization_barrier(self, values: Sequence):
        result = self._build("stablehlo.optimization_barrier", list(values))
        return result if isinstance(result, list) else [result]
