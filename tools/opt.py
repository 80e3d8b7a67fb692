"""``openhlo opt``: parse, verify, optionally transform, and print a module.

With ``--passes=a,b{opt=v}`` or ``--pipeline=NAME`` the module goes through
xla_core passes (verified after each one) before it is printed; without
either it is printed back as parsed, which makes ``opt`` the round-trip tool.
``--memory-report`` writes each public function's buffer assignment (in its
final op order) to stderr. ``--schedule-report OUT.json`` writes the scheduling report
(xla_core/scheduling/report.py) of the program the cpu backend would run: the ``cpu``
pipeline (fusion, then the latency-hiding scheduler) runs on a copy of the transformed
module and the report describes that copy's order; the printed module is unchanged.
``--profile-in TRACE.json`` gives that scheduler and the report the times a trace of a run
(``openhlo run --trace``) measured (profile-guided latency estimation).
``--autocast=bf16`` runs the ``autocast`` pass (automatic mixed precision) first.
``--auto-sharding --mesh x=4,y=2 [--memory-limit 2GiB] [--hardware NAME]`` chooses the
program's shardings (pass ``auto-sharding``) and prints the per-device program the SPMD
pipeline makes of it; with ``--explain-sharding`` the plan (each sharding with its estimated
compute, communication and memory, the objective's breakdown, the solver's status and time)
goes to stderr first.
``--memory-limit 64MiB`` without ``--auto-sharding`` keeps the peak under the limit by
recomputing values: after the passes (with ``--pipeline=cpu``, after its schedule, with no
multi-output fusion) the ``remat`` pass runs; alone, it runs on the program as given.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys

from tools import auto_sharding_options
from tools.diagnostics import CliError, read_source


def add_autocast_argument(p, help: str) -> None:
    p.add_argument("--autocast", metavar="TYPE", choices=("bf16",), help=help)


def add_parser(subparsers) -> None:
    import pjrt.plugins.cpu  # noqa: F401 - registers the pipeline the cpu backend owns
    from xla_core.passes import PASSES, PIPELINES
    p = subparsers.add_parser(
        "opt", help="parse, verify, transform and print a StableHLO module",
        description="Parse and verify a StableHLO module, optionally run xla_core passes "
                    "on it, and print it (pretty form unless --generic).")
    p.add_argument("file", metavar="FILE.mlir", help="program text; '-' reads stdin")
    p.add_argument("--generic", action="store_true", help="print every op in generic form")
    p.add_argument("--split-input-file", action="store_true",
                   help="treat each '// -----' chunk as a separate module")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--passes", metavar="LIST",
                       help="comma-separated passes with options, e.g. inline,dce "
                            f"(known: {', '.join(map(str, PASSES.names()))})")
    group.add_argument("--pipeline", metavar="NAME",
                       help="a registered pipeline "
                            f"(known: {', '.join(map(str, PIPELINES.names()))})")
    p.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                   help="skip this pass of the pipeline (repeatable)")
    add_autocast_argument(p, "run the autocast pass (mixed precision: products in TYPE, "
                             "reductions, softmax and norms in f32) before the others")
    p.add_argument("--print-after-all", action="store_true",
                   help="print the module to stderr after every pass")
    p.add_argument("--timing", action="store_true", help="report pass times on stderr")
    p.add_argument("--memory-report", action="store_true",
                   help="after the passes, report each public function's buffer assignment "
                        "(peak, heap, largest buffers) on stderr")
    p.add_argument("--explain-fusion", action="store_true",
                   help="print every fusion decision and refusal (logger openhlo.fusion) "
                        "on stderr")
    p.add_argument("--explain-sharding", action="store_true",
                   help="print the sharding sharding-propagation gives each value and where it "
                        "came from (logger openhlo.spmd) on stderr; with --auto-sharding, the "
                        "plan first")
    p.add_argument("--num-devices", type=int, metavar="N",
                   help="the device count the SPMD passes partition for (sharding-propagation, "
                        "spmd-partition; default: the module's mhlo.num_partitions)")
    p.add_argument("--schedule-report", metavar="OUT.json",
                   help="write the scheduling report (each collective's bytes, estimated and "
                        "exposed seconds, the ops it overlaps; exposed_fraction) of the "
                        "module after the cpu backend's pipeline (run on a copy) to OUT.json")
    p.add_argument("--schedule-hardware", metavar="NAME", default="cpu",
                   help="the xla_core.cost hardware description the schedule and its report "
                        "estimate with (default: cpu, this machine, measured once)")
    p.add_argument("--profile-in", metavar="TRACE.json",
                   help="with --schedule-report: schedule and report with the times this trace "
                        "of a run (openhlo run --trace) measured instead of the estimates; "
                        "the report lists the replaced estimates")
    auto_sharding_options.add_arguments(p)
    p.add_argument("-o", "--output", metavar="OUT", help="write the module here, not to stdout")
    p.set_defaults(handler=opt_command)


def opt_command(args: argparse.Namespace) -> int:
    from stablehlo.text import split_input_file
    text, filename = read_source(args.file, args.sources)
    pipeline = _pipeline(args)
    if args.split_input_file:
        # Pad each chunk with newlines so diagnostics keep the file's line numbers.
        chunks = ["\n" * (line - 1) + chunk for _, line, chunk in split_input_file(text)]
    else:
        chunks = [text]
    if args.profile_in and not args.schedule_report:
        raise CliError("--profile-in feeds the scheduler of --schedule-report: give both")
    if args.schedule_report and len(chunks) > 1:
        raise CliError("--schedule-report reports one module: not with --split-input-file")
    outputs = [_process(chunk, filename, pipeline, args) for chunk in chunks]
    _write(args.output, "// -----\n".join(outputs))
    return 0


def _process(text: str, filename: str, pipeline, args: argparse.Namespace) -> str:
    import stablehlo
    from stablehlo.text import print_module
    module = stablehlo.parse(text, filename)
    if pipeline is not None:
        from xla_core.passes import PassContext
        ctx = PassContext(timing=args.timing, print_after_all=args.print_after_all,
                          disabled=frozenset(args.disable_pass), dump=sys.stderr)
        with explaining_fusion(sys.stderr if args.explain_fusion else None), \
                explaining("openhlo.spmd", sys.stderr if args.explain_sharding else None):
            pipeline.run(module, ctx)
        if args.timing:
            sys.stderr.write(ctx.timing_report() + "\n")
    if args.memory_report:
        _memory_report(module)
    if args.schedule_report:
        _schedule_report(module, args.schedule_report, args.schedule_hardware,
                         args.profile_in)
    out = print_module(module, generic=args.generic)
    return out if out.endswith("\n") else out + "\n"


def _memory_report(module) -> None:
    from xla_core.buffers import assign_buffers
    for func in module.functions():
        if func.visibility == "public" and func.body is not None:
            sys.stderr.write(assign_buffers(func).report() + "\n")


def _schedule_report(module, path: str, hardware_name: str, profile_in: str | None) -> None:
    import json
    from xla_core.cost import hardware
    from xla_core.cost.profile import read_profile
    from xla_core.ir_utils import clone_operation
    from xla_core.passes import PassContext
    from xla_core.scheduling import CostModelEstimator, MeasuredEstimator, schedule_report
    from pjrt.plugins.cpu.optimize import cpu_pipeline
    from stablehlo.ir.core import Module
    profile = read_profile(profile_in) if profile_in else None  # a bad file fails first
    scheduled = Module(clone_operation(module.op, {}))
    pipeline = cpu_pipeline(profile=profile_in or "")
    pipeline.passes = [dataclasses.replace(p, hardware=hardware_name)
                       if p.name == "latency-hiding-scheduler" else p for p in pipeline.passes]
    pipeline.run(scheduled, PassContext())
    estimator = CostModelEstimator(hardware(hardware_name), scheduled)
    if profile is not None:
        estimator = MeasuredEstimator.from_profile(estimator, scheduled, profile)
    report = schedule_report(scheduled, estimator)
    _write(path, json.dumps(report, indent=1) + "\n")


def _pipeline(args):
    from xla_core.passes import (Pipeline, make_pass, make_pipeline, parse_pass_list,
                                 spmd_pipeline)
    auto = auto_sharding_options.passes(args)
    if auto and (args.passes is not None or args.pipeline is not None):
        raise CliError("--auto-sharding runs its own pipeline (auto-sharding, then the SPMD "
                       "passes): not with --passes or --pipeline")
    limit = auto_sharding_options.memory_limit(args)
    if auto:
        pipeline = Pipeline("auto-sharding", auto + spmd_pipeline().passes)
    elif args.passes is not None:
        pipeline = Pipeline("opt", parse_pass_list(args.passes))
    elif args.pipeline is not None:
        pipeline = make_pipeline(args.pipeline)
    elif limit or args.autocast:
        pipeline = Pipeline("opt", [])
    else:
        if (args.disable_pass or args.print_after_all or args.timing or args.explain_fusion
                or args.explain_sharding or args.num_devices is not None):
            raise CliError("--disable-pass, --print-after-all, --timing, --explain-fusion, "
                           "--explain-sharding and --num-devices need --passes, --pipeline, "
                           "--autocast or --auto-sharding")
        return None
    if args.autocast:
        pipeline.passes.insert(0, make_pass("autocast", {"dtype": args.autocast}))
    if limit and not auto:
        from xla_core.buffers.remat import with_memory_limit
        pipeline.passes = with_memory_limit(pipeline.passes, limit)
    if args.num_devices is not None:
        if args.num_devices < 1:
            raise CliError(f"--num-devices must be positive, got {args.num_devices}")
        pipeline.passes = [_with_devices(p, args.num_devices) for p in pipeline.passes]
    return pipeline


def _with_devices(p, count: int):
    """``p`` partitioning for ``count`` devices, if it is an SPMD pass taking a count."""
    if any(f.name == "num_devices" for f in dataclasses.fields(p)):
        return dataclasses.replace(p, num_devices=count)
    return p


def explaining_fusion(stream):
    """Route the ``openhlo.fusion`` logger's INFO lines (every fusion decision and refusal)
    to ``stream`` while passes run; None: leave the logger alone."""
    return explaining("openhlo.fusion", stream)


@contextlib.contextmanager
def explaining(name: str, stream):
    """Route logger ``name``'s INFO lines to ``stream`` while passes run; None: leave the
    logger alone."""
    if stream is None:
        yield
        return
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _write(path: str | None, text: str) -> None:
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
