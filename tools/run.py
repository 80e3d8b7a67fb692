"""``openhlo run``: run a program's entry function on a backend.

Parse the file, compile it on the backend (which verifies it), run the entry
function on the arguments from an ``.npz`` file (``arg0``, ``arg1``, ...) or on
random arguments of the right types, then print the results or save them as
``out0``, ``out1``, ... in an ``.npz`` file. With ``--auto-sharding --mesh x=4,y=2`` the
program's shardings are chosen first (pass ``auto-sharding``) and it runs on the mesh's
virtual devices, with global arguments and results.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zipfile

import numpy as np

from pjrt.registry import DEFAULT_BACKEND, available_backends, make_client
from stablehlo.ir.types import Type

from tools import auto_sharding_options
from tools.diagnostics import CliError, read_source
from tools.opt import add_autocast_argument
from tools.random_inputs import random_arguments


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run a StableHLO program on a backend",
        description="Run the entry function of a StableHLO program on a backend and print "
                    "or save its results. Without --inputs the arguments are random values "
                    "of the right types (see --seed).")
    p.add_argument("file", metavar="FILE.mlir", help="program text; '-' reads stdin")
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"backend to run on (default: {DEFAULT_BACKEND}; known: "
                        f"{', '.join(available_backends())})")
    p.add_argument("--inputs", metavar="ARGS.npz",
                   help="arguments as arrays named arg0, arg1, ... (np.savez)")
    p.add_argument("--output", "-o", metavar="OUT.npz",
                   help="save results as out0, out1, ... instead of printing them")
    p.add_argument("--entry", default=None,
                   help="function to run (default: @main, else the only function)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random arguments (default 0)")
    p.add_argument("--num-devices", type=int, metavar="N",
                   help="partition a sharded program for N devices and run it there: global "
                        "arguments are cut by the argument shardings, results put back "
                        "together by the result shardings")
    p.add_argument("--num-processes", type=int, metavar="P",
                   help="with --num-devices N: start P processes on this machine, each with N "
                        "devices, and run the partitioned program on all P*N of them "
                        "(collectives between processes go through gloo); process 0 prints "
                        "or saves the results")
    p.add_argument("--launch-timeout", type=float, default=600.0, metavar="S",
                   help="with --num-processes: stop the processes after S seconds "
                        "(default 600)")
    auto_sharding_options.add_arguments(p)
    add_opt_level_argument(p)
    p.add_argument("--profile", action="store_true",
                   help="cpu backend: print the time of each instruction on stderr")
    p.add_argument("--trace", metavar="OUT.json",
                   help="cpu backend: write a Chrome trace of one run (every op and collective "
                        "on every device; open it in https://ui.perfetto.dev or "
                        "chrome://tracing), after an unrecorded warm-up run")
    p.add_argument("--trace-cold", action="store_true",
                   help="with --trace: record the first run, without a warm-up")
    add_profile_in_argument(p)
    add_autocast_argument(p, "compute the program in mixed precision (compile option "
                             "env_option_overrides['autocast']): products in TYPE, "
                             "reductions, softmax and norms in f32; only on a backend that "
                             "computes TYPE natively (the cpu backend: with AVX-512 BF16), "
                             "unless --autocast-force")
    p.add_argument("--autocast-force", action="store_true",
                   help="with --autocast: also where the backend would emulate TYPE "
                        "(slower than f32)")
    # With --num-processes, each process writes its part of --trace here (_launch_processes).
    p.add_argument("--trace-part", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--metrics", action="store_true",
                   help="print the runtime counters (compiles, executions, transfers, "
                        "fallbacks) on stderr after running")
    p.set_defaults(handler=run_command)


def add_opt_level_argument(p) -> None:
    p.add_argument("--opt-level", type=int, choices=(0, 1), default=None,
                   help="cpu backend: 0 runs the program as given, 1 (default) runs the "
                        "compiler pipeline and generated kernels first "
                        "(sets OPENHLO_CPU_OPT_LEVEL)")


def add_profile_in_argument(p) -> None:
    p.add_argument("--profile-in", metavar="TRACE.json",
                   help="cpu backend: the latency-hiding scheduler uses the times this trace "
                        "of an earlier run (--trace) measured instead of its estimates "
                        "(compile option env_option_overrides['profile'])")


def compile_options(args, **fields):
    """The compile options of ``args`` (``--profile-in``, ``--memory-limit``, ``--autocast``)
    with ``fields``."""
    from pjrt.api import CompileOptions
    overrides = {"profile": args.profile_in} if args.profile_in else {}
    if getattr(args, "autocast", None):
        overrides.update(autocast=args.autocast, autocast_force=args.autocast_force)
    limit = auto_sharding_options.memory_limit(args)
    if limit:
        overrides["memory_limit"] = limit
    return CompileOptions(env_option_overrides=overrides, **fields)


def apply_opt_level(args) -> None:
    # Through the environment, so conformance worker processes inherit it.
    if args.opt_level is not None:
        os.environ["OPENHLO_CPU_OPT_LEVEL"] = str(args.opt_level)


def run_command(args: argparse.Namespace) -> int:
    from stablehlo.text import parse_module
    if args.trace and args.profile:
        raise CliError("--profile and --trace both time the program: choose one")
    if args.trace_cold and not (args.trace or args.trace_part):
        raise CliError("--trace-cold needs --trace")
    auto = auto_sharding_options.passes(args)
    if args.num_processes is not None:
        if auto:
            raise CliError("--auto-sharding runs on one process's devices: not with "
                           "--num-processes")
        return _launch_processes(args)
    text, filename = read_source(args.file, args.sources)
    module = parse_module(text, filename)
    if auto:
        _auto_shard(module, auto, args)
    apply_opt_level(args)
    if args.num_devices is None:
        exe = make_client(args.backend).compile(module, compile_options(args),
                                                 entry=args.entry)
        types, result_types = exe.parameter_types, exe.result_types
        if args.memory_limit is not None and hasattr(exe, "memory_stats"):
            stats = exe.memory_stats()
            sys.stderr.write(f"peak memory: {stats['peak_bytes']} bytes (limit "
                             f"{auto_sharding_options.memory_limit(args)}; "
                             f"{stats['peak_bytes_without_remat']} without recomputing "
                             f"{stats['recomputed_ops']} ops)\n")
    else:  # the executable's types are a device's pieces: show the global ones
        exe = _partitioned(module, args)
        signature = module.lookup(exe.executable.entry).type
        types, result_types = list(signature.inputs), list(signature.results)
    if args.inputs:
        inputs = load_inputs(args.inputs, types, exe.entry)
    else:
        inputs = random_arguments(types, args.seed)
    if args.profile:
        results = _profiled(exe, inputs, args.backend)
    elif args.trace or args.trace_part:
        results = _traced(exe, inputs, args)
    elif args.num_devices is not None:
        results = exe.execute_global(*inputs)
    else:
        results = exe(*inputs)
    reports = exe.client.process_index == 0  # of several processes, process 0 reports
    if args.output and reports:
        save_results(args.output, results)
    elif reports:
        sys.stdout.write(format_results(results, result_types))
    if args.metrics:
        import pjrt
        sys.stderr.write(f"{pjrt.metrics()}\n")
    return 0


def _auto_shard(module, passes, args) -> None:
    """Write the auto-sharding plan into ``module``; it then runs on the mesh's devices."""
    from xla_core.passes import PassContext, Pipeline
    Pipeline("auto-sharding", passes).run(module, PassContext())
    devices = auto_sharding_options.mesh_devices(module)
    if args.num_devices is not None and args.num_devices != devices:
        raise CliError(f"--num-devices {args.num_devices} differs from the mesh's {devices} "
                       f"devices")
    args.num_devices = devices


