"""``openhlo compile``: compile a program ahead of time for a backend, into a directory.

    openhlo compile FILE.mlir --backend cuda [--target sm_90a] -o DIR

The cuda backend (pjrt/plugins/cuda/aot.py) writes its kernels (``kernels.cu``, the
``kernels.cubin`` nvcc built), ``ptxas.json`` and ``executable.json`` into DIR on a machine
without a GPU, and this prints a table of the kernels: kind, registers, spills. Other
backends compile when they load a program (``openhlo run``), so they are refused here.
"""
from __future__ import annotations

import json

from tools.diagnostics import CliError, read_source

BACKENDS = ("cuda",)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compile", help="compile a program ahead of time for a backend (cuda: sm_90a cubins)",
        description="Compile a StableHLO program ahead of time into DIR: for --backend cuda "
                    "the CUDA C kernels, their cubin, ptxas's per-kernel report and the "
                    "executable description a GPU runtime loads.")
    p.add_argument("file", metavar="FILE.mlir", help="program text; '-' reads stdin")
    p.add_argument("--backend", required=True,
                   help=f"the backend (supported: {', '.join(BACKENDS)})")
    p.add_argument("--target", default="sm_90a", help="the GPU architecture (default sm_90a)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write")
    p.set_defaults(handler=compile_command)


def compile_command(args) -> int:
    if args.backend not in BACKENDS:
        raise CliError(f"compile: backend {args.backend!r} does not compile ahead of time "
                       f"(supported: {', '.join(BACKENDS)}); 'openhlo run --backend "
                       f"{args.backend}' compiles and runs a program")
    import stablehlo
    from pjrt.plugins.cuda import aot
    text, filename = read_source(args.file, args.sources)
    module = stablehlo.parse(text, filename)
    out = aot.compile_module(module, target=args.target, out_dir=args.output)
    kernels = json.loads((out / "ptxas.json").read_text())
    steps = json.loads((out / "executable.json").read_text())["steps"]
    print(f"{filename}: {len(kernels)} kernels, {len(steps)} steps -> {out}")
    print(kernel_table(kernels))
    return 0


def kernel_table(kernels: dict) -> str:
    """The rows of a ``ptxas.json``: kernel, kind, registers, spill bytes, stack, shared."""
    rows = [("kernel", "kind", "registers", "spill st/ld", "stack", "shared")]
    for name, k in kernels.items():
        rows.append((name, k["kind"], str(k["registers"]),
                     f"{k['spill_stores']}/{k['spill_loads']}", str(k["stack"]),
                     str(k["shared"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
