"""Calibration: run the float program on sample inputs and choose activation ranges.

The program is run with the values to observe appended to its entry's results (``observe``),
on every input set, by a runner: ``runner(module, entry, inputs) -> results``. The default is
the reference interpreter; the CLI passes the cpu backend (xla_core does not import pjrt).

Ranges from the observed samples (all sets together), per ``method``:

* ``minmax``: the smallest and largest value seen;
* ``percentile``: the ``100 - p`` and ``p`` percentiles (outliers clipped);
* ``mse``: of the ranges ``f * [min, max]`` for ``f`` in (0.2, 1], the one whose int8
  quantize-dequantize of the samples has the least mean squared error.
"""
from __future__ import annotations

import os
import zipfile
from typing import Callable, Optional, Sequence

import numpy as np

from stablehlo.ir.core import Func, Module, Value
from xla_core.ir_utils import clone_operation
from xla_core.quantization.config import QuantizationError
from xla_core.quantization.params import INT8_MAX, INT8_MIN, activation_type
from xla_core.quantization.rebuild import rebuild

Runner = Callable[[Module, str, list], list]
_MSE_FRACTIONS = np.linspace(0.2, 1.0, 33)
_MSE_SAMPLES = 1 << 18


def interpreter_runner(module: Module, entry: str, inputs: list) -> list:
    """Run ``entry`` of ``module`` on the reference interpreter."""
    from stablehlo.interpreter import evaluate
    return [np.asarray(r) for r in evaluate(module, inputs, entry)]


def load_input_sets(paths: Sequence[str], func: Func) -> list[list[np.ndarray]]:
    """Input sets from ``.npz`` files of ``arg0..argN-1`` (as ``openhlo run --inputs``). An
    array with one more leading dimension than its parameter holds one set per index."""
    sets: list = []
    types = list(func.type.inputs)
    for path in paths:
        if not zipfile.is_zipfile(path):
            raise QuantizationError(f"calibration inputs {path}: not an .npz archive "
                                    f"(write it with np.savez)")
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        names = [f"arg{i}" for i in range(len(types))]
        if sorted(arrays) != sorted(names):
            raise QuantizationError(
                f"calibration inputs {os.path.basename(path)}: has {', '.join(sorted(arrays))}, "
                f"@{func.name} takes {', '.join(f'{n}: {t}' for n, t in zip(names, types))}")
        stacked = [arrays[n].ndim == t.rank + 1 for n, t in zip(names, types)]
        if all(stacked) and names:
            count = arrays[names[0]].shape[0]
            sets.extend([arrays[n][i] for n in names] for i in range(count))
        else:
            sets.append([arrays[n] for n in names])
    return sets


def observe(module: Module, entry: str, pick: Callable[[Func], list[Value]],
            input_sets: list, runner: Optional[Runner] = None) -> list[list[np.ndarray]]:
    """For each input set, the values ``pick(func)`` names (of the entry's block), with the
    program's own results left out. ``module`` is not changed."""
    runner = runner or interpreter_runner
    copy = Module(clone_operation(module.op, {}))
    func = copy.lookup(entry)
    picked = pick(func)
    own = len(func.type.results)
    rebuild(copy, func, lambda op, b, operands: None,
            extra_results=lambda mapping: [mapping.get(v, v) for v in picked])
    return [runner(copy, entry, list(inputs))[own:] for inputs in input_sets]


def choose_range(samples: list[np.ndarray], method: str, percentile: float) -> tuple:
    """(low, high) of the observed ``samples`` by ``method``."""
    values = np.concatenate([np.asarray(s, dtype=np.float32).ravel() for s in samples])
    if values.size == 0:
        return 0.0, 0.0
    if method == "percentile":
        return (float(np.percentile(values, 100.0 - percentile)),
                float(np.percentile(values, percentile)))
    low, high = float(values.min()), float(values.max())
    if method == "minmax":
        return low, high
    return _least_squared_error(values, low, high)


def _least_squared_error(values: np.ndarray, low: float, high: float) -> tuple:
    if values.size > _MSE_SAMPLES:   # an evenly spaced subsample is enough for the choice
        values = values[:: values.size // _MSE_SAMPLES]
    x = values.astype(np.float64)
    best, best_error = (low, high), np.inf
    for fraction in _MSE_FRACTIONS:
        qtype = activation_type(low * fraction, high * fraction)
        scale, zero_point = qtype.scales[0], qtype.zero_points[0]
        q = np.clip(np.round(x / scale) + zero_point, INT8_MIN, INT8_MAX)
        error = float(np.mean(((q - zero_point) * scale - x) ** 2))
        if error < best_error:
            best, best_error = (low * fraction, high * fraction), error
    return best
