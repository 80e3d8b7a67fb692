"""Verifiers and type inference of contractions, convolutions and linear algebra.

dot_general, dot, convolution, dynamic_conv, fft, cholesky, triangular_solve,
batch_norm_*, rng and rng_bit_generator. The result element type of a
contraction may differ from the operands' (``preferred_element_type``), so
those results are compared by shape and their element types checked apart.
"""
from __future__ import annotations

from stablehlo.ir.attributes import ArrayAttr, ConvDimensionNumbersAttr, EnumAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, baseline, bool_list, check_dims, check_in_range, check_positive, check_size,
    constant_ints, dims_compatible, enum_attr, expect_num_operands, int_attr, int_list, is_complex,
    is_float, is_index_like, is_int, is_quant, padding_pairs, shapes_compatible,
    struct_ints, tensor_operand, tensor_result, window_output_size,
)
from stablehlo.ir.types import FLOAT_FORMATS, ComplexType, TensorType

_PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


def _check_precision_config(op) -> None:
    attr = op.attributes.get("precision_config")
    if attr is None:
        return
    if not isinstance(attr, ArrayAttr) or len(attr.values) > 2:
        raise op_error(op, f"attribute 'precision_config' is {attr}, expected at most 2 "
                           f"precision values")
    for v in attr.values:
        if not isinstance(v, EnumAttr) or v.value not in _PRECISIONS:
            raise op_error(op, f"attribute 'precision_config' contains {v}, expected one of "
                               f"{', '.join(_PRECISIONS)}")


def _check_operand_elements(op, lhs: TensorType, rhs: TensorType,
                            result_elem=None) -> None:
    """Contraction element types: equal operands, or the quantized combinations."""
    le, re_ = lhs.element_type, rhs.element_type
    if not (is_quant(le) or is_quant(re_) or (result_elem is not None and is_quant(result_elem))):
        if le != re_:
            raise op_error(op, f"operand #1 has type {rhs}, expected element type {le} "
                               f"(lhs and rhs must have the same element type)")
        return
    if not is_quant(re_):
        raise op_error(op, f"operand #1 has type {rhs}, expected a quantized element type "
                           f"(rhs must be quantized in a quantized contraction)")
    if is_quant(le):
        if le.storage_type != re_.storage_type or le.expressed_type != re_.expressed_type:
            raise op_error(op, f"operand #1 has type {rhs}, expected storage and expressed "
                               f"types of lhs {lhs}")
    elif le != re_.expressed_type:
        raise op_error(op, f"operand #0 has type {lhs}, expected element type "
                           f"{re_.expressed_type} (rhs's expressed type)")
    if result_elem is not None and is_quant(le) != is_quant(result_elem):
        raise op_error(op, f"result element type {result_elem} must be quantized exactly "
                           f"when lhs {lhs} is")


def _result_element(op):
    if op.results and isinstance(op.results[0].type, TensorType):
        return op.results[0].type.element_type
    return None


# ---------------------------------------------------------------------------
# dot_general, dot

