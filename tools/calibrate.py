"""``openhlo calibrate``: measure this machine and write a hardware description (JSON).

    openhlo calibrate [-o hw.json] [--mesh x=4,y=2] [--num-processes P] [--refresh] [--quick]

Measures, on the machine it runs on:

* matmul throughput by size and memory bandwidth: ``xla_core.cost.calibrate`` (its on-disk
  cache answers unless ``--refresh``);
* the runtime's own collectives between virtual devices of the cpu backend: all-reduce and
  all-gather of a few sizes (f32, ``--quick``: fewer and smaller), each timed as a chain of
  dependent collectives in one program (the chain's extra length over a single collective
  gives one collective's time without the dispatch around it; best of the repeats, as for
  the matmuls: what the collective costs when no other job takes its cores), the
  bytes each device moves as the scheduler counts them (``moved_bytes``, ring algorithm),
  then ``latency + bytes / bandwidth`` fitted by least squares (``fit_latency_bandwidth``:
  each collective its own latency, one bandwidth; the link's latency is their mean, each
  one's is kept in the measurement). Over one group of ``min(cores, 8)`` devices (at least 2)
  this gives ``collective_latency/bandwidth``; with ``--mesh`` a client of the mesh's
  devices runs every group along each axis at once and gives that axis's ``axis_links``
  entry;
* with ``--num-processes P``: the same between P processes on loopback, one device each,
  whose collectives go over gloo (``pjrt.distributed.launch``), giving
  ``network_latency/bandwidth``.

Figures measured with more devices (or processes) than cores are divided by the core
sharing (Note [devices sharing a host's cores] in xla_core/cost/hardware.py): a description
says what one device does with a core to itself, and the cost model stretches it again for
the devices that share the host. Progress goes to stderr, a summary table to stdout; the
JSON holds every ``HardwareDescription`` field plus ``measurement`` (how and when). Use it
with ``OPENHLO_HARDWARE=hw.json`` (what ``"cpu"`` resolves to: the compile pipeline's
fusion and scheduling) or ``hardware("hw.json")``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
import tempfile
import time

import numpy as np

from tools.diagnostics import CliError

KIB = 1024
SIZES = (4 * KIB, 64 * KIB, 1024 * KIB, 4096 * KIB)  # bytes per device
QUICK_SIZES = (4 * KIB, 64 * KIB, 1024 * KIB)
CHAIN = 8           # extra collectives of the long program
QUICK_CHAIN = 4
REPEATS = 11
QUICK_REPEATS = 5
MAX_HOST_DEVICES = 8
OPS = ("all_reduce", "all_gather")
# Seconds the --num-processes measurement may take before its processes are stopped.
NETWORK_TIMEOUT_S = 300.0


@dataclasses.dataclass(frozen=True)
class Settings:
    sizes: tuple = SIZES
    chain: int = CHAIN
    repeats: int = REPEATS

    @classmethod
    def of(cls, quick: bool) -> Settings:
        return cls(QUICK_SIZES, QUICK_CHAIN, QUICK_REPEATS) if quick else cls()


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure this machine and write a hardware description (JSON)",
        description="Measure matmul throughput, memory bandwidth and the runtime's "
                    "collectives on this machine; write a hardware description for "
                    "OPENHLO_HARDWARE or hardware('file.json').")
    p.add_argument("-o", "--output", default="hardware.json", metavar="OUT",
                   help="where to write the description (default: hardware.json)")
    p.add_argument("--mesh", type=parse_mesh, metavar="AXES",
                   help="measure the collectives along each axis of this device mesh, "
                        "e.g. x=4,y=2 (its devices are virtual devices of the cpu backend)")
    p.add_argument("--num-processes", type=int, metavar="P",
                   help="also measure collectives across P processes (gloo on loopback)")
    p.add_argument("--refresh", action="store_true",
                   help="measure matmul and memory bandwidth again instead of reading the cache")
    p.add_argument("--quick", action="store_true",
                   help="fewer and smaller collectives (a smoke run, less precise)")
    p.set_defaults(handler=calibrate_command)


def parse_mesh(text: str) -> tuple:
    """``"x=4,y=2"`` -> ``(("x", 4), ("y", 2))``, read as ``--auto-sharding --mesh`` reads it."""
    from xla_core.spmd.auto_sharding import AutoShardingError
    from xla_core.spmd.auto_sharding import parse_mesh as read_mesh
    try:
        return read_mesh(text).axes
    except AutoShardingError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def axis_groups(axes: tuple, axis: str) -> list[list[int]]:
    """The device ids of each group along ``axis`` of a mesh over devices 0..n-1 (row-major
    over ``axes``): the devices that differ only in their position on that axis."""
    names = [n for n, _ in axes]
    devices = np.arange(int(np.prod([s for _, s in axes]))).reshape([s for _, s in axes])
    along = np.moveaxis(devices, names.index(axis), -1)
    return along.reshape(-1, along.shape[-1]).tolist()


def chain_program(op: str, count: int, groups: list[list[int]], num_replicas: int,
                  length: int) -> str:
    """``length`` dependent ``op``s of a ``count``-element f32 value over ``groups``: each
    all-reduce sums the previous one's result; each all-gather gathers the first ``count``
    elements of the previous one's."""
    g = len(groups[0])
    t = f"tensor<{count}xf32>"
    gathered = f"tensor<{count * g}xf32>"
    rows = ", ".join("[" + ", ".join(map(str, group)) + "]" for group in groups)
    attr = f"replica_groups = dense<[{rows}]> : tensor<{len(groups)}x{g}xi64>"
    lines, value = [], "%x"
    for i in range(length):
        if op == "all_reduce":
            lines.append(f"""  %r{i} = "stablehlo.all_reduce"({value}) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }}) {{{attr}}} : ({t}) -> {t}""")
            value = f"%r{i}"
        else:
            lines.append(f'  %g{i} = "stablehlo.all_gather"({value}) {{all_gather_dim = 0 : i64, '
                         f'{attr}}} : ({t}) -> {gathered}')
            lines.append(f"  %r{i} = stablehlo.slice %g{i} [0:{count}] : ({gathered}) -> {t}")
            value = f"%r{i}"
    body = "\n".join(lines)
    return (f"module attributes {{mhlo.num_replicas = {num_replicas} : i32}} {{\n"
            f"func.func @main(%x: {t}) -> {t} {{\n{body}\n  return {value} : {t}\n}}\n}}")


