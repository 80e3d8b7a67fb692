"""``torch.ops.openhlo.quantized_linear``: the op a quantized linear layer calls.

    quantized_linear(x, weight, scales, bias, bits, dynamic) -> y

One custom op (torch.library) so that torch.compile hands it to the ``openhlo`` backend
whole, where ``lowering/quantized.py`` lowers it to integer StableHLO; its eager kernel
here is the reference (and what runs without torch.compile). Layouts, for a layer of
``N`` outputs and ``K`` inputs:

* ``bits=8``: ``weight`` int8 ``[N, K]``, ``scales`` f32 ``[N]`` (per output channel);
* ``bits=4``: ``weight`` uint8 ``[N, K / 2]``, two's complement nibbles, input ``2j`` in the
  low nibble of byte ``j`` (the order StableHLO's ``bitcast_convert`` to i4 reads them),
  ``scales`` f32 ``[N, K / G]`` (one per group of ``G`` consecutive inputs);
* ``dynamic``: int8 weights as above, and ``x`` quantized at run time to symmetric
  per-tensor int8 (``s_x = max|x| / 127``): ``y = (q_x @ q_w.T) * s_x * s_w``, the integer
  product exact in int32.

``y = x @ w.T + bias`` with ``w = q_w * scale`` (weight-only modes).
"""
from __future__ import annotations

from typing import Optional

import torch

_TINY = torch.finfo(torch.float32).tiny


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 ``[N, K / 2]`` of nibble pairs -> int8 ``[N, K]`` in [-8, 7]."""
    signed = packed.view(torch.int8)
    low = torch.bitwise_right_shift(torch.bitwise_left_shift(signed, 4), 4)
    high = torch.bitwise_right_shift(signed, 4)
    return torch.stack([low, high], dim=-1).reshape(packed.shape[0], -1)


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """int8 ``[N, K]`` in [-8, 7] (``K`` even) -> uint8 ``[N, K / 2]`` (``unpack_int4``'s
    inverse)."""
    nibbles = (values.to(torch.int8) & 0x0F).view(torch.uint8).reshape(values.shape[0], -1, 2)
    return nibbles[..., 0] | (nibbles[..., 1] << 4)


def dequantized_weight(weight: torch.Tensor, scales: torch.Tensor, bits: int) -> torch.Tensor:
    """The f32 ``[N, K]`` weight a quantized one stands for."""
    if bits == 8:
        return weight.to(torch.float32) * scales[:, None]
    values = unpack_int4(weight)
    rows, depth = values.shape
    groups = scales.shape[1]
    grouped = values.to(torch.float32).reshape(rows, groups, depth // groups)
    return (grouped * scales[:, :, None]).reshape(rows, depth)


def quantize_activation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-tensor int8 of ``x`` at run time: ``(q, scale)``, the same f32 steps
    as ``xla_core.quantization.quantize_activation`` builds in StableHLO."""
    magnitude = x.abs().amax() if x.numel() else torch.zeros((), dtype=x.dtype)
    scale = torch.where(magnitude > _TINY, magnitude / 127, torch.ones((), dtype=x.dtype))
    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)
    return q, scale


@torch.library.custom_op("openhlo::quantized_linear", mutates_args=())
def quantized_linear(x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor,
                     bias: Optional[torch.Tensor], bits: int, dynamic: bool) -> torch.Tensor:
    if dynamic:
        q, scale = quantize_activation(x)
        flat = q.reshape(-1, q.shape[-1]).to(torch.int32)
        accumulator = (flat @ weight.to(torch.int32).T).to(torch.float32)
        y = (accumulator * scale) * scales
        y = y.reshape(*x.shape[:-1], weight.shape[0])
    else:
        y = torch.nn.functional.linear(x, dequantized_weight(weight, scales, bits))
    return y if bias is None else y + bias


@quantized_linear.register_fake
def _(x, weight, scales, bias, bits, dynamic):
    return x.new_empty((*x.shape[:-1], scales.shape[0]))
