"""``weight-only-dot``: a float matmul on a dequantized integer weight becomes one
``openhlo.weight_only_dot`` composite, before fusion can swallow the dequantization.

It recognises the one form both producers of weight-only programs emit (the quantizer,
after ``quant-lower``, and frameworks/torch's ``quantize_`` lowering): ``x`` f32 ``[..., K]``
contracting its last dim, a result f32 ``[..., N]``, and a weight that is either

* per output channel: ``convert(w: i8|i4) * broadcast_in_dim(s: f32[N])`` with ``w``
  ``[N, K]`` or ``[K, N]`` (``s`` along its N dim); or
* group-wise (``G`` consecutive inputs per scale): ``reshape(convert(q: i8|i4[N*K/G, G]) *
  broadcast_in_dim(s: f32[N*K/G], dims=[0]), [N, K])``, contracting its dim 1: row ``n *
  K/G + g`` of ``q`` is group ``g`` of output ``n`` (the quantizer's per-axis
  ``!quant.uniform`` constant of that shape, dequantized). ``q`` may itself be
  ``reshape(bitcast_convert(p: ui8|i8[N, K/2]) -> i4[N, K/2, 2])``: the weight packed two a
  byte, low nibble first; then ``p`` is the composite's operand, so the kernel reads the
  packed bytes where they lie (torch's buffers, program arguments under torch.compile).

The composite ``stablehlo.composite "openhlo.weight_only_dot"(x, weight, scales)`` carries
``bits``, ``group_size`` (K per channel) and ``weight_contracting`` (the weight dim holding
K); its decomposition is the original math, so every backend runs it (the interpreter calls
the decomposition, the cpu backend its weight-only kernel). The dequantizing ops stay in
place for DCE to drop when nothing else reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.attributes import DictAttr, IntegerAttr, StringAttr, SymbolRefAttr
from stablehlo.ir.core import Block, Module, Operation, Value, make_func
from stablehlo.ir.types import I64, FunctionType, TensorType
from xla_core.ir_utils import blocks_of, clone_operation, replace_uses
from xla_core.passes.base import Pass, PassContext

WEIGHT_ONLY_DOT = "openhlo.weight_only_dot"


@dataclass(frozen=True)
class _Match:
    """A recognised dot: the composite's operands, attributes and the ops it decomposes to
    (in program order)."""
    x: Value
    weight: Value
    scales: Value
    bits: int
    group_size: int
    weight_contracting: int
    chain: tuple


@dataclass(frozen=True)
class WeightOnlyDotPass(Pass):
    name = "weight-only-dot"

    def run(self, module: Module, ctx: PassContext) -> bool:
        taken = {f.name for f in module.functions()}
        changed = False
        for func in list(module.functions()):
            if func.body is None:
                continue
            replacements: dict = {}
            for block in blocks_of(func.op):
                for index, op in enumerate(block.operations):
                    found = match(op)
                    if found is None:
                        continue
                    composite = _composite(module, found, op, taken)
                    composite.parent = block
                    block.operations[index] = composite
                    replacements[op.results[0]] = composite.results[0]
            if replacements:
                replace_uses(func.op, replacements)
                changed = True
        return changed


def _element(value: Value) -> str:
    return str(value.type.element_type) if isinstance(value.type, TensorType) else ""


def _producer(value: Value, name: str) -> Optional[Operation]:
    if value.is_block_argument or value.owner.name != name:
        return None
    return value.owner


def _scaled(value: Value, scale_dims: list) -> Optional[tuple]:
    """``(multiply, convert, broadcast)`` when ``value`` is ``convert(w: i8|i4) *
    broadcast_in_dim(s: f32, dims=scale_dims)`` (either operand order)."""
    multiply = _producer(value, "stablehlo.multiply")
    if multiply is None:
        return None
    for first, second in (multiply.operands, reversed(multiply.operands)):
        convert = _producer(first, "stablehlo.convert")
        broadcast = _producer(second, "stablehlo.broadcast_in_dim")
        if convert is None or broadcast is None or \
                _element(convert.operands[0]) not in _BITS:
            continue
        if _element(broadcast.operands[0]) != "f32" or broadcast.operands[0].type.rank != 1 \
                or list(broadcast.attr("broadcast_dimensions").values) != scale_dims:
            continue
        return multiply, convert, broadcast
    return None


_BITS = {"i8": 8, "i4": 4}


def match(dot: Operation) -> Optional[_Match]:
    """The weight-only dot ``dot`` is (see the module docstring), or None."""
    if dot.name != "stablehlo.dot_general" or "algorithm" in dot.attributes:
        return None
    x, rhs = dot.operands
    if _element(x) != "f32" or _element(dot.results[0]) != "f32" or rhs.type.rank != 2:
        return None
    dnums = dot.attr("dot_dimension_numbers")
    if struct_ints(dnums, "lhs_batching_dimensions") or \
            struct_ints(dnums, "rhs_batching_dimensions") or \
            struct_ints(dnums, "lhs_contracting_dimensions") != [x.type.rank - 1]:
        return None
    contracting = struct_ints(dnums, "rhs_contracting_dimensions")
    if len(contracting) != 1:
        return None
    k_dim = contracting[0]
    per_channel = _scaled(rhs, [1 - k_dim])
    if per_channel is not None:
        multiply, convert, broadcast = per_channel
        weight = convert.operands[0]
        return _Match(x, weight, broadcast.operands[0], _BITS[_element(weight)],
                      rhs.type.shape[k_dim], k_dim, (convert, broadcast, multiply, dot))
    return _match_grouped(dot, x, rhs, k_dim)


def _match_grouped(dot: Operation, x: Value, rhs: Value, k_dim: int) -> Optional[_Match]:
    reshape = _producer(rhs, "stablehlo.reshape")
    if reshape is None or k_dim != 1:
        return None
    outputs, depth = rhs.type.shape
    grouped = reshape.operands[0]
    if grouped.type.rank != 2:
        return None
    rows, group = grouped.type.shape
    if group == 0 or depth % group or rows != outputs * (depth // group):
        return None
    found = _scaled(grouped, [0])
    if found is None:
        return None
    multiply, convert, broadcast = found
    chain = (convert, broadcast, multiply, reshape, dot)
    weight = convert.operands[0]
    bits = _BITS[_element(weight)]
    packed = _packed_source(weight, outputs, depth) if bits == 4 else None
    if packed is not None:
        weight, unpack = packed
        chain = unpack + chain
    return _Match(x, weight, broadcast.operands[0], bits, group, 1, chain)


def _packed_source(nibbles: Value, outputs: int, depth: int) -> Optional[tuple]:
    """``(p, (bitcast_convert, reshape))`` when ``nibbles`` (i4) is
    ``reshape(bitcast_convert(p: ui8|i8[N, K/2]) -> i4[N, K/2, 2])``."""
    reshape = _producer(nibbles, "stablehlo.reshape")
    if reshape is None:
        return None
    bitcast = _producer(reshape.operands[0], "stablehlo.bitcast_convert")
    if bitcast is None:
        return None
    packed = bitcast.operands[0]
    if _element(packed) not in ("ui8", "i8") or depth % 2 or \
            packed.type.shape != (outputs, depth // 2) or \
            bitcast.results[0].type.shape != (outputs, depth // 2, 2):
        return None
    return packed, (bitcast, reshape)


def _composite(module: Module, found: _Match, dot: Operation, taken: set) -> Operation:
    """The composite replacing ``dot``, its decomposition added to ``module``."""
    index = 0
    while f"weight_only_dot_{index}" in taken:
        index += 1
    name = f"weight_only_dot_{index}"
    taken.add(name)
    operands = [found.x, found.weight, found.scales]
    ftype = FunctionType(tuple(v.type for v in operands), (dot.results[0].type,))
    func = make_func(name, ftype, visibility="private")
    func.location = dot.location
    body: Block = func.regions[0].blocks[0]
    mapping = dict(zip(operands, body.arguments))
    for op in found.chain:
        body.append(clone_operation(op, mapping))
    body.append(Operation("func.return", [mapping[dot.results[0]]], (), location=dot.location))
    module.body.append(func)
    attributes = DictAttr(tuple((key, IntegerAttr(value, I64)) for key, value in (
        ("bits", found.bits), ("group_size", found.group_size),
        ("weight_contracting", found.weight_contracting))))
    composite = Operation(
        "stablehlo.composite", operands, ftype.results,
        {"name": StringAttr(WEIGHT_ONLY_DOT), "composite_attributes": attributes,
         "decomposition": SymbolRefAttr(name)}, location=dot.location)
    composite.results[0].name_hint = dot.results[0].name_hint
    return composite
