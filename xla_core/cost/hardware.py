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
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from stablehlo.registry import Registry, RegistryError


@dataclass(frozen=True)
class HardwareDescription:
    """Throughput figures of one device, all per second, f32.

    ``step_overhead`` is the fixed cost of launching one kernel or executing one
    step (thread-pool dispatch on a CPU, a kernel launch on a GPU); it is what
    makes fusing many tiny ops worthwhile even when they are memory-bound.

    Collectives cost a fixed latency per collective plus the bytes each device moves over
    a bandwidth, for two transports: ``collective_*`` between virtual devices of one
    process (threads meeting in a rendezvous and copying through shared memory) and
    ``network_*`` across processes (gloo over TCP). These are documented constants, not
    measured (see Note [collective constants]); the latency-hiding scheduler
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

    def collective_link(self, axis: str | None = None) -> tuple[float, float]:
        """(latency seconds, bandwidth bytes/s) of a collective among the devices along mesh
        axis ``axis``: its ``axis_links`` entry, else the host-wide collective figures."""
        for name, latency, bandwidth in self.axis_links:
            if name == axis:
                return float(latency), float(bandwidth)
        return self.collective_latency, self.collective_bandwidth

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
    """The description registered as ``name``; factories are called on each lookup
    (``"cpu"`` reads its on-disk cache, so this is cheap after the first time).
    ``devices_per_host`` > 0: shared by that many devices (``shared_by``); 0: as registered."""
    if devices_per_host < 0:
        raise ValueError(f"hardware {name!r}: devices_per_host must be >= 0 (0: as "
                         f"registered), got {devices_per_host}")
    described = _registered(name)
    return described.shared_by(devices_per_host) if devices_per_host else described


def _registered(name: str) -> HardwareDescription:
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
# ranking schedules; a measured profile replaces them per op (xla_core/scheduling).
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

# Conservative: 4 cores x AVX2 FMA at ~2.5 GHz would be ~320 GFLOP/s peak, but
# achieved numpy/BLAS throughput on shared servers is far lower; 50 GFLOP/s and
# 10 GB/s (one or two DDR4 channels under contention) keep estimates pessimistic.
GENERIC_CPU = HardwareDescription(
    name="generic-cpu", peak_flops=50e9, memory_bandwidth=10e9, cores=4, step_overhead=2e-6,
    l1_cache_bytes=32 * 1024, l2_cache_bytes=1024 * 1024, l3_cache_bytes=16 * 1024 * 1024)

register_hardware("generic-cpu", GENERIC_CPU)
register_hardware("cpu", "xla_core.cost.calibrate:calibrated_cpu")
