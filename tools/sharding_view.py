"""``openhlo sharding FILE --num-devices N [--png DIR] [--ranges]``: draw how each entry
argument and result of a sharded program is laid out over the devices.

The program goes through the ``spmd`` pipeline for N devices (as ``Client.compile`` does), so
results whose sharding propagation chose are drawn too; each value is drawn at its global shape
(ranks 0-2; higher ranks are listed with their tile counts only) as a box of tiles labelled with
the devices holding each (``xla_core.spmd.visualize``); ``--png DIR`` also writes one PNG per
value (``arg0.png``, ``result0.png``, ...; needs matplotlib).
"""
from __future__ import annotations

import argparse
import pathlib
import sys

from tools.diagnostics import CliError, read_source


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "sharding", help="draw how a sharded program's arguments and results lie over devices",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="StableHLO text file ('-' for stdin)")
    p.add_argument("--num-devices", type=int, required=True, metavar="N",
                   help="devices the program is partitioned for")
    p.add_argument("--entry", default="main", help="entry function (default: main)")
    p.add_argument("--png", metavar="DIR", help="also write one PNG per value into DIR")
    p.add_argument("--ranges", action="store_true", help="label tiles with their element ranges")
    p.set_defaults(handler=sharding_command)


def layouts(text: str, filename: str, num_devices: int, entry: str = "main") -> list:
    """``[(name, global shape, TileAssignment)]`` of the entry's arguments and results once
    the program is partitioned for ``num_devices``."""
    import dataclasses

    import stablehlo
    from xla_core.passes import PassContext, make_pipeline
    from xla_core.spmd.sharding import REPLICATED, module_meshes, value_tiles
    module = stablehlo.parse(text, filename)
    if not module.has_function(entry):
        raise CliError(f"{filename}: no function @{entry} (pass --entry)")
    func = module.lookup(entry)
    shapes = [("arg", t.shape) for t in func.type.inputs] + \
        [("result", t.shape) for t in func.type.results]
    pipeline = make_pipeline("spmd")
    pipeline.passes = [dataclasses.replace(p, **{k: v for k, v in (("num_devices", num_devices),
                                                                   ("entry", entry))
                                                 if any(f.name == k for f in
                                                        dataclasses.fields(p))})
                       for p in pipeline.passes]
    pipeline.run(module, PassContext())
    func = module.lookup(entry)
    meshes = module_meshes(module)
    out = []
    counts = {"arg": 0, "result": 0}
    for kind, shape in shapes:
        i = counts[kind]
        counts[kind] += 1
        attrs = func.arg_attrs(i) if kind == "arg" else func.result_attrs(i)
        where = f"@{entry} {'argument' if kind == 'arg' else 'result'} {i}"
        tiles = value_tiles(attrs, meshes, shape, where) if attrs is not None else REPLICATED
        out.append((f"{kind}{i}", tuple(shape), tiles))
    return out


def sharding_command(args: argparse.Namespace) -> int:
    from xla_core.spmd.visualize import render_png, render_text
    if args.num_devices < 1:
        raise CliError(f"--num-devices must be positive, got {args.num_devices}")
    text, filename = read_source(args.file, args.sources)
    values = layouts(text, filename, args.num_devices, args.entry)
    png_dir = pathlib.Path(args.png) if args.png else None
    if png_dir is not None:
        png_dir.mkdir(parents=True, exist_ok=True)
    for name, shape, tiles in values:
        sys.stdout.write(f"{name}: shape {list(shape)}\n")
        if len(shape) > 2:
            counts = "whole" if tiles.replicated else "x".join(map(str, tiles.tile_dims))
            sys.stdout.write(f"  (rank {len(shape)}: not drawn; tiles {counts})\n")
            continue
        sys.stdout.write(render_text(shape, tiles, args.num_devices, args.ranges) + "\n")
        if png_dir is not None:
            try:
                render_png(shape, tiles, png_dir / f"{name}.png", args.num_devices,
                           title=f"{name}: shape {list(shape)}")
            except ImportError as exc:
                raise CliError(str(exc)) from exc
    return 0