def _infer_dot_general(op):
    expect_num_operands(op, 2)
    lhs, rhs = tensor_operand(op, 0), tensor_operand(op, 1)
    dn = op.attributes.get("dot_dimension_numbers")
    if dn is None or getattr(dn, "kind", None) != "dot":
        raise op_error(op, f"requires attribute 'dot_dimension_numbers' "
                           f"(#stablehlo.dot<...>), got {dn}")
    lb, rb = struct_ints(dn, "lhs_batching_dimensions"), struct_ints(dn, "rhs_batching_dimensions")
    lc = struct_ints(dn, "lhs_contracting_dimensions")
    rc = struct_ints(dn, "rhs_contracting_dimensions")
    check_size(op, "rhs_batching_dimensions", rb, len(lb), "the size of lhs_batching_dimensions")
    check_size(op, "rhs_contracting_dimensions", rc, len(lc),
               "the size of lhs_contracting_dimensions")
    check_dims(op, "lhs_batching_dimensions + lhs_contracting_dimensions", lb + lc, lhs.rank)
    check_dims(op, "rhs_batching_dimensions + rhs_contracting_dimensions", rb + rc, rhs.rank)
    for kind, ls, rs in (("batching", lb, rb), ("contracting", lc, rc)):
        for a, b in zip(ls, rs):
            if not dims_compatible(lhs.shape[a], rhs.shape[b]):
                raise op_error(op, f"lhs {kind} dimension {a} has size {lhs.shape[a]} but rhs "
                                   f"{kind} dimension {b} has size {rhs.shape[b]}; they must "
                                   f"be equal ({lhs} vs {rhs})")
    _check_precision_config(op)
    _check_algorithm(op)
    _check_operand_elements(op, lhs, rhs, _result_element(op))
    shape = [lhs.shape[d] for d in lb]
    shape += [s for d, s in enumerate(lhs.shape) if d not in lb and d not in lc]
    shape += [s for d, s in enumerate(rhs.shape) if d not in rb and d not in rc]
    # the result element type is free; a builder defaults to lhs's
    return [TensorType(tuple(shape), lhs.element_type)]


# Dot algorithms known to run on some hardware, as (lhs, rhs, accumulation,
# primitive operations); the spec lets verifiers reject all others.
_KNOWN_ALGORITHMS = {
    ("f16", "f16", "f16", 1), ("f16", "f16", "f32", 1), ("bf16", "bf16", "bf16", 1),
    ("bf16", "bf16", "f32", 1), ("bf16", "bf16", "f32", 3), ("bf16", "bf16", "f32", 6),
    ("bf16", "bf16", "f32", 9), ("tf32", "tf32", "f32", 1), ("tf32", "tf32", "f32", 3),
    ("f32", "f32", "f32", 1), ("f64", "f64", "f64", 1),
}
# The signed 8-bit float formats: any two of them with f32 accumulation is a known algorithm.
_F8 = frozenset(name for name, fmt in FLOAT_FORMATS.items() if fmt.bits == 8 and fmt.signed)


def _check_algorithm(op) -> None:
    algo = op.attributes.get("algorithm")
    if algo is None:
        return
    if not hasattr(algo, "get"):
        raise op_error(op, f"attribute 'algorithm' must be a #stablehlo.dot_algorithm<...>, "
                           f"got {algo}")
    for field in ("lhs_component_count", "rhs_component_count", "num_primitive_operations"):
        value = algo.get(field)
        if isinstance(value, int) and value <= 0:
            raise op_error(op, f"algorithm {field} is {value}, expected a positive value")
    precision = op.attributes.get("precision_config")
    if isinstance(precision, ArrayAttr):
        if any(getattr(v, "value", "DEFAULT") != "DEFAULT" for v in precision.values):
            raise op_error(op, "precision_config must be DEFAULT when an algorithm is given")
    if not _is_known_algorithm(algo):
        raise op_error(op, f"dot algorithm {algo} is not known to be supported on any "
                           f"hardware")


def _is_known_algorithm(algo) -> bool:
    names = tuple(str(algo.get(f)) for f in ("lhs_precision_type", "rhs_precision_type",
                                             "accumulation_type"))
    ops = algo.get("num_primitive_operations")
    if algo.get("lhs_component_count") != 1 or algo.get("rhs_component_count") != 1:
        return False
    if names[0] in _F8 and names[1] in _F8:
        return names[2] == "f32" and ops == 1
    if algo.get("allow_imprecise_accumulation"):
        return False
    return names + (ops,) in _KNOWN_ALGORITHMS


