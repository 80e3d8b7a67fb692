"""``openhlo bench``: the argument parsing and the command."""
from __future__ import annotations

import argparse
import json
import sys

from tools.bench.runners import OPTIONAL_RUNNERS, RUNNER_CLASSES, RUNNERS
from tools.bench.workloads import WORKLOADS
from tools.diagnostics import CliError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench", help="workloads on openhlo, jax.jit, PyTorch eager and torch.compile",
        description="Benchmark suite: each workload (JAX and PyTorch, same math) on the "
                    "openhlo cpu backend, XLA (jax.jit), PyTorch eager and TorchInductor; "
                    "results checked against jax.jit, times, achieved throughput, compile "
                    "times (cold and cached) and peak memory. Exit status 1 if any result "
                    "is wrong.")
    p.add_argument("--workloads", metavar="A,B", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of: {', '.join(WORKLOADS)}")
    p.add_argument("--runners", metavar="A,B", default=",".join(RUNNERS),
                   help=f"comma-separated subset of: {', '.join(RUNNER_CLASSES)} (default: "
                        f"all but {', '.join(OPTIONAL_RUNNERS)}; jax_plugin is openhlo "
                        "through JAX's PJRT plugin, jax.devices('openhlo'))")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    p.add_argument("--png", metavar="PATH", help="also draw the ratios to XLA (bar chart)")
    p.add_argument("--quick", action="store_true",
                   help="smaller shapes and short timings: a smoke run")
    p.add_argument("--budget", type=float, metavar="S",
                   help="seconds of timing per workload and runner (default 2, quick 0.2)")
    p.add_argument("--no-cached", dest="cached", action="store_false",
                   help="skip the second process that measures cached compile times")
    p.add_argument("--sharded", action="store_true",
                   help="also run the sharded workloads (Megatron MLP, data-parallel step) on "
                        "8 devices: JAX NamedSharding on XLA and on openhlo, PyTorch "
                        "mark_sharding on openhlo; step time and bytes each device sends")
    p.add_argument("--save-programs", metavar="DIR",
                   help="write each workload's StableHLO, its optimized form, the fusion "
                        "decisions and the memory report into DIR")
    p.add_argument("--zoo", action="store_true",
                   help="instead of the workloads: the model zoo (torchvision, timm, Hugging Face "
                        "transformers; random weights, small inputs) through torch.compile on "
                        "openhlo and Inductor and eager PyTorch: results against a float64 "
                        "eager run, fallbacks, cold compile times, forward time ratios")
    p.add_argument("--models", metavar="A,B",
                   help="with --zoo: a comma-separated subset of the zoo's models (default: all)")
    p.add_argument("--heldout", action="store_true",
                   help="with --zoo: the held-out models instead of the zoo (other "
                        "architectures of the same libraries, never tuned for); --models "
                        "then picks among them")
    p.add_argument("--train", action="store_true",
                   help="with --zoo: also a training step (backward and SGD) per model")
    p.add_argument("--threads", type=int, metavar="N",
                   help="with --zoo: PyTorch's thread count for eager and Inductor (default: "
                        "PyTorch's own); on a loaded machine OpenMP's spinning threads make "
                        "medians unstable, 1 keeps them steady")
    p.add_argument("--accuracy", action="store_true",
                   help="with --zoo: check only: openhlo against float64 eager, its fallbacks "
                        "and compile times; Inductor is not run and nothing is timed")
    p.set_defaults(handler=bench_command)


def _names(text: str, known, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise CliError(f"unknown {what} {', '.join(unknown) or '(none given)'}; "
                       f"known: {', '.join(known)}")
    return list(dict.fromkeys(names))


def zoo_command(args: argparse.Namespace) -> int:
    from frameworks.torch.models.zoo import zoo_names
    from tools.bench.plot import plot_zoo
    from tools.bench.zoo import run_zoo
    from tools.bench.zoo_report import add_ratios, format_table, summarize
    if args.sharded or args.save_programs or args.quick:
        raise CliError("--sharded, --save-programs and --quick do not go with --zoo")
    names = zoo_names(heldout=args.heldout)
    if args.models:
        names = _names(args.models, names, "held-out model" if args.heldout else "model")

    def finish(report: dict) -> None:  # after every model: a stopped run keeps its figures
        add_ratios(report)
        report["summary"] = summarize(report)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
    report = run_zoo(names, train=args.train, heldout=args.heldout, threads=args.threads,
                     accuracy=args.accuracy, on_model=finish,
                     budget=args.budget if args.budget is not None else 1.0)
    summary = report["summary"]  # finish ran after the last model
    print(format_table(report), flush=True)
    if args.png:
        plot_zoo(report, args.png)
    wrong = sum(len(summary[m]["failed"]) for m in ("forward", "train") if m in summary)
    if wrong:
        print(f"openhlo: error: {wrong} model result(s) wrong or failed on openhlo",
              file=sys.stderr)
        return 1
    return 0


def bench_command(args: argparse.Namespace) -> int:
    if args.zoo:
        return zoo_command(args)
    if args.models or args.train or args.threads or args.heldout or args.accuracy:
        raise CliError("--models, --train, --threads, --heldout and --accuracy go with --zoo")
    from tools.bench.plot import plot_ratios
    from tools.bench.report import add_ratios, format_report, summarize
    from tools.bench.suite import run_suite
    workloads = _names(args.workloads, WORKLOADS, "workload")
    runners = _names(args.runners, RUNNER_CLASSES, "runner")
    if args.save_programs:
        from tools.bench.programs import save_programs
        written = save_programs(args.save_programs, workloads, quick=args.quick)
        print(f"wrote {len(written)} files to {args.save_programs}", file=sys.stderr)
    report = run_suite(workloads, runners, quick=args.quick, budget=args.budget,
                       cached=args.cached)
    add_ratios(report)
    report["summary"] = summarize(report)
    print(format_report(report), flush=True)
    if args.sharded:
        from tools.bench import sharded
        print("sharded workloads (8 devices)...", file=sys.stderr, flush=True)
        report["sharded"] = sharded.measure(steps=3 if args.quick else 10, quick=args.quick)
        print("\n" + sharded.table(report["sharded"]), flush=True)
        report["summary"]["failures"] += [
            {"workload": r["workload"], "runner": stack, "status": "wrong",
             "message": "sharded results differ from the unsharded run"}
            for r in report["sharded"] for stack in ("openhlo", "openhlo_torch")
            if stack in r and not r[stack]["results_ok"]]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if args.png:
        plot_ratios(report, args.png)
    if report["summary"]["failures"]:
        print(f"openhlo: error: {len(report['summary']['failures'])} wrong or failed "
              "result(s), see FAILURES above", file=sys.stderr)
        return 1
    return 0
