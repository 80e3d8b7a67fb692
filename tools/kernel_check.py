"""``openhlo kernel-check NAME``: check a registered custom kernel (pjrt/custom_kernels/check.py).

    openhlo kernel-check rms_norm --module my_kernels --shape 4,16 --shape 16 --attr eps=1e-5

``--module`` imports the modules that register the kernel (or it comes from the
``openhlo.custom_kernels`` entry point group); operands are random float32 arrays of the
given shapes. Prints the report; exit code 1 when an item fails.
"""
from __future__ import annotations

import importlib


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "kernel-check", help="check a custom kernel (schema, shapes, reference, VJP)",
        description="Run a registered custom kernel natively on random operands and check its "
                    "declaration: schema, shape function, numpy reference, VJP against finite "
                    "differences.")
    p.add_argument("name", help="the kernel's registered name")
    p.add_argument("--module", action="append", default=[],
                   help="a module to import first (it registers the kernel)")
    p.add_argument("--shape", action="append", default=[], required=True,
                   help="an operand's shape, e.g. 4,16 (once per operand; '' for a scalar)")
    p.add_argument("--attr", action="append", default=[], metavar="KEY=VALUE",
                   help="an attribute (typed by the kernel's declaration)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=kernel_check_command)


def kernel_check_command(args) -> int:
    from pjrt.custom_kernels import check_kernel
    for module in args.module:
        importlib.import_module(module)
    shapes = [tuple(int(d) for d in s.split(",") if d) for s in args.shape]
    attrs = dict(item.split("=", 1) for item in args.attr)
    attrs = {k: (v if not _number(v) else float(v)) for k, v in attrs.items()}
    report = check_kernel(args.name, shapes=shapes, attrs=attrs, seed=args.seed)
    print(report)
    return 0 if report.ok else 1


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