def _collective(module):
    """The first collective op of a parsed chain program."""
    from xla_core.scheduling.estimator import COLLECTIVES
    return next(op for op in module.walk() if op.name in COLLECTIVES)


def time_chain(client, text: str, op: str, count: int, group_size: int, length: int,
               repeats: int) -> float:
    """Best seconds of one execution of the chain program ``text`` on every addressable
    device of ``client``, its result checked first (ones: an all-reduce chain gives
    group_size ** length, an all-gather chain ones)."""
    exe = client.compile(text)
    devices = exe.addressable_devices()
    args = [[client.buffer_from_numpy(np.ones(count, np.float32), d)] for d in devices]

    def run():
        outputs, events = exe.execute_sharded(args, with_events=True)
        for event in events:
            event.wait()
        return outputs

    want = float(group_size) ** length if op == "all_reduce" else 1.0
    for out in run():
        got = out[0].to_numpy()
        if not np.all(got == want):
            raise AssertionError(f"{op} chain of {length} over groups of {group_size}: "
                                 f"got {got[:4]}..., expected {want}")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def time_points(client, groups: list[list[int]], settings: Settings, label: str) -> list:
    """One collective's seconds for each op and size of ``settings``, among each of
    ``groups`` (all at once) on ``client``'s devices, with the bytes each device moves."""
    from stablehlo.text import parse_module
    from xla_core.scheduling.estimator import moved_bytes
    num_replicas = sum(len(g) for g in groups)
    points = []
    for op in OPS:
        for size in settings.sizes:
            count = size // 4
            _progress(f"{label}: {op} of {size // KIB} KiB per device, groups of "
                      f"{len(groups[0])}")
            short, long = (chain_program(op, count, groups, num_replicas, n)
                           for n in (1, 1 + settings.chain))
            once = time_chain(client, short, op, count, len(groups[0]), 1, settings.repeats)
            chained = time_chain(client, long, op, count, len(groups[0]),
                                 1 + settings.chain, settings.repeats)
            seconds = (chained - once) / settings.chain
            moved = moved_bytes(_collective(parse_module(short)))
            points.append({"op": op, "bytes": size, "moved_bytes": moved, "seconds": seconds})
    return points