def _infer_dot(op):
    expect_num_operands(op, 2)
    lhs, rhs = tensor_operand(op, 0), tensor_operand(op, 1)
    if lhs.rank not in (1, 2) or rhs.rank not in (1, 2):
        raise op_error(op, f"operands have types {lhs} and {rhs}, expected rank 1 or 2")
    if not dims_compatible(lhs.shape[-1], rhs.shape[0]):
        raise op_error(op, f"lhs {lhs} and rhs {rhs} have different contracting dimension "
                           f"sizes")
    _check_precision_config(op)
    shape = tuple(lhs.shape[:-1]) + tuple(rhs.shape[1:])
    return [TensorType(shape, lhs.element_type)]


# ---------------------------------------------------------------------------
# convolution

def _conv_dims(op, rank: int) -> ConvDimensionNumbersAttr:
    dn = op.attributes.get("dimension_numbers")
    if not isinstance(dn, ConvDimensionNumbersAttr):
        raise op_error(op, f"requires attribute 'dimension_numbers' (#stablehlo.conv<...>), "
                           f"got {dn}")
    for what, dims in (
            ("input", [dn.input_batch_dimension, *dn.input_spatial_dimensions,
                       dn.input_feature_dimension]),
            ("kernel", [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
                        dn.kernel_output_feature_dimension]),
            ("output", [dn.output_batch_dimension, *dn.output_spatial_dimensions,
                        dn.output_feature_dimension])):
        check_size(op, f"{what} dimension numbers", dims, rank,
                   "one batch/feature pair plus one per spatial dimension")
        check_dims(op, f"{what} dimension numbers", dims, rank)
    return dn


def _conv_window(op, spatial: int) -> tuple:
    strides = int_list(op, "window_strides", [1] * spatial)
    lhs_dil = int_list(op, "lhs_dilation", [1] * spatial)
    rhs_dil = int_list(op, "rhs_dilation", [1] * spatial)
    reversal = bool_list(op, "window_reversal", [False] * spatial)
    for name, values in (("window_strides", strides), ("lhs_dilation", lhs_dil),
                         ("rhs_dilation", rhs_dil), ("window_reversal", reversal)):
        check_size(op, f"attribute '{name}'", values, spatial, "the number of spatial dims")
    for name, values in (("window_strides", strides), ("lhs_dilation", lhs_dil),
                         ("rhs_dilation", rhs_dil)):
        check_positive(op, f"attribute '{name}'", values)
    return strides, lhs_dil, rhs_dil


def _check_group_counts(op, lhs, rhs, dn) -> tuple:
    fgc = int_attr(op, "feature_group_count", 1)
    bgc = int_attr(op, "batch_group_count", 1)
    check_positive(op, "feature_group_count and batch_group_count", [fgc, bgc])
    if fgc != 1 and bgc != 1:
        raise op_error(op, f"feature_group_count ({fgc}) and batch_group_count ({bgc}) "
                           f"cannot both exceed 1")
    batch, feature = lhs.shape[dn.input_batch_dimension], lhs.shape[dn.input_feature_dimension]
    k_in = rhs.shape[dn.kernel_input_feature_dimension]
    k_out = rhs.shape[dn.kernel_output_feature_dimension]
    if batch is not None and batch % bgc:
        raise op_error(op, f"input batch dimension size {batch} is not a multiple of "
                           f"batch_group_count {bgc}")
    if feature is not None and feature % fgc:
        raise op_error(op, f"input feature dimension size {feature} is not a multiple of "
                           f"feature_group_count {fgc}")
    if feature is not None and k_in is not None and k_in != feature // fgc:
        raise op_error(op, f"kernel input feature dimension has size {k_in}, expected "
                           f"{feature // fgc} (input features {feature} / "
                           f"feature_group_count {fgc})")
    for name, count in (("batch_group_count", bgc), ("feature_group_count", fgc)):
        if k_out is not None and k_out % count:
            raise op_error(op, f"kernel output feature dimension size {k_out} is not a "
                               f"multiple of {name} {count}")
    return fgc, bgc


