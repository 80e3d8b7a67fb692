"""``openhlo quantize``: quantize a float StableHLO program (xla_core/quantization).

    openhlo quantize IN.mlir --mode weight-int8|weight-int4|dynamic-int8|static-int8
        [--calibration inputs.npz ...] [--granularity per-tensor|per-channel]
        [--method minmax|percentile|mse] [--skip OPNAME/ID/LOC ...] -o OUT.mlir
        [--report [REPORT.json]] [--debug-numerics [NUMERICS.json]] [--lower]

Calibration files hold ``arg0..argN-1`` as ``openhlo run --inputs`` reads them (an array with
one more leading dimension holds one input set per index); the float program runs on them on
``--backend`` (default cpu). ``--report`` prints each op's choice on stderr (and writes it as
JSON to the path given); ``--debug-numerics`` prints the per-layer error table on stderr (and
JSON to the path given). ``--lower`` writes the integer program (pass ``quant-lower``)
instead of the quantized one.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from pjrt.registry import DEFAULT_BACKEND, make_client
from tools.diagnostics import read_source


def add_parser(subparsers) -> None:
    from xla_core.quantization import GRANULARITIES, METHODS, MODES
    p = subparsers.add_parser(
        "quantize", help="quantize a float StableHLO program",
        description="Quantize the dot_generals and convolutions of a float StableHLO program "
                    "into standard quantized StableHLO (!quant.uniform types).")
    p.add_argument("file", metavar="IN.mlir", help="program text; '-' reads stdin")
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--calibration", nargs="+", default=[], metavar="INPUTS.npz",
                   help="calibration input sets (static-int8; --debug-numerics compares on them)")
    p.add_argument("--granularity", default="per-channel", choices=GRANULARITIES,
                   help="of the weights (activations are per-tensor, as the spec requires)")
    p.add_argument("--method", default="minmax", choices=METHODS,
                   help="how calibration chooses activation ranges")
    p.add_argument("--percentile", type=float, default=99.99,
                   help="with --method percentile (default 99.99)")
    p.add_argument("--group-size", type=int, default=32, help="weight-int4 group (default 32)")
    p.add_argument("--skip", nargs="+", default=[], metavar="OP",
                   help="leave these in float: op names (dot_general), ids from the report "
                        "(dot_general#1) or location fragments (model.py:12)")
    p.add_argument("--entry", default="main", help="function to quantize (default @main)")
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"backend that runs calibration (default {DEFAULT_BACKEND})")
    p.add_argument("-o", "--output", metavar="OUT.mlir", help="default: stdout")
    p.add_argument("--report", nargs="?", const="-", metavar="REPORT.json",
                   help="print each op's choice on stderr; with a path, write it as JSON too")
    p.add_argument("--debug-numerics", nargs="?", const="-", metavar="NUMERICS.json",
                   help="print per-layer error vs float on the calibration inputs on stderr; "
                        "with a path, write it as JSON too")
    p.add_argument("--lower", action="store_true",
                   help="write the integer program (pass quant-lower)")
    p.set_defaults(handler=quantize_command)


def backend_runner(backend: str):
    """A calibration runner on ``backend`` (xla_core's default is the interpreter)."""
    client = make_client(backend)

    def run(module, entry, inputs):
        return [np.asarray(r) for r in client.compile(module, entry=entry)(*inputs)]
    return run


def quantize_command(args: argparse.Namespace) -> int:
    from stablehlo.text import parse_module, print_module
    from xla_core.passes import PassContext, Pipeline, parse_pass_list
    from xla_core.quantization import QuantizationConfig, quantize
    from xla_core.quantization.debugger import debug_numerics
    text, filename = read_source(args.file, args.sources)
    module = parse_module(text, filename)
    config = QuantizationConfig(args.mode, granularity=args.granularity, method=args.method,
                                skip=tuple(args.skip), percentile=args.percentile,
                                group_size=args.group_size)
    runner = backend_runner(args.backend)
    calibration = args.calibration or None
    quantized, report = quantize(module, config=config, calibration=calibration,
                                 entry=args.entry, runner=runner)
    if args.report:
        sys.stderr.write(report.format_table())
        _write(args.report, report.to_json())
    if args.debug_numerics:
        numerics = debug_numerics(module, config=config, calibration=calibration,
                                  entry=args.entry, runner=runner)
        sys.stderr.write(numerics.format_table())
        _write(args.debug_numerics, numerics.to_json())
    if args.lower:
        Pipeline("quant-lower", parse_pass_list("quant-lower")).run(quantized, PassContext())
    output = print_module(quantized)
    if args.output:
        with open(args.output, "w") as f:
            f.write(output)
    else:
        sys.stdout.write(output)
    return 0


def _write(path: str, text: str) -> None:
    if path != "-":
        with open(path, "w") as f:
            f.write(text + "\n")
