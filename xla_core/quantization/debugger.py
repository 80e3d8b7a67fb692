"""The numeric debugger: per-layer error of a quantization against the float program.

On calibration inputs, for each quantized unit (quantizer.py), two errors of its output:

* **isolated**: the unit's quantized form computed from the *float* program's input to it,
  against the float op (a program where each quantized form sits beside its float op; the
  TF quantizer's ``INT_PER_LAYER`` debugging). This is the error the layer itself adds: a
  layer with an accuracy cliff shows here alone, not in every layer after it;
* **cumulative**: the unit's output in the quantized program against the float program's
  (what the layer sees with every earlier layer quantized too).

Each as SQNR (dB, ``10 log10(sum y^2 / sum (y - y_q)^2)``), the SQNR of the worst output
channel, largest absolute error and relative error (``|y - y_q| / |y|``, Frobenius norms),
summed over all calibration sets; plus the program's final outputs. A layer is flagged when
its isolated worst-channel SQNR is below ``threshold_db`` (default 25 dB; int8 layers without
outliers are usually at 35 dB or more).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from stablehlo.ir.core import Module
from xla_core.quantization.calibration import Runner, interpreter_runner
from xla_core.quantization.config import QuantizationError
from xla_core.quantization.quantizer import (calibrate, choose_units, input_sets, make_config,
                                             prepare, rewrite_units)
from xla_core.quantization.report import QuantizationReport
from xla_core.quantization.units import find_units


def _sqnr_db(signal, noise):
    """10 log10(signal / noise), elementwise; +inf where there is no noise."""
    signal, noise = np.asarray(signal, dtype=np.float64), np.asarray(noise, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(noise > 0, 10 * np.log10(np.maximum(signal, 1e-300) / noise), np.inf)


@dataclass
class _ErrorSum:
    """Running sums over calibration sets of one compared value, also per channel (the
    entries along ``axis``): a per-tensor weight scale set by one large channel wipes out
    the small ones, which the whole tensor's SQNR (dominated by the large one) hides."""
    axis: Optional[int] = None
    signal: object = 0.0
    noise: object = 0.0
    max_abs: float = 0.0

    def add(self, reference: np.ndarray, approximation: np.ndarray) -> None:
        reference = np.asarray(reference, dtype=np.float64)
        difference = reference - np.asarray(approximation, dtype=np.float64)
        others = tuple(d for d in range(reference.ndim) if d != self.axis)
        self.signal = self.signal + np.sum(reference ** 2, axis=others)
        self.noise = self.noise + np.sum(difference ** 2, axis=others)
        self.max_abs = max(self.max_abs, float(np.max(np.abs(difference), initial=0.0)))

    def metrics(self) -> dict:
        signal, noise = float(np.sum(self.signal)), float(np.sum(self.noise))
        relative = 0.0 if noise == 0 else float(np.sqrt(noise / max(signal, 1e-300)))
        return {"sqnr_db": float(_sqnr_db(signal, noise)), "max_abs": self.max_abs,
                "relative": relative,
                "worst_channel_sqnr_db": float(np.min(_sqnr_db(self.signal, self.noise)))}


@dataclass
class NumericsReport:
    threshold_db: float
    layers: list = field(default_factory=list)   # dicts: id, location, isolated, cumulative
    outputs: list = field(default_factory=list)  # metrics of each program result

    @property
    def flagged(self) -> list:
        return [layer["id"] for layer in self.layers if layer["flagged"]]

    def layer(self, unit_id: str) -> dict:
        return next(layer for layer in self.layers if layer["id"] == unit_id)

    def to_json(self) -> str:
        return json.dumps({"threshold_db": self.threshold_db, "layers": self.layers,
                           "outputs": self.outputs, "flagged": self.flagged}, indent=2)

    def format_table(self) -> str:
        lines = [f"{'layer':<18} {'isolated SQNR':>14} {'worst ch.':>10} {'max abs':>10} "
                 f"{'relative':>9}  "
                 f"{'cumulative SQNR':>16} {'max abs':>10}  location"]
        for layer in self.layers:
            iso, cum = layer["isolated"], layer["cumulative"]
            mark = "  <-- below threshold" if layer["flagged"] else ""
            lines.append(f"{layer['id']:<18} {iso['sqnr_db']:>11.1f} dB "
                         f"{iso['worst_channel_sqnr_db']:>7.1f} dB {iso['max_abs']:>10.3g} "
                         f"{iso['relative']:>9.3g}  {cum['sqnr_db']:>13.1f} dB "
                         f"{cum['max_abs']:>10.3g}  {layer['location']}{mark}")
        for i, out in enumerate(self.outputs):
            lines.append(f"{'result ' + str(i):<18} {'':>14} {'':>10} {'':>10} {'':>9}  "
                         f"{out['sqnr_db']:>13.1f} dB {out['max_abs']:>10.3g}")
        return "\n".join(lines) + "\n"


def debug_numerics(module: Module, mode: Optional[str] = None, calibration=None, *,
                   config=None, entry: str = "main", runner: Optional[Runner] = None,
                   threshold_db: float = 25.0, **options) -> NumericsReport:
    """Per-layer error of quantizing ``module`` as ``quantize`` would (same arguments), on
    the ``calibration`` inputs (needed by every mode here: they are what is compared)."""
    config = make_config(mode, config, options)
    runner = runner or interpreter_runner
    isolated_module, func = prepare(module, entry)
    units = choose_units(func, config, QuantizationReport(config.mode))
    sets = input_sets(calibration, func)
    if not sets:
        raise QuantizationError("debug-numerics: needs calibration inputs to compare on")
    ranges = (calibrate(isolated_module, entry, units, sets, config, runner)
              if config.needs_calibration and units else {})
    cumulative_module, cumulative_func = prepare(module, entry)
    cumulative_units = [u for u in find_units(cumulative_func) if u.id in {v.id for v in units}]
    own = len(func.type.results)
    rewrite_units(isolated_module, func, units, config, ranges, keep_float=True, expose=True)
    rewrite_units(cumulative_module, cumulative_func, cumulative_units, config, ranges,
                  expose=True)
    count = len(units)
    isolated = [_ErrorSum(u.result_axis) for u in units]
    cumulative = [_ErrorSum(u.result_axis) for u in units]
    finals = [_ErrorSum() for _ in range(own)]
    for inputs in sets:
        plain = runner(isolated_module, entry, list(inputs))
        quantized = runner(cumulative_module, entry, list(inputs))
        float_outputs = plain[own + count:]
        for i in range(count):
            isolated[i].add(float_outputs[i], plain[own + i])
            cumulative[i].add(float_outputs[i], quantized[own + i])
        for i in range(own):
            finals[i].add(plain[i], quantized[i])
    report = NumericsReport(threshold_db)
    for unit, iso, cum in zip(units, isolated, cumulative):
        metrics = iso.metrics()
        report.layers.append({"id": unit.id, "location": unit.location, "isolated": metrics,
                              "cumulative": cum.metrics(),
                              "flagged": metrics["worst_channel_sqnr_db"] < threshold_db})
    report.outputs = [f.metrics() for f in finals]
    return report