def fit_link(points: list, groups: list[list[int]], sharing: float, label: str) -> dict:
    """Latency and bandwidth of ``points`` (``time_points``), normalised by ``sharing``
    (module doc); with the points and groups. A point whose chain was not slower than one
    collective (noise on a loaded host) is kept in ``points`` but left out of the fit."""
    from xla_core.cost.calibrate import CalibrationError, fit_latency_bandwidth
    usable = [p for p in points if p["seconds"] > 0]
    try:
        fit = fit_latency_bandwidth([p["moved_bytes"] for p in usable],
                                    [p["seconds"] / sharing for p in usable],
                                    [p["op"] for p in usable])
    except CalibrationError as e:
        raise CalibrationError(f"collectives among {label}: {e} (timings this noisy come "
                               f"from a busy machine: calibrate again when it is quieter, "
                               f"or without --quick)") from None
    return {"latency": fit.latency, "bandwidth": fit.bandwidth,
            "latency_by_op": fit.latencies, "groups": groups, "core_sharing": sharing,
            "points": points}


def measure_link(client, groups: list[list[int]], settings: Settings, sharing: float,
                 label: str) -> dict:
    """``fit_link`` of ``time_points``."""
    return fit_link(time_points(client, groups, settings, label), groups, sharing, label)


def _sharing(devices: int) -> float:
    from xla_core.cost.calibrate import core_count
    return max(1.0, devices / core_count())


def measure_host(settings: Settings) -> dict:
    """One group of ``min(cores, 8)`` (at least 2) virtual devices of one cpu client."""
    import pjrt
    from xla_core.cost.calibrate import core_count
    devices = max(2, min(core_count(), MAX_HOST_DEVICES))
    client = pjrt.make_client("cpu", num_devices=devices)
    return measure_link(client, [list(range(devices))], settings, _sharing(devices),
                        f"{devices} devices")


def measure_mesh(axes: tuple, settings: Settings) -> dict:
    """Per axis of the mesh: its groups measured at once on a client of the mesh's devices."""
    import pjrt
    devices = int(np.prod([s for _, s in axes]))
    client = pjrt.make_client("cpu", num_devices=devices)
    return {name: measure_link(client, axis_groups(axes, name), settings, _sharing(devices),
                               f"mesh axis {name}")
            for name, size in axes if size > 1}


def time_network(processes: int, settings: Settings, timeout_s: float = NETWORK_TIMEOUT_S
                 ) -> list:
    """``time_points`` between ``processes`` processes on loopback, one device each (their
    collectives go over gloo): each runs ``python -m tools.calibrate --network-worker``;
    process 0's timings."""
    from pjrt.distributed.launch import launch
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory(prefix="openhlo-calibrate-") as tmp:
        out = os.path.join(tmp, "network.json")
        command = [sys.executable, "-m", "tools.calibrate", "--network-worker", out,
                   "--sizes", ",".join(map(str, settings.sizes)), "--chain",
                   str(settings.chain), "--repeats", str(settings.repeats)]
        # process 0's progress lines are already prefixed by its own _progress
        launch(command, processes, timeout_s, cwd=root,
               on_stderr_line=lambda index, line: index == 0 and sys.stderr.write(line))
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def network_worker(out: str, settings: Settings) -> int:
    """One process of ``time_network``: joins the others (the launcher's environment)."""
    import pjrt
    from pjrt.distributed.options import from_environment
    options = from_environment()
    if options is None:
        raise CliError("--network-worker runs under pjrt.distributed.launch")
    client = pjrt.make_client("cpu", num_devices=1, distributed=options)
    processes = options.num_processes
    result = time_points(client, [list(range(processes))], settings,
                         f"{processes} processes")
    if options.process_index == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)
    return 0


