"""Which programs the cuda backend claims, and whether they compile to sm_90a without spills.

    python -m tools.cuda_aot_report [--testdata DIR] [--sample N | --spread N] [--no-bench]
                                    [--no-testdata] [--full-sizes] [--json OUT]

Sweeps the bench suite's JAX workloads (tools/bench/workloads.py, lowered to StableHLO as the
bench lowers them; quick sizes unless --full-sizes) and the StableHLO conformance testdata
(the smallest file of ``--sample`` op families spread evenly by
``tools.conformance.slice.choose_testdata``, or ``--spread`` files at even spacing over all
of them; 0: every file). A testdata file's ``@main``
computes its inputs by calling ``@inputs`` and checks against ``@expected``: only the
program is compiled, with the inputs as its parameters (``program_of_testdata``), since
constant inputs would be folded away. Each program is compiled ahead of time
(pjrt/plugins/cuda/aot.py: one nvcc call for all its kernels) and reported as it goes:
claimed or why not, kernels, spills, seconds. Exits 1 when a claimed program fails to
compile or an elementwise, reduction, indexing or convolution kernel spills registers.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

DEFAULT_TESTDATA = "/work/shared/conformance/stablehlo/testdata"
_CHECKED_KINDS = ("elementwise", "reduction", "indexing", "convolution")


def program_of_testdata(module) -> None:
    """Rewrite a testdata module's ``@main`` in place into its program: the results of
    ``call @inputs`` become parameters, the ``check.*`` custom calls and what only they
    read (``call @expected``) are dropped."""
    from stablehlo.ir.attributes import TypeAttr
    from stablehlo.ir.types import FunctionType
    from pjrt.plugins.cuda.host_checks import is_check
    from xla_core.ir_utils import replace_uses
    main = module.lookup("main")
    body = main.body
    replacements, kept = {}, []
    for op in body.operations:
        callee = op.attributes.get("callee") if op.name == "func.call" else None
        if callee is not None and callee.name == "inputs":
            for result in op.results:
                replacements[result] = body.add_argument(result.type)
        elif is_check(op):  # the same test the backend's host checks use
            continue
        else:
            kept.append(op)
    read = {v for op in kept for inner in op.walk() for v in inner.operands}
    body.operations[:] = [op for op in kept if op.name != "func.call" or
                          any(r in read for r in op.results)]
    replace_uses(main.op, replacements)
    main.op.attributes.pop("arg_attrs", None)
    main.op.attributes["function_type"] = TypeAttr(FunctionType(
        tuple(a.type for a in body.arguments), main.type.results))


def bench_programs(full_sizes: bool) -> list[tuple[str, str]]:
    """(name, StableHLO text) of each bench workload, lowered by JAX as the bench does."""
    from tools.bench.runners import lower
    from tools.bench.workloads import WORKLOADS
    programs = []
    for name, workload in WORKLOADS.items():
        sizes = None if full_sizes else {**workload.sizes, **workload.quick_sizes}
        programs.append((f"bench/{name}", lower(workload.instance(sizes=sizes)).as_text()))
    return programs


def testdata_files(folder: str, sample: int, spread: int) -> list[pathlib.Path]:
    """``spread`` files at even spacing over all enabled ones, else ``sample`` op families'
    smallest files (0: every enabled file)."""
    from tools.conformance.slice import choose_testdata, evenly
    root = pathlib.Path(folder)
    if sample and not spread:
        return choose_testdata(root, sample)
    enabled = [p for p in sorted(root.glob("*.mlir")) if "RUN-DISABLED" not in p.read_text()]
    return evenly(enabled, spread) if spread else enabled


def compile_one(name: str, text: str, testdata: bool, out_dir: str) -> dict:
    """The record of one program: status (unclaimed / failed / compiled), reason, kernels,
    spilling kernels of the checked kinds, seconds."""
    import stablehlo
    from pjrt.errors import UnimplementedError
    from pjrt.plugins.cuda import aot
    start = time.perf_counter()
    record = {"program": name, "status": "compiled", "reason": "", "kernels": 0, "spills": []}
    try:
        module = stablehlo.parse(text, name)
        if testdata:
            program_of_testdata(module)
        out = aot.compile_module(module, out_dir=out_dir)
        ptxas = json.loads((out / "ptxas.json").read_text())
        record["kernels"] = len(ptxas)
        record["spills"] = [k for k in aot.spills(ptxas) if ptxas[k]["kind"] in _CHECKED_KINDS]
    except UnimplementedError as exc:
        record.update(status="unclaimed", reason=str(exc).splitlines()[0])
    except Exception as exc:  # a claimed program that does not compile: the report's finding
        record.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:2000])
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.cuda_aot_report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--testdata", default=DEFAULT_TESTDATA, metavar="DIR")
    p.add_argument("--sample", type=int, default=60,
                   help="testdata op families to take, the smallest file of each (0: all files)")
    p.add_argument("--spread", type=int, default=0,
                   help="instead, this many testdata files at even spacing over all of them")
    p.add_argument("--no-bench", action="store_true", help="leave out the bench workloads")
    p.add_argument("--no-testdata", action="store_true", help="leave out the testdata")
    p.add_argument("--full-sizes", action="store_true", help="bench workloads at full size")
    p.add_argument("--json", metavar="OUT", help="write the records and summary here")
    args = p.parse_args(argv)
    programs = [] if args.no_bench else [(n, t, False) for n, t in bench_programs(args.full_sizes)]
    if not args.no_testdata:
        programs += [(f"testdata/{f.name}", f.read_text(), True)
                     for f in testdata_files(args.testdata, args.sample, args.spread)]
    records = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="openhlo-cuda-aot-") as scratch:
        for i, (name, text, testdata) in enumerate(programs):
            record = compile_one(name, text, testdata, f"{scratch}/{i}")
            records.append(record)
            detail = record["reason"] if record["status"] != "compiled" else \
                f"{record['kernels']} kernels, spills: {record['spills'] or 'none'}"
            print(f"[{i + 1}/{len(programs)}] {name}: {record['status']} ({detail}) "
                  f"{record['seconds']}s", flush=True)
    summary = summarize(records, time.perf_counter() - start)
    print(json.dumps(summary, indent=1))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"summary": summary, "records": records},
                                                      indent=1) + "\n")
    return 1 if summary["failed"] or summary["spilling_programs"] else 0


def summarize(records: list[dict], seconds: float) -> dict:
    claimed = [r for r in records if r["status"] != "unclaimed"]
    return {"programs": len(records), "claimed": len(claimed),
            "compiled": sum(r["status"] == "compiled" for r in records),
            "failed": [r["program"] for r in records if r["status"] == "failed"],
            "spilling_programs": [r["program"] for r in records if r["spills"]],
            "kernels": sum(r["kernels"] for r in records), "seconds": round(seconds, 1)}


if __name__ == "__main__":
    sys.exit(main())
