"""``quantize(module, mode, calibration)``: the StableHLO-to-StableHLO quantizer.

Steps: copy the module and inline private calls (the units are the entry function's own
dot_generals and convolutions, units.py); choose which units to quantize (the skip list,
refusals); for ``static-int8`` observe each unit's lhs on the calibration inputs and choose
its range (calibration.py); rebuild the entry with each chosen unit replaced by its quantized
form (emit.py); drop the float weights nothing reads any more (``dce``); verify. The caller's
module is not changed. Returns the new module and a ``QuantizationReport``.

``rewrite_units`` is also what the numeric debugger builds its comparison programs with.
"""
from __future__ import annotations

from typing import Optional, Sequence

from stablehlo.ir.core import Func, Module
from stablehlo.verify import verify_module
from xla_core.ir_utils import clone_operation
from xla_core.passes.base import PassContext
from xla_core.passes.dce import DcePass
from xla_core.passes.inline import InlinePass
from xla_core.quantization import calibration as calib
from xla_core.quantization.config import QuantizationConfig, QuantizationError
from xla_core.quantization.emit import emit_dynamic, emit_static, emit_weight_only
from xla_core.quantization.rebuild import rebuild
from xla_core.quantization.report import QuantizationReport
from xla_core.quantization.units import Unit, find_units, is_skipped


def prepare(module: Module, entry: str) -> tuple[Module, Func]:
    """A copy of ``module`` with calls inlined, and its entry function."""
    copy = Module(clone_operation(module.op, {}))
    InlinePass().run(copy, PassContext())
    if not copy.has_function(entry):
        raise QuantizationError(f"quantize: the module has no function @{entry}")
    return copy, copy.lookup(entry)


def choose_units(func: Func, config: QuantizationConfig, report: QuantizationReport) -> list:
    """The units to quantize; every other dot_general/convolution is reported with why not."""
    units = find_units(func)
    chosen = []
    for unit in units:
        if unit.reason is not None:
            report.add(unit, False, unit.reason)
        elif is_skipped(unit, config.skip):
            report.add(unit, False, "in the skip list")
        else:
            chosen.append(unit)
    for entry in config.skip:
        if not any(is_skipped(u, (entry,)) for u in units):
            report.notes.append(f"skip entry '{entry}' names no dot_general or convolution")
    return chosen


def calibrate(module: Module, entry: str, units: list, input_sets: list,
              config: QuantizationConfig, runner) -> dict:
    """unit id -> (low, high) of its lhs over the calibration inputs."""
    if not input_sets:
        raise QuantizationError("quantize: static-int8 needs calibration inputs "
                                "(--calibration inputs.npz)")
    ids = [u.id for u in units]

    def lhs_values(func: Func):
        by_id = {u.id: u for u in find_units(func)}
        return [by_id[i].op.operands[0] for i in ids]
    observed = calib.observe(module, entry, lhs_values, input_sets, runner)
    return {unit_id: calib.choose_range([sample[i] for sample in observed], config.method,
                                        config.percentile)
            for i, unit_id in enumerate(ids)}


def rewrite_units(module: Module, func: Func, units: list, config: QuantizationConfig,
                  ranges: dict, *, keep_float: bool = False, expose: bool = False) -> dict:
    """Rebuild ``func`` with each unit's quantized form; returns unit id -> choice record.

    ``keep_float``: the float op stays and feeds its users (the quantized form is computed
    beside it from the same input); ``expose``: the quantized forms' values (then, with
    ``keep_float``, the float ops' values) are appended to the function's results.
    """
    chosen = {u.op: u for u in units}
    records: dict = {}
    quantized_values: list = []
    float_ops: list = []

    def rewrite(op, b, operands):
        unit = chosen.get(op)
        if unit is None:
            return None
        value, records[unit.id] = _emit(unit, b, operands, config, ranges)
        quantized_values.append(value)
        if keep_float:
            float_ops.append(op)
            return None
        return [value]

    def extra(mapping):
        if not expose:
            return []
        return quantized_values + [mapping[op.result] for op in float_ops]
    rebuild(module, func, rewrite, extra)
    return records


def _emit(unit: Unit, b, operands, config: QuantizationConfig, ranges: dict):
    if config.mode == "static-int8":
        return emit_static(unit, b, operands, config, ranges[unit.id])
    if config.mode == "dynamic-int8":
        return emit_dynamic(unit, b, operands, config)
    return emit_weight_only(unit, b, operands, config)


def quantize(module: Module, mode: Optional[str] = None, calibration=None, *,
             config: Optional[QuantizationConfig] = None, entry: str = "main",
             runner: Optional[calib.Runner] = None, **options):
    """Quantize ``module``'s ``entry``; returns ``(quantized module, QuantizationReport)``.

    ``mode`` (or ``config``, a QuantizationConfig) says how; ``options`` are the config's other
    fields (granularity, method, skip, percentile, group_size). ``calibration``: input sets
    (a list of argument lists) or paths of ``.npz`` files, needed by ``static-int8``.
    ``runner`` runs the float program for calibration (default: the reference interpreter).
    """
    config = make_config(mode, config, options)
    copy, func = prepare(module, entry)
    report = QuantizationReport(config.mode)
    units = choose_units(func, config, report)
    ranges = {}
    if config.needs_calibration and units:
        ranges = calibrate(copy, entry, units, input_sets(calibration, func), config, runner)
    records = rewrite_units(copy, func, units, config, ranges)
    for unit in units:
        report.add(unit, True, **records[unit.id])
    DcePass().run(copy, PassContext())
    verify_module(copy)
    return copy, report


def input_sets(calibration, func: Func) -> list:
    """Calibration input sets from argument lists or ``.npz`` paths."""
    if calibration is None:
        return []
    if isinstance(calibration, str):
        calibration = [calibration]
    calibration = list(calibration)
    if calibration and all(isinstance(c, str) for c in calibration):
        return calib.load_input_sets(calibration, func)
    return [list(inputs) for inputs in calibration]


def make_config(mode, config, options) -> QuantizationConfig:
    if config is not None:
        if mode is not None or options:
            raise QuantizationError("quantize: give either config or mode and options")
        return config
    if mode is None:
        raise QuantizationError("quantize: no mode given (one of weight-int8, weight-int4, "
                                "dynamic-int8, static-int8)")
    skip: Sequence = options.pop("skip", ())
    return QuantizationConfig(mode, skip=tuple(skip), **options)
