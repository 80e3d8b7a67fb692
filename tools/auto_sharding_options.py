"""The auto-sharding options ``openhlo opt`` and ``openhlo run`` share: ``--auto-sharding``
with ``--mesh x=4,y=2``, ``--memory-limit 2GiB``, ``--hardware NAME`` and
``--sharding-time-limit S``; ``passes(args)`` turns them into the passes that write the plan
(``inline``, then ``auto-sharding``), with the mesh and limit text checked first.
``--memory-limit`` also bounds the program's peak by recomputation (the ``remat`` pass):
``memory_limit(args)`` reads it."""
from __future__ import annotations

import argparse

from tools.diagnostics import CliError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auto-sharding", action="store_true",
                   help="choose the shardings of the program on --mesh (pass auto-sharding: "
                        "an integer program over per-op strategies, costed on --hardware) "
                        "and partition it for the mesh's devices")
    p.add_argument("--mesh", metavar="AXES",
                   help="with --auto-sharding: the device mesh as NAME=SIZE,... (x=4,y=2); "
                        "default: the program's own sdy.mesh")
    p.add_argument("--memory-limit", metavar="BYTES",
                   help="bytes per device the live values may take (2GiB, 512MB, 4096; "
                        "default: no limit): values are recomputed to keep the peak under it "
                        "(pass remat), and with --auto-sharding the plan keeps to it too")
    p.add_argument("--hardware", metavar="NAME", default="cpu",
                   help="with --auto-sharding: the xla_core.cost hardware description the "
                        "plan is costed on (default: cpu, this machine, measured once; "
                        "generic-cpu is fixed)")
    p.add_argument("--sharding-time-limit", type=float, metavar="S", default=None,
                   help="with --auto-sharding: seconds the solver may take before a greedy "
                        "plan (under a memory limit: one priced by the LP relaxation, when "
                        "found in time) is used (default 10)")


def passes(args: argparse.Namespace) -> list:
    """``[inline, auto-sharding{...}]`` for ``args``, or [] without --auto-sharding."""
    given = [flag for flag, value in (("--mesh", args.mesh),
                                      ("--sharding-time-limit", args.sharding_time_limit))
             if value is not None]
    if not args.auto_sharding:
        if given:
            raise CliError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                           f"--auto-sharding")
        return []
    from xla_core.passes import make_pass
    from xla_core.spmd.auto_sharding import AutoShardingPass, parse_bytes, parse_mesh
    if args.mesh is not None:
        parse_mesh(args.mesh)
    if args.memory_limit is not None:
        parse_bytes(args.memory_limit)
    options = {"mesh": args.mesh or "", "memory_limit": args.memory_limit or "",
               "hardware": args.hardware}
    if args.sharding_time_limit is not None:
        if args.sharding_time_limit <= 0:
            raise CliError(f"--sharding-time-limit must be positive, got "
                           f"{args.sharding_time_limit}")
        options["time_limit"] = args.sharding_time_limit
    return [make_pass("inline"), AutoShardingPass(**options)]


def memory_limit(args: argparse.Namespace) -> int:
    """``--memory-limit`` in bytes, 0 when not given."""
    if args.memory_limit is None:
        return 0
    from xla_core.buffers.remat import RematError, parse_limit
    try:
        return parse_limit(args.memory_limit)
    except RematError as exc:
        raise CliError(f"--memory-limit: {exc}") from None


def mesh_devices(module) -> int:
    """The device count of the mesh auto-sharding wrote into ``module``."""
    from xla_core.spmd.sharding import module_meshes
    (mesh,) = module_meshes(module).values()
    return mesh.size