def calibrate_machine(*, mesh: tuple | None = None, num_processes: int | None = None,
                      refresh: bool = False, quick: bool = False):
    """The measured description and its ``measurement`` record."""
    from xla_core.cost import calibrate as machine
    if num_processes is not None and num_processes < 2:
        raise CliError(f"--num-processes must be at least 2, got {num_processes}")
    settings = Settings.of(quick)
    _progress("matmul and memory bandwidth" + (" (measuring)" if refresh else ""))
    record = machine.calibrate(refresh=refresh)
    base = machine.calibrated_cpu()  # the record just read or measured, as a description
    host = measure_host(settings)
    fields = {"name": "cpu-calibrated", "collective_latency": host["latency"],
              "collective_bandwidth": host["bandwidth"]}
    measurement = {"tool": "openhlo calibrate", "host": socket.gethostname(),
                   "host_key": record["host_key"],
                   "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "quick": quick, "matmul_and_memory": {
                       k: record[k] for k in ("measured_at", "method", "version")},
                   "load_1min": os.getloadavg()[0],
                   "collectives": {"settings": dataclasses.asdict(settings), "host": host}}
    if mesh:
        links = measure_mesh(mesh, settings)
        fields["axis_links"] = tuple((name, link["latency"], link["bandwidth"])
                                     for name, link in links.items())
        measurement["collectives"]["mesh"] = {"axes": [list(a) for a in mesh], **links}
    if num_processes is not None:
        network = fit_link(time_network(num_processes, settings),
                           [list(range(num_processes))], _sharing(num_processes),
                           f"{num_processes} processes")
        fields.update(network_latency=network["latency"], network_bandwidth=network["bandwidth"])
        measurement["collectives"]["network"] = network
    return dataclasses.replace(base, **fields), measurement


def summary(description, measurement: dict) -> str:
    """A short table of the figures."""
    rows = [("matmul peak", f"{description.peak_flops / 1e9:.1f} GFLOP/s"),
            ("memory bandwidth", f"{description.memory_bandwidth / 1e9:.1f} GB/s")]
    for flops, rate in description.matmul_curve:
        n = round((flops / 2) ** (1 / 3))
        rows.append((f"  matmul {n}x{n}", f"{rate / 1e9:.1f} GFLOP/s"))
    links = [("collectives (one process)", description.collective_latency,
              description.collective_bandwidth)]
    links += [(f"  mesh axis {axis}", lat, bw) for axis, lat, bw in description.axis_links]
    if "network" in measurement["collectives"]:
        links.append(("network (gloo, processes)", description.network_latency,
                      description.network_bandwidth))
    rows += [(name, f"{lat * 1e6:.1f} us + bytes / {bw / 1e9:.2f} GB/s")
             for name, lat, bw in links]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def calibrate_command(args: argparse.Namespace) -> int:
    description, measurement = calibrate_machine(
        mesh=args.mesh, num_processes=args.num_processes, refresh=args.refresh,
        quick=args.quick)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(description.to_json(measurement))
    print(summary(description, measurement))
    print(f"wrote {args.output}; use it with OPENHLO_HARDWARE={os.path.abspath(args.output)}")
    return 0


def _progress(line: str) -> None:
    print(f"calibrate: {line}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    """``python -m tools.calibrate --network-worker OUT --sizes ... --chain N --repeats N``:
    one process of ``time_network``."""
    parser = argparse.ArgumentParser(prog="python -m tools.calibrate")
    parser.add_argument("--network-worker", required=True, metavar="OUT")
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--chain", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    args = parser.parse_args(argv)
    settings = Settings(tuple(int(s) for s in args.sizes.split(",")), args.chain, args.repeats)
    return network_worker(args.network_worker, settings)


if __name__ == "__main__":
    sys.exit(main())