def _partitioned(module, args):
    if args.num_devices < 1:
        raise CliError(f"--num-devices must be positive, got {args.num_devices}")
    if args.profile:
        raise CliError("--profile runs on one device; it cannot be used with --num-devices")
    from pjrt.distributed.options import from_environment
    # A process started by --num-processes joins the others (_launch_processes).
    distributed = from_environment()
    if distributed is None:
        client = make_client(args.backend, num_devices=args.num_devices)
    else:
        client = make_client(args.backend, num_devices=args.num_devices,
                             distributed=distributed)
    return client.compile(module, compile_options(args, num_partitions=len(client.devices())),
                          entry=args.entry)


def _launch_processes(args: argparse.Namespace) -> int:
    """``--num-processes P``: this command again in P processes (pjrt.distributed.launch),
    each with --num-devices devices; prints what process 0 printed."""
    from pjrt.distributed.launch import launch
    if args.num_processes < 1:
        raise CliError(f"--num-processes must be positive, got {args.num_processes}")
    if args.num_devices is None:
        raise CliError("--num-processes needs --num-devices (the devices of each process)")
    if args.file == "-":
        raise CliError("--num-processes reads the program from a file, not stdin")
    if args.profile:
        raise CliError("--profile runs on one device; it cannot be used with --num-processes")
    command = [sys.executable, "-m", "tools.cli", "run", os.path.abspath(args.file),
               "--backend", args.backend, "--num-devices", str(args.num_devices),
               "--seed", str(args.seed)]
    for flag, value in (("--inputs", args.inputs), ("--output", args.output),
                        ("--entry", args.entry), ("--opt-level", args.opt_level),
                        ("--profile-in", args.profile_in), ("--autocast", args.autocast)):
        if value is not None:
            path_like = flag in ("--inputs", "--output", "--profile-in")
            command += [flag, os.path.abspath(value) if path_like else str(value)]
    if args.metrics:
        command.append("--metrics")
    if args.autocast_force:
        command.append("--autocast-force")
    if args.trace_cold:
        command.append("--trace-cold")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.trace is None:
        finished = launch(command, args.num_processes, args.launch_timeout, cwd=root)
    else:
        with tempfile.TemporaryDirectory(prefix="openhlo-trace-") as parts:
            finished = launch(command + ["--trace-part", parts], args.num_processes,
                              args.launch_timeout, cwd=root)
            _merge_trace_parts(parts, args.num_processes, args.trace)
    sys.stdout.write(finished[0].stdout)
    sys.stderr.write(finished[0].stderr)
    return 0


