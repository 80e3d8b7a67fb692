"""The StableHLO quantizer: float programs in, standard quantized StableHLO out.

``quantize(module, mode=..., calibration=...) -> (module, report)`` (quantizer.py),
``debug_numerics(module, mode=..., calibration=...)`` (debugger.py: per-layer error of the
quantized program against the float one), and the ``quant-lower`` pass (quant_lower.py:
quantized types to integer and float math; integer_contraction.py: quantized dot_generals
and convolutions as the i8 x i8 -> i32 dot_generals of int8 GEMMs). ``quantize_weights``
and ``quantize_activation`` are the weight parameters and the run-time activation
quantization that the frameworks' own quantized layers share with it
(frameworks/torch/quantize.py).
"""
from xla_core.quantization.config import (GRANULARITIES, METHODS, MODES, QuantizationConfig,
                                          QuantizationError)
from xla_core.quantization.debugger import NumericsReport, debug_numerics
from xla_core.quantization.emit import quantize_activation
from xla_core.quantization.params import quantize_weights
from xla_core.quantization.quantizer import quantize
from xla_core.quantization.report import QuantizationReport

__all__ = ["quantize", "debug_numerics", "NumericsReport", "QuantizationConfig",
           "QuantizationError", "QuantizationReport", "MODES", "GRANULARITIES", "METHODS",
           "quantize_weights", "quantize_activation"]