def _conv_shape(op, lhs, rhs, padding, strict_window: bool = True) -> list:
    rank = lhs.rank
    if rhs.rank != rank:
        raise op_error(op, f"lhs {lhs} and rhs {rhs} must have the same rank")
    if rank < 2:
        raise op_error(op, f"lhs {lhs} must have rank >= 2")
    dn = _conv_dims(op, rank)
    if not strict_window and not _window_sizes_match(op, rank - 2):
        # Note [dynamic_conv windows]: upstream MLIR does not check the window
        # attributes of dynamic_conv, and JAX's shape-polymorphic exports carry
        # 2-D window attributes on 1-D convolutions. We accept them like MLIR
        # does and leave the spatial result dims unconstrained.
        padding = None
        strides = lhs_dil = rhs_dil = None
    else:
        strides, lhs_dil, rhs_dil = _conv_window(op, rank - 2)
    _fgc, bgc = _check_group_counts(op, lhs, rhs, dn)
    _check_precision_config(op)
    shape = [None] * rank
    batch = lhs.shape[dn.input_batch_dimension]
    shape[dn.output_batch_dimension] = None if batch is None else batch // bgc
    shape[dn.output_feature_dimension] = rhs.shape[dn.kernel_output_feature_dimension]
    for i, out_dim in enumerate(dn.output_spatial_dimensions):
        size = lhs.shape[dn.input_spatial_dimensions[i]]
        window = rhs.shape[dn.kernel_spatial_dimensions[i]]
        if window is None or padding is None:
            continue
        shape[out_dim] = window_output_size(size, window, strides[i], padding[i],
                                            lhs_dil[i], rhs_dil[i])
    return shape


def _infer_convolution(op):
    expect_num_operands(op, 2)
    lhs, rhs = tensor_operand(op, 0), tensor_operand(op, 1)
    padding = padding_pairs(op, "padding", max(lhs.rank - 2, 0))
    shape = _conv_shape(op, lhs, rhs, padding)
    _check_operand_elements(op, lhs, rhs, _result_element(op))
    return [TensorType(tuple(shape), lhs.element_type)]


def _infer_dynamic_conv(op):
    expect_num_operands(op, 3)
    lhs, rhs = tensor_operand(op, 0), tensor_operand(op, 1)
    pad = tensor_operand(op, 2, "operand #2 (padding)")
    if pad.rank != 2 or not dims_compatible(pad.shape[1], 2) or not is_int(pad.element_type):
        raise op_error(op, f"operand #2 (padding) has type {pad}, expected an Nx2 integer "
                           f"tensor")
    spatial = max(lhs.rank - 2, 0)
    if not dims_compatible(pad.shape[0], spatial):
        raise op_error(op, f"operand #2 (padding) has type {pad}, expected {spatial}x2 (one "
                           f"[low, high] pair per spatial dimension)")
    values = constant_ints(op.operands[2])
    padding = None if values is None else list(zip(values[0::2], values[1::2]))
    shape = _conv_shape(op, lhs, rhs, padding, strict_window=False)
    _check_operand_elements(op, lhs, rhs, _result_element(op))
    return [TensorType(tuple(shape), lhs.element_type)]


def _window_sizes_match(op, spatial: int) -> bool:
    names = ("window_strides", "lhs_dilation", "rhs_dilation", "window_reversal")
    return all(len(int_list(op, n, [0] * spatial) if n != "window_reversal"
                   else bool_list(op, n, [False] * spatial)) == spatial for n in names)


# ---------------------------------------------------------------------------
# fft, cholesky, triangular_solve

