"""What the quantizer is asked to do: mode, weight granularity, calibration method, skip list.

Modes (the names of ``openhlo quantize --mode``):

* ``weight-int8`` / ``weight-int4``: weights become ``!quant.uniform`` constants (symmetric,
  zero point 0) and dots/convolutions become the spec's hybrid ops (float lhs, quantized rhs,
  float result); ``weight-int4`` is group-wise along the contracting dimension when
  ``group_size`` divides it (rank-2 dot weights), per-channel otherwise.
* ``dynamic-int8``: int8 weights as above; the activation's per-tensor scale is computed from
  the running tensor (``max|x| / 127``), which no ``!quant.uniform`` type can hold, so the
  activation path is written as integer math (see emit_dynamic.py).
* ``static-int8``: calibrated per-tensor int8 activations (``uniform_quantize``), int8 weights,
  the quantized dot/convolution with an i32 accumulator of scale ``s_x * s_w`` and a
  ``uniform_dequantize`` after it.

Activations are per-tensor in every mode: the spec requires a per-tensor lhs for quantized
dot_general and convolution; ``granularity`` is the weights'.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stablehlo.errors import OpenHLOError

MODES = ("weight-int8", "weight-int4", "dynamic-int8", "static-int8")
GRANULARITIES = ("per-channel", "per-tensor")
METHODS = ("minmax", "percentile", "mse")


class QuantizationError(OpenHLOError):
    """A quantization request the quantizer cannot satisfy (bad option, missing data)."""


@dataclass(frozen=True)
class QuantizationConfig:
    """Options of one quantization run.

    ``skip``: op names (``dot_general``), unit ids (``dot_general#1``, as the report names
    them) or location fragments (``model.py:12``) left in float.
    ``percentile``: the calibration percentile of ``method="percentile"``.
    ``group_size``: the int4 group along the contracting dimension.
    """
    mode: str
    granularity: str = "per-channel"
    method: str = "minmax"
    skip: tuple = field(default_factory=tuple)
    percentile: float = 99.99
    group_size: int = 32

    def __post_init__(self):
        _choice("mode", self.mode, MODES)
        _choice("granularity", self.granularity, GRANULARITIES)
        _choice("method", self.method, METHODS)
        if not 50.0 < self.percentile <= 100.0:
            raise QuantizationError(f"quantize: percentile {self.percentile} is not in (50, 100]")
        if self.group_size < 1:
            raise QuantizationError(f"quantize: group size {self.group_size} is not positive")

    @property
    def weight_bits(self) -> int:
        return 4 if self.mode == "weight-int4" else 8

    @property
    def needs_calibration(self) -> bool:
        return self.mode == "static-int8"


def _choice(what: str, value: str, known: tuple) -> None:
    if value not in known:
        raise QuantizationError(f"quantize: unknown {what} '{value}' (known: {', '.join(known)})")