def _merge_trace_parts(parts: str, num_processes: int, path: str) -> None:
    """One trace of every process's part (all on this machine's monotonic clock)."""
    from xla_core.cost.profile import merge_chrome_traces
    traces = []
    for index in range(num_processes):
        with open(os.path.join(parts, f"process{index}.json"), encoding="utf-8") as f:
            traces.append(json.load(f))
    _write_trace(path, merge_chrome_traces(traces))


def _write_trace(path: str, trace: dict) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace, f)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def load_inputs(path: str, types: list[Type], entry: str) -> list:
    """Arrays ``arg0..argN-1`` of ``path``; names are checked, types by execute()."""
    if os.path.exists(path) and not zipfile.is_zipfile(path):
        raise CliError(f"cannot read inputs {path}: not an .npz archive (write it with np.savez)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except OSError as exc:
        raise CliError(f"cannot read inputs {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"cannot read inputs {path}: {exc}") from None
    expected = [f"arg{i}" for i in range(len(types))]
    missing = [name for name in expected if name not in arrays]
    extra = sorted(set(arrays) - set(expected))
    signature = ", ".join(f"arg{i}: {t}" for i, t in enumerate(types)) or "no arguments"
    if missing or extra:
        problems = []
        if missing:
            problems.append("missing " + ", ".join(missing))
        if extra:
            problems.append("unexpected " + ", ".join(extra))
        raise CliError(f"inputs {path}: {'; '.join(problems)} (@{entry} takes {signature})")
    return [arrays[name] for name in expected]


def save_results(path: str, results: list) -> None:
    arrays = {}
    for i, value in enumerate(results):
        if not isinstance(value, np.ndarray):
            raise CliError(f"result {i} is a {type(value).__name__}, which .npz cannot hold")
        arrays[f"out{i}"] = value
    try:
        np.savez(path, **arrays)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def format_results(results: list, types: list[Type]) -> str:
    """Each result as ``outN: TYPE`` and its values in numpy's printing."""
    lines = []
    for i, value in enumerate(results):
        type_text = str(types[i]) if i < len(types) else "?"
        lines.append(f"out{i}: {type_text}")
        lines.append(np.array2string(value) if isinstance(value, np.ndarray) else repr(value))
    return "\n".join(lines) + ("\n" if lines else "")


def _profiled(exe, inputs: list, backend: str) -> list:
    if backend != "cpu":
        raise CliError("--profile needs the cpu backend")
    from pjrt.plugins.cpu.profiler import profile
    exe.wait_optimized()  # profile the program with its generated kernels in place
    exe(*inputs)  # warm-up: first-touch and cache effects are not the program's time
    with profile() as prof:
        results = exe(*inputs)
    sys.stderr.write(prof.report() + "\n" + _fallbacks_report(exe) + "\n")
    return results


def _fallbacks_report(exe) -> str:
    """The ops the cpu backend left to the reference interpreter (each a call back into
    Python), with why: what to make native next."""
    fallbacks = exe.fallbacks
    if not fallbacks:
        return "interpreter fallbacks: none"
    lines = [f"interpreter fallbacks: {len(fallbacks)}"]
    lines += [f"  {fallback.where}: {fallback.reason}" for fallback in fallbacks]
    return "\n".join(lines)


def _traced(exe, inputs: list, args: argparse.Namespace) -> list:
    """One run recorded as a Chrome trace (``--trace``, or this process's part of it under
    ``--num-processes``); a warm-up run first unless ``--trace-cold``."""
    if args.backend != "cpu":
        raise CliError("--trace needs the cpu backend")
    from pjrt.plugins.cpu.profiler import device_names, timeline, timeline_events
    from xla_core.cost.profile import chrome_trace
    exe.wait_optimized()  # trace the program with its generated kernels in place

    def run():
        return exe(*inputs) if args.num_devices is None else exe.execute_global(*inputs)

    if not args.trace_cold:
        run()  # first-touch and cache effects are not the program's time
    with timeline() as intervals:
        results = run()
    trace = chrome_trace(timeline_events(exe, intervals), device_names(exe))
    path = args.trace
    if args.trace_part is not None:
        path = os.path.join(args.trace_part, f"process{exe.client.process_index}.json")
    _write_trace(path, trace)
    return results
