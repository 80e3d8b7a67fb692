"""``quantize_(model, mode)``: quantize a model's linear layers in place.

    from frameworks.torch import quantize_
    quantize_(model, "weight-int8")                   # or "weight-int4", "dynamic-int8"
    quantize_(model, "weight-int4", group_size=64)
    fast = torch.compile(model, backend="openhlo")    # integer StableHLO (lowering/quantized.py)
    model(x)                                          # eager: the dequantizing reference

Each ``nn.Linear`` (those ``filter_fn(module, name)`` accepts) is replaced by a
``QuantizedLinear`` holding int8 weights (int4: packed two per byte) and their f32 scales
as buffers, and calling ``torch.ops.openhlo.quantized_linear`` (quantized_ops.py for the
layouts). Weights are quantized as the StableHLO quantizer does
(``xla_core.quantization.quantize_weights``, symmetric): int8 ``max|w| / 127`` per output
channel; int4 group-wise along the inputs, ``group_size`` (default 32) consecutive inputs per
scale, or per output channel when ``group_size`` does not divide the layer's inputs, each
scale the clip of ``max|w| / 7`` with the least squared rounding error of its group.
``dynamic-int8`` also quantizes each activation at run time (per tensor). Embeddings
(``nn.Embedding``) stay f32.

``weight-int4`` keeps a layer named ``lm_head`` (a language model's output projection, as
transformers and frameworks/torch/models name it) at int8 unless ``int8_lm_head=False``, as
llama.cpp's 4-bit formats keep their output layer at 6 bits: its rounding error reaches the
logits undamped. On frameworks/torch/models/llama_nn.py (hidden 512, random weights) the int8
head takes int4's greedy next-token agreement with f32 from 86.5% to 94.6% for 15% more
weight bytes (frameworks/torch/README.md, "Accuracy of weight-only modes"). Layers can be
mixed further: ``quantize_(m, "weight-int4", filter_fn=...)`` then ``quantize_(m,
"weight-int8")`` quantizes the layers the first call left.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from pjrt.plugins.compiler_services import QuantizationError, quantize_weights

from frameworks.torch import quantized_ops

MODES = ("weight-int8", "weight-int4", "dynamic-int8")


class QuantizedLinear(torch.nn.Module):
    """A linear layer with quantized weights (buffers ``weight``, ``scales``, ``bias``)."""

    def __init__(self, weight: torch.Tensor, scales: torch.Tensor,
                 bias: Optional[torch.Tensor], bits: int, dynamic: bool, in_features: int):
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)
        self.bits, self.dynamic = bits, dynamic
        self.in_features, self.out_features = in_features, scales.shape[0]

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, mode: str,
                    group_size: int) -> "QuantizedLinear":
        w = linear.weight.detach().to(torch.float32).cpu().numpy()
        rows, depth = w.shape
        bits = 4 if mode == "weight-int4" else 8
        if bits == 8:
            storage, scales = quantize_weights(w, 8, axis=0)
            weight = torch.from_numpy(storage)
            scales = torch.from_numpy(scales)
        else:
            group = group_size if depth % group_size == 0 else depth
            if depth % 2:
                raise QuantizationError(f"quantize_: weight-int4 packs two inputs per byte; "
                                        f"a layer with {depth} inputs cannot be packed")
            storage, scales = quantize_weights(w.reshape(rows * (depth // group), group), 4,
                                               axis=0)
            weight = quantized_ops.pack_int4(torch.from_numpy(storage).reshape(rows, depth))
            scales = torch.from_numpy(scales).reshape(rows, depth // group)
        bias = None if linear.bias is None else linear.bias.detach().to(torch.float32).clone()
        return cls(weight, scales, bias, bits, mode == "dynamic-int8", depth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.openhlo.quantized_linear(x, self.weight, self.scales, self.bias,
                                                  self.bits, self.dynamic)

    def extra_repr(self) -> str:
        kind = "dynamic-int8" if self.dynamic else f"weight-int{self.bits}"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind}"


def quantize_(model: torch.nn.Module, mode: str, *, group_size: int = 32,
              filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None,
              int8_lm_head: bool = True) -> torch.nn.Module:
    """Replace ``model``'s ``nn.Linear`` layers by ``QuantizedLinear`` in place (see the
    module docstring); returns ``model``. ``filter_fn(module, qualified_name)`` chooses the
    layers (default: every ``nn.Linear``); in ``weight-int4`` mode a chosen layer named
    ``lm_head`` is quantized ``weight-int8`` unless ``int8_lm_head`` is False."""
    if mode not in MODES:
        raise QuantizationError(f"quantize_: unknown mode '{mode}' (known: {', '.join(MODES)})")
    if group_size < 1:
        raise QuantizationError(f"quantize_: group_size {group_size} is not positive")
    chosen = [(name, module) for name, module in model.named_modules()
              if isinstance(module, torch.nn.Linear)
              and (filter_fn is None or filter_fn(module, name))]
    for name, linear in chosen:
        if not name:
            raise QuantizationError("quantize_: the model itself is an nn.Linear; quantize_ "
                                    "replaces submodules, so wrap it in a module")
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        layer_mode = "weight-int8" if mode == "weight-int4" and int8_lm_head and \
            child == "lm_head" else mode
        setattr(parent, child, QuantizedLinear.from_linear(linear, layer_mode, group_size))
    return model
