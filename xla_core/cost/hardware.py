"""Hardware descriptions: the few numbers a roofline cost model needs.

A ``HardwareDescription`` is immutable; ``HARDWARE`` maps names to descriptions
or to zero-argument factories returning one (so a description that has to be
measured, like ``"cpu"``, is built only when someone asks for it). Entries may
be lazy ``"pkg.mod:attr"`` strings, and installed packages add their own through
the ``openhlo.hardware`` entry-point group.

Built-in entries:

* ``"cpu"``: this machine, from a one-off measurement cached on disk
  (``xla_core.cost.calibrate``);
* ``"generic-cpu"``: fixed, deliberately conservative numbers (a few cores of an
  older x86 server) for deterministic results, e.g. in tests and golden files.

A description is also data: ``to_json()`` / ``HardwareDescription.from_json()`` write and
read it (every field, plus a free-form ``"measurement"`` record of how and when it was
measured, which ``openhlo calibrate`` fills), and ``hardware("path/to/file.json")`` reads
such a file, so a vendor ships a JSON file instead of a package. ``OPENHLO_HARDWARE`` (a
registered name or a ``.json`` path) replaces what ``"cpu"`` resolves to, which is the
description the compile pipeline's fusion and scheduling passes use by default.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields, replace

from stablehlo.errors import OpenHLOError
from stablehlo.registry import Registry, RegistryError

# The variable naming what ``hardware("cpu")`` resolves to instead of the measured machine.
HARDWARE_ENV = "OPENHLO_HARDWARE"
# The version of the JSON form (``to_json``); a file with another is refused.
JSON_FORMAT_VERSION = 1


class HardwareFileError(OpenHLOError):
    """A hardware description file that cannot be read: missing, not JSON, or a field that
    is unknown, missing or of the wrong kind; the message names the file and the field."""


@dataclass(frozen=True)
class HardwareDescription:
    """Throughput figures of one device, all per second, f32.

    ``step_overhead`` is the fixed cost of launching one kernel or executing one
    step (thread-pool dispatch on a CPU, a kernel launch on a GPU); it is what
    makes fusing many tiny ops worthwhile even when they are memory-bound.

    Collectives cost a fixed latency per collective plus the bytes each device moves over
    a bandwidth, for two transports: ``collective_*`` between virtual devices of one
    process (threads meeting in a rendezvous and copying through shared memory) and
    ``network_*`` across processes (gloo over TCP). Their defaults are documented constants
    (see Note [collective constants]); ``openhlo calibrate`` measures them (tools/calibrate.py)
    and writes a description with the measured figures; the latency-hiding scheduler
    (xla_core/scheduling) reads them.

    ``devices_per_host`` is how many devices run at once on this host's ``cores`` (the cpu
    backend's virtual devices: one executing and one communication thread each); the
    figures above are what one device achieves with at least a core to itself, and
    ``core_sharing`` is how much longer its work takes when the devices share the cores
    (see Note [devices sharing a host's cores]).

    ``axis_links`` overrides the collective figures per named mesh axis, as
    ``((axis, latency_s, bandwidth_bytes_per_s), ...)``: devices along one axis of a mesh may
    share a socket while those along another cross a network. ``collective_link(axis)`` is
    the one place that reads them.

    ``matmul_curve`` is the matmul rate by size, ``((flops_per_call, flops_per_s), ...)``
    with increasing flops: small products reach a fraction of ``peak_flops`` (the rate of
    large ones). ``matmul_rate(flops)`` reads it (Note [matmul curve]); empty, every
    product runs at ``peak_flops``.
    """
    name: str
    peak_flops: float
    memory_bandwidth: float
    cores: int
    step_overhead: float = 1e-6
    l1_cache_bytes: int | None = None
    l2_cache_bytes: int | None = None
    l3_cache_bytes: int | None = None
    collective_latency: float = 20e-6
    collective_bandwidth: float = 4e9
    network_latency: float = 100e-6
    network_bandwidth: float = 1e9
    devices_per_host: int = 1
    axis_links: tuple = ()
    matmul_curve: tuple = ()

    def __post_init__(self):
        if self.peak_flops <= 0 or self.memory_bandwidth <= 0 or self.cores <= 0:
            raise ValueError(f"hardware {self.name!r}: peak_flops, memory_bandwidth and cores "
                             f"must be positive, got {self.peak_flops}, "
                             f"{self.memory_bandwidth}, {self.cores}")
        if self.step_overhead < 0:
            raise ValueError(f"hardware {self.name!r}: step_overhead must be >= 0")
        if min(self.collective_latency, self.network_latency) < 0 or \
                min(self.collective_bandwidth, self.network_bandwidth) <= 0:
            raise ValueError(f"hardware {self.name!r}: collective latencies must be >= 0 and "
                             f"bandwidths positive")
        if self.devices_per_host < 1:
            raise ValueError(f"hardware {self.name!r}: devices_per_host must be >= 1, "
                             f"got {self.devices_per_host}")
        for link in self.axis_links:
            if len(link) != 3 or link[1] < 0 or link[2] <= 0:
                raise ValueError(f"hardware {self.name!r}: axis link {link!r} must be "
                                 f"(axis, latency >= 0, bandwidth > 0)")
        sizes = [point[0] for point in self.matmul_curve]
        if any(len(point) != 2 or min(point) <= 0 for point in self.matmul_curve) or \
                any(a >= b for a, b in zip(sizes, sizes[1:])):
            raise ValueError(f"hardware {self.name!r}: matmul_curve must be (flops, flops/s) "
                             f"pairs, all positive, with increasing flops; got "
                             f"{self.matmul_curve!r}")

    def collective_link(self, axis: str | None = None) -> tuple[float, float]:
        """(latency seconds, bandwidth bytes/s) of a collective among the devices along mesh
        axis ``axis``: its ``axis_links`` entry, else the host-wide collective figures."""
        for name, latency, bandwidth in self.axis_links:
            if name == axis:
                return float(latency), float(bandwidth)
        return self.collective_latency, self.collective_bandwidth

    def matmul_rate(self, flops: float) -> float:
        """Flop/s of one matrix product of ``flops`` on the whole host: ``matmul_curve``
        interpolated linearly in log(flops)-log(rate), clamped to its ends; ``peak_flops``
        without a curve."""
        if not self.matmul_curve:
            return self.peak_flops
        sizes = [math.log(f) for f, _ in self.matmul_curve]
        rates = [math.log(r) for _, r in self.matmul_curve]
        x = math.log(max(flops, 1.0))
        if x <= sizes[0]:
            return self.matmul_curve[0][1]
        if x >= sizes[-1]:
            return self.matmul_curve[-1][1]
        i = bisect.bisect_right(sizes, x)
        t = (x - sizes[i - 1]) / (sizes[i] - sizes[i - 1])
        return math.exp(rates[i - 1] + t * (rates[i] - rates[i - 1]))

    def device_matmul_rate(self, flops: float) -> float:
        """Flop/s one of ``devices_per_host`` devices computing at once gets for a product of
        ``flops`` (Note [matmul curve]): its size's rate, stretched by ``core_sharing``, but
        no more than its share of ``peak_flops``."""
        return min(self.matmul_rate(flops) / self.core_sharing,
                   self.peak_flops / self.compute_sharing)

    @property
    def core_sharing(self) -> float:
        """Factor by which a device's single-threaded work (a copy at ``memory_bandwidth``,
        measured on one thread; a collective's copies on its own thread) stretches when
        ``devices_per_host`` devices share ``cores``: ``max(1, devices_per_host / cores)``."""
        return max(1.0, self.devices_per_host / self.cores)

    @property
    def communication_beside_compute(self) -> bool:
        """Whether a device's communication thread runs beside its computing one, so that a
        started collective overlaps compute: the host has a core for each device's executing
        and communication thread (``cores >= 2 * devices_per_host``). Otherwise the copies of
        one device's collective take cores from the compute of another, and an async pair
        only adds its thread hand-off (see Note [devices sharing a host's cores])."""
        return self.cores >= 2 * self.devices_per_host

    @property
    def compute_sharing(self) -> float:
        """Factor by which a device's kernels stretch when ``devices_per_host`` devices
        compute at once: ``peak_flops`` is what the whole host achieves (calibrate.py
        measures numpy's matmul on all its threads), which the devices split evenly."""
        return float(self.devices_per_host)

    def shared_by(self, devices: int) -> HardwareDescription:
        """This description for ``devices`` devices running at once on the host."""
        return replace(self, devices_per_host=devices)

    @property
    def machine_balance(self) -> float:
        """Flops per byte at which an op stops being memory-bound."""
        return self.peak_flops / self.memory_bandwidth

    def cache_key(self) -> str:
        """Hash of every field: decisions taken from these numbers change generated code."""
        text = repr(sorted(asdict(self).items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self, measurement: dict | None = None) -> str:
        """This description as JSON text: every field, ``format_version`` and, when given,
        ``measurement`` (how and when the numbers were measured; ``from_json`` ignores it)."""
        data: dict = {"format_version": JSON_FORMAT_VERSION, **asdict(self)}
        data["axis_links"] = [list(link) for link in self.axis_links]
        data["matmul_curve"] = [list(point) for point in self.matmul_curve]
        if measurement is not None:
            data["measurement"] = measurement
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> HardwareDescription:
        """The description in JSON ``text`` (``to_json``'s form); ``source`` names it in
        errors. Fields left out take their defaults; ``name``, ``peak_flops``,
        ``memory_bandwidth`` and ``cores`` are required."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise HardwareFileError(f"{source}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise HardwareFileError(f"{source}: expected a JSON object of hardware fields, "
                                    f"got {type(data).__name__}")
        version = data.pop("format_version", JSON_FORMAT_VERSION)
        if version != JSON_FORMAT_VERSION:
            raise HardwareFileError(f"{source}: format_version {version!r} is not the "
                                    f"supported {JSON_FORMAT_VERSION}")
        data.pop("measurement", None)
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise HardwareFileError(f"{source}: unknown field(s) {', '.join(unknown)}; known: "
                                    f"{', '.join(known)}, format_version, measurement")
        values = {}
        for name, value in data.items():
            where = f"{source}: field {name!r}"
            kind = known[name].type
            values[name] = _rows(value, where, _ROW_FORMS[name]) if kind == "tuple" \
                else _JSON_READERS[kind](value, where)
        missing = [f.name for f in fields(cls) if f.name not in values
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise HardwareFileError(f"{source}: missing required field(s) {', '.join(missing)}")
        try:
            return cls(**values)
        except ValueError as e:
            raise HardwareFileError(f"{source}: {e}") from None


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise HardwareFileError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _integer(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HardwareFileError(f"{where} must be an integer, got {value!r}")
    return value


def _optional_integer(value, where: str) -> int | None:
    return None if value is None else _integer(value, where)


def _string(value, where: str) -> str:
    if not isinstance(value, str):
        raise HardwareFileError(f"{where} must be a string, got {value!r}")
    return value


def _rows(value, where: str, row: str) -> tuple:
    """A list of lists in the form ``row`` names ("[axis, latency, bandwidth]" or
    "[flops, flops_per_s]"): the first item of an axis link is its name, the rest numbers."""
    width = row.count(",") + 1
    if not isinstance(value, list) or not all(isinstance(r, list) and len(r) == width
                                              for r in value):
        raise HardwareFileError(f"{where} must be a list of {row}, got {value!r}")
    named = row.startswith("[axis")
    return tuple(tuple(_string(item, where) if named and i == 0 else _number(item, where)
                       for i, item in enumerate(r)) for r in value)


# How a JSON value of each field type (the dataclass annotation) becomes a field value;
# the tuple fields are lists of rows of the form _ROW_FORMS gives.
_JSON_READERS: dict[str, Callable] = {
    "str": _string, "float": _number, "int": _integer, "int | None": _optional_integer}
_ROW_FORMS = {"axis_links": "[axis, latency, bandwidth]", "matmul_curve": "[flops, flops_per_s]"}


def read_hardware_file(path: str) -> HardwareDescription:
    """The description in the JSON file ``path`` (``HardwareDescription.to_json``'s form)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise HardwareFileError(f"{path}: cannot read the hardware description: "
                                f"{e.strerror or e}") from None
    return HardwareDescription.from_json(text, path)


HardwareFactory = Callable[[], HardwareDescription]

HARDWARE: Registry[HardwareDescription | HardwareFactory] = Registry(
    "hardware description", entry_point_group="openhlo.hardware")


def register_hardware(name: str, description_or_factory, *, override: bool = False):
    """Register a description, a zero-argument factory, or a lazy ``"mod:attr"`` string."""
    if isinstance(description_or_factory, HardwareDescription):
        if description_or_factory.name != name:
            raise RegistryError(f"hardware description named {description_or_factory.name!r} "
                                f"registered as {name!r}")
    elif not (callable(description_or_factory) or isinstance(description_or_factory, str)):
        raise RegistryError(f"hardware {name!r}: expected a HardwareDescription, a factory or "
                            f"a 'module:attr' string, got {type(description_or_factory)}")
    return HARDWARE.register(name, description_or_factory, override=override)


def hardware(name: str, devices_per_host: int = 0) -> HardwareDescription:
    """The description registered as ``name``, or read from ``name`` when it ends in
    ``.json``; factories are called on each lookup (``"cpu"`` reads its on-disk cache, so
    this is cheap after the first time). ``"cpu"`` is what ``$OPENHLO_HARDWARE`` names when
    it is set (a registered name or a ``.json`` path). ``devices_per_host`` > 0: shared by
    that many devices (``shared_by``); 0: as registered."""
    if devices_per_host < 0:
        raise ValueError(f"hardware {name!r}: devices_per_host must be >= 0 (0: as "
                         f"registered), got {devices_per_host}")
    described = _registered(name)
    return described.shared_by(devices_per_host) if devices_per_host else described


def _registered(name: str) -> HardwareDescription:
    if name.endswith(".json"):
        return read_hardware_file(name)
    override = os.environ.get(HARDWARE_ENV) if name == "cpu" else None
    if override and override != "cpu":
        try:
            return _registered(override)
        except RegistryError as e:
            raise RegistryError(f"{HARDWARE_ENV}={override}: {e}") from None
    entry = HARDWARE.get(name)
    if isinstance(entry, HardwareDescription):
        return entry
    if not callable(entry):
        raise RegistryError(f"hardware {name!r} resolved to {type(entry).__name__}, expected a "
                            f"HardwareDescription or a factory")
    description = entry()
    if not isinstance(description, HardwareDescription):
        raise RegistryError(f"hardware factory for {name!r} returned "
                            f"{type(description).__name__}, expected a HardwareDescription")
    return description


# Note [collective constants]
# Between virtual devices of one process a collective is a rendezvous of device threads (a
# condition variable wake-up and a barrier: tens of microseconds under load on a shared
# machine) and copies through shared memory (a fraction of the memory bandwidth, since
# each byte is read and written and several devices copy at once): 20 us and 4 GB/s.
# Across processes gloo adds a TCP round trip per step (loopback or a LAN: ~100 us) and
# moves bytes at about 1 GB/s (10 GbE-class). Both are deliberately round numbers for
# ranking schedules; a measured profile replaces them per op (xla_core/scheduling), and
# `openhlo calibrate` writes a description with figures fitted to the runtime's own timed
# collectives on the machine.
# They describe one collective with the host's cores free for it: under core sharing (Note
# [devices sharing a host's cores]) its copies and wake-ups stretch like compute does.

# Note [devices sharing a host's cores]
# The cpu backend runs N virtual devices in one process: N executing threads, N
# communication threads, and one kernel thread pool of `cores` threads they all submit to.
# When the devices run the same SPMD program they are busy at the same time, so the host's
# cores are split N ways. Kernels run on the shared pool, and `peak_flops` is the whole
# host's rate (all its threads): each device gets 1/N of it, compute_sharing = N (on 16
# cores, the 8-device FSDP step measured 6.2x the estimate made without it). Single-threaded
# work (a copy at `memory_bandwidth`, measured on one thread; a collective's copies and
# reductions on the device's own thread) keeps a core while N <= cores and gets cores/N of
# one beyond: core_sharing = max(1, N / cores). roofline_seconds (cost/estimates.py)
# applies both; the scheduler's estimator scales collectives by core_sharing. The compile
# pipeline describes the executable's devices of this process (the cpu backend fills in the
# compile option `devices_per_host`, pjrt/plugins/cpu/optimize.py), as
# tools/check_estimates.py does; `openhlo opt` and the passes alone describe one device.
# Overlap needs a free core for each device's communication thread besides its executing
# one (communication_beside_compute: cores >= 2N). Without it, 8 devices on 2 cores
# measured the async pairs' step no faster than synchronous collectives, and their thread
# hand-offs cost CPU time (tools/README.md, bench_lhs): the scheduler's timeline then runs
# each started collective whole (xla_core/scheduling/timeline.py) and
# convert-async-to-sync{hardware=...} makes every pair synchronous. The absolute estimates
# (the step's makespan, each collective's time) change with N. What it leaves out, measured
# on the 8-device FSDP step on 2 cores (tools/check_estimates.py, tools/README.md): a
# collective's wait at the rendezvous for
# its slowest peer (the time slices of oversubscribed threads, not derivable from the
# program) and other processes' load on the same cores.

# Note [matmul curve]
# `peak_flops` is what the host's BLAS reaches on large products with all its threads; a
# small product (the dots of a sharded training step are often 64..256 wide) reaches a
# fraction of it: the call overhead and the packing of its operands weigh more, and BLAS
# runs it on fewer threads. calibrate.py times products from 32 to 1024 wide and records
# each one's rate against its flops; matmul_rate interpolates between them in log-log
# space (rates change smoothly with the logarithm of the size), clamped to the ends. With
# N devices computing at once (Note [devices sharing a host's cores]) a product's rate is
# what one call reaches, stretched by core_sharing when the devices outnumber the cores,
# and never more than 1/N of peak_flops: large products split the host's threads, small
# ones run on a core each. Without a curve this is peak_flops / N, the rate of every
# kernel. roofline_seconds (cost/estimates.py) applies it to the flops of dots and
# convolutions (Cost.matmul_flops).

# Conservative: 4 cores x AVX2 FMA at ~2.5 GHz would be ~320 GFLOP/s peak, but
# achieved numpy/BLAS throughput on shared servers is far lower; 50 GFLOP/s and
# 10 GB/s (one or two DDR4 channels under contention) keep estimates pessimistic.
GENERIC_CPU = HardwareDescription(
    name="generic-cpu", peak_flops=50e9, memory_bandwidth=10e9, cores=4, step_overhead=2e-6,
    l1_cache_bytes=32 * 1024, l2_cache_bytes=1024 * 1024, l3_cache_bytes=16 * 1024 * 1024)

register_hardware("generic-cpu", GENERIC_CPU)
register_hardware("cpu", "xla_core.cost.calibrate:calibrated_cpu")