def _infer_fft(op):
    expect_num_operands(op, 1)
    t = tensor_operand(op, 0)
    kind = enum_attr(op, "fft_type", "fft_type", ("FFT", "IFFT", "RFFT", "IRFFT"))
    lengths = int_list(op, "fft_length")
    if not 1 <= len(lengths) <= min(3, t.rank):
        raise op_error(op, f"attribute 'fft_length' has size {len(lengths)}, expected 1 to "
                           f"{min(3, t.rank)} (and at most the operand's rank {t.rank})")
    e = t.element_type
    shape = list(t.shape)
    k = len(lengths)
    if kind in ("FFT", "IFFT"):
        if not is_complex(e):
            raise op_error(op, f"operand #0 has type {t}, expected complex elements for {kind}")
        return [t]
    if kind == "RFFT":
        if not is_float(e) or e.name not in ("f32", "f64"):
            raise op_error(op, f"operand #0 has type {t}, expected f32 or f64 elements for RFFT")
        _check_fft_lengths(op, t, lengths)
        last = shape[-1]
        shape[-1] = None if last is None else (0 if last == 0 else last // 2 + 1)
        return [TensorType(tuple(shape), ComplexType(e))]
    if not is_complex(e):
        raise op_error(op, f"operand #0 has type {t}, expected complex elements for IRFFT")
    shape[-k:] = lengths
    result = TensorType(tuple(shape), e.element_type)
    last = t.shape[-1]
    want = 0 if lengths[-1] == 0 else lengths[-1] // 2 + 1
    if last is not None and last != want:
        raise op_error(op, f"operand #0 has type {t}, expected last dimension {want} for "
                           f"IRFFT of length {lengths[-1]}")
    return [result]


def _check_fft_lengths(op, real: TensorType, lengths: list) -> None:
    tail = list(real.shape[-len(lengths):])
    if not shapes_compatible(tail, lengths):
        raise op_error(op, f"the trailing dimensions of {real} are {tail}, expected "
                           f"fft_length {lengths}")


def _infer_cholesky(op):
    expect_num_operands(op, 1)
    a = tensor_operand(op, 0)
    if a.rank < 2 or not dims_compatible(a.shape[-1], a.shape[-2]):
        raise op_error(op, f"operand #0 has type {a}, expected a batch of square matrices")
    if not (is_float(a.element_type) or is_complex(a.element_type)):
        raise op_error(op, f"operand #0 has type {a}, expected float or complex elements")
    return [a]


def _infer_triangular_solve(op):
    expect_num_operands(op, 2)
    a, b = tensor_operand(op, 0), tensor_operand(op, 1)
    if baseline(a.element_type) != baseline(b.element_type):
        raise op_error(op, f"operand #1 has type {b}, expected element type {a.element_type}")
    if a.rank < 2 or a.rank != b.rank:
        raise op_error(op, f"operands {a} and {b} must have the same rank >= 2")
    if not shapes_compatible(a.shape[:-2], b.shape[:-2]):
        raise op_error(op, f"operands {a} and {b} must have the same batch dimensions")
    left = op.attributes.get("left_side")
    left = bool(getattr(left, "value", left))
    side = b.shape[-2] if left else b.shape[-1]
    if not (dims_compatible(a.shape[-1], a.shape[-2]) and dims_compatible(a.shape[-1], side)):
        raise op_error(op, f"operand #0 has type {a}, expected square matrices of size "
                           f"{side} (dimension {-2 if left else -1} of b {b})")
    enum_attr(op, "transpose_a", "transpose", ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"))
    return [b]


# ---------------------------------------------------------------------------
# batch norm, rng

def _batch_norm_operands(op, count: int) -> tuple:
    expect_num_operands(op, count)
    types = [tensor_operand(op, i) for i in range(count)]
    x = types[0]
    feature = int_attr(op, "feature_index")
    check_in_range(op, "attribute 'feature_index'", [feature], 0, x.rank)
    for i, t in enumerate(types):
        if baseline(t.element_type) != baseline(x.element_type):
            raise op_error(op, f"operand #{i} has type {t}, expected element type "
                               f"{x.element_type}")
    return types, x.shape[feature]


def _check_feature_vectors(op, types, indices, size) -> None:
    for i in indices:
        t = types[i]
        if t.rank != 1 or not dims_compatible(t.shape[0], size):
            raise op_error(op, f"operand #{i} has type {t}, expected a 1-D tensor of size "
                               f"{size} (the operand's feature dimension)")


def _infer_batch_norm_inference(op):
    types, size = _batch_norm_operands(op, 5)
    _check_feature_vectors(op, types, range(1, 5), size)
    return [types[0]]


def _infer_batch_norm_training(op):
    types, size = _batch_norm_operands(op, 3)
    _check_feature_vectors(op, types, (1, 2), size)
    return [types[0], types[1], types[1]]


def _infer_batch_norm_grad(op):
    types, size = _batch_norm_operands(op, 5)
    _check_feature_vectors(op, types, (1, 2, 3), size)
    if not shapes_compatible(types[4].shape, types[0].shape):
        raise op_error(op, f"operand #4 (grad_output) has type {types[4]}, expected the shape "
                           f"of operand {types[0]}")
    return [types[0], types[1], types[1]]


def _check_rng(op):
    expect_num_operands(op, 3)
    a, b = tensor_operand(op, 0), tensor_operand(op, 1)
    shape = tensor_operand(op, 2, "operand #2 (shape)")
    result = tensor_result(op)
    for i, t in ((0, a), (1, b)):
        if t.rank != 0 or t.element_type != result.element_type:
            raise op_error(op, f"operand #{i} has type {t}, expected "
                               f"tensor<{result.element_type}>")
    if shape.rank != 1 or not is_index_like(shape.element_type):
        raise op_error(op, f"operand #2 (shape) has type {shape}, expected a 1-D integer "
                           f"tensor")
    if shape.shape[0] is not None and shape.shape[0] != result.rank:
        raise op_error(op, f"result #0 has rank {result.rank}, expected {shape.shape[0]} "
                           f"(the size of the shape operand)")
    dist = enum_attr(op, "rng_distribution", "rng_distribution", ("UNIFORM", "NORMAL"))
    if dist == "NORMAL" and not is_float(a.element_type):
        raise op_error(op, f"NORMAL distribution needs float elements, got {a}")


def _check_rng_bit_generator(op):
    expect_num_operands(op, 1)
    state = tensor_operand(op, 0)
    if len(op.results) != 2:
        raise op_error(op, f"expected 2 results (output_state, output), got "
                           f"{len(op.results)}")
    if op.results[0].type != state:
        raise op_error(op, f"result #0 (output_state) has type {op.results[0].type}, "
                           f"expected {state} (the initial state's)")
    output = tensor_result(op, 1)
    if not (is_int(output.element_type) or is_float(output.element_type)):
        raise op_error(op, f"result #1 has type {output}, expected integer or float elements")
    algo = enum_attr(op, "rng_algorithm", "rng_algorithm", ("DEFAULT", "THREE_FRY", "PHILOX"))
    allowed = {"THREE_FRY": (2,), "PHILOX": (2, 3)}.get(algo)
    if allowed and state.is_static and state.num_elements not in allowed:
        raise op_error(op, f"initial state {state} has {state.num_elements} elements, "
                           f"expected {' or '.join(map(str, allowed))} for {algo}")


RULES = {
    "dot_general": Rule(_infer_dot_general, compare="shape"),
    "dot": Rule(_infer_dot, compare="shape"),
    "convolution": Rule(_infer_convolution, compare="shape"),
    "dynamic_conv": Rule(_infer_dynamic_conv, compare="shape"),
    "fft": Rule(_infer_fft),
    "cholesky": Rule(_infer_cholesky),
    "triangular_solve": Rule(_infer_triangular_solve, compare="baseline"),
    "batch_norm_inference": Rule(_infer_batch_norm_inference, compare="baseline"),
    "batch_norm_training": Rule(_infer_batch_norm_training, compare="baseline"),
    "batch_norm_grad": Rule(_infer_batch_norm_grad, compare="baseline"),
    "rng": Rule(check=_check_rng),
    "rng_bit_generator": Rule(check=_check_rng_bit_generator),
}


def rule_for(mnemonic: str):
    """The Rule declared for ``mnemonic`` in this file, or None."""
    return RULES.get(mnemonic)
