"""Latency estimates for scheduling: how long an op computes and a collective communicates.

One interface, ``LatencyEstimator``: ``op_seconds(op)`` (the time the executing thread spends
on ``op``), ``collective_seconds(collective)`` (the time the collective occupies the
communication, with ``collective`` the op a start wraps or a synchronous collective) and
``overlaps_compute`` (whether a started collective communicates beside the compute at all:
``HardwareDescription.communication_beside_compute``). The
scheduler and the schedule report use nothing else, so a measured profile replaces an
estimate per op by wrapping the model (``MeasuredEstimator``) without the scheduler knowing.

``MeasuredEstimator.from_profile`` is the profile-guided estimator (XLA's PGLE): the
times a trace of a run measured (``openhlo run --trace``), matched to the program's ops by
key, and the model's estimates for the ops it did not measure.

``CostModelEstimator`` is the static model: ``roofline_seconds(op_cost(op))`` on a
``HardwareDescription`` for compute (zero for ops that cost nothing: reshapes, constants,
tuples, terminators; ``openhlo.async_start``/``async_done`` themselves), and for a
collective ``latency + moved bytes / bandwidth`` of one transport (``"shared-memory"``:
virtual devices of one process; ``"network"``: gloo across processes), where the bytes each
device moves are those of a ring algorithm over a group of n devices:

=====================  =================================
all_reduce             2 (n-1)/n x operand bytes
all_gather             (n-1)/n x result bytes
reduce_scatter         (n-1)/n x operand bytes
all_to_all             (n-1)/n x operand bytes
collective_permute     operand bytes
collective_broadcast   operand bytes
=====================  =================================

With several devices on the host (the cpu backend's virtual devices; ``hardware.shared_by(n)``
describes n of them), each gets a share of it (xla_core/cost/hardware.py, Note [devices
sharing a host's cores]): op times through ``roofline_seconds``, collectives scaled by
``hardware.core_sharing`` (their copies run on each device's own thread); and where the
devices leave no core for the communication threads, nothing overlaps.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from stablehlo.errors import OpenHLOError
from stablehlo.ir.core import Module, Operation
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, ASYNC_START
from stablehlo.ir.ops.base import TERMINATOR
from xla_core.cost.estimates import op_cost, roofline_seconds, type_bytes
from xla_core.cost.hardware import HardwareDescription
from xla_core.cost.profile import Measurement, MeasuredProfile, match_profile

TRANSPORTS = ("shared-memory", "network")

# fraction of the bytes (operands', or results' for all_gather) each device moves, per group
# size n (see the module doc)
_RING_FACTOR: dict[str, Callable[[int], float]] = {
    "stablehlo.all_reduce": lambda n: 2 * (n - 1) / n,
    "stablehlo.all_gather": lambda n: (n - 1) / n,
    "stablehlo.reduce_scatter": lambda n: (n - 1) / n,
    "stablehlo.all_to_all": lambda n: (n - 1) / n,
    "stablehlo.collective_permute": lambda n: 1.0,
    "stablehlo.collective_broadcast": lambda n: 1.0,
}
COLLECTIVES = frozenset(_RING_FACTOR)


class SchedulingError(OpenHLOError):
    """A scheduling option or estimate that cannot be used (unknown transport, ...)."""


class LatencyEstimator(Protocol):
    def op_seconds(self, op: Operation) -> float:
        """Seconds the executing thread spends on ``op``."""
        ...

    def collective_seconds(self, collective: Operation) -> float:
        """Seconds ``collective`` (a start's wrapped op, or a synchronous one) communicates."""
        ...

    @property
    def overlaps_compute(self) -> bool:
        """Whether a started collective communicates while the executing thread computes."""
        ...


def ring_factor(name: str, n: int) -> float:
    """Fraction of its bytes (operands', or results' for all_gather) a device moves for the
    collective ``name`` (``stablehlo.all_reduce``, ...) over a group of ``n`` devices."""
    return _RING_FACTOR[name](n)


def group_size(collective: Operation) -> int:
    """Devices in each of ``collective``'s groups (2 for a permute: a sender and a receiver)."""
    groups = collective.attributes.get("replica_groups")
    shape = getattr(getattr(groups, "type", None), "shape", None)
    if shape:
        return max(int(shape[-1]), 1)
    return 2


def moved_bytes(collective: Operation) -> float:
    """Bytes each device sends for ``collective`` (see the module doc's table)."""
    if collective.name not in _RING_FACTOR:
        raise SchedulingError(f"{collective.where()}: {collective.name} is not a collective")
    values = collective.results if collective.name == "stablehlo.all_gather" \
        else collective.operands
    total = sum(type_bytes(v.type) for v in values)
    return _RING_FACTOR[collective.name](group_size(collective)) * total


class CostModelEstimator:
    """The static estimates of the module doc, on ``hardware`` over ``transport``."""

    def __init__(self, hardware: HardwareDescription, module: Module | None = None,
                 transport: str = "shared-memory"):
        if transport not in TRANSPORTS:
            raise SchedulingError(f"transport must be one of {list(TRANSPORTS)}, "
                                  f"got {transport!r}")
        self.hardware = hardware
        self.module = module
        self.sharing = hardware.core_sharing
        network = transport == "network"
        self.latency = hardware.network_latency if network else hardware.collective_latency
        self.bandwidth = hardware.network_bandwidth if network \
            else hardware.collective_bandwidth
        self.overlaps_compute = hardware.communication_beside_compute

    def op_seconds(self, op: Operation) -> float:
        if op.name in (ASYNC_START, ASYNC_DONE) or (op.opdef is not None
                                                    and op.opdef.has(TERMINATOR)):
            return 0.0
        cost = op_cost(op, module=self.module)
        if cost.flops == 0 and cost.bytes_accessed == 0:
            return 0.0  # aliased or folded: a backend emits no kernel for it
        return roofline_seconds(cost, self.hardware)

    def collective_seconds(self, collective: Operation) -> float:
        return self.sharing * (self.latency + moved_bytes(collective) / self.bandwidth)


def sequential_seconds(estimator: LatencyEstimator, module: Module, entry: str = "main") -> float:
    """``entry``'s ops one after another, nothing overlapped: the step time a plan is judged
    by when schedules are left out (auto-sharding's checks against expert plans)."""
    return sum(estimator.collective_seconds(op) if op.name in COLLECTIVES
               else estimator.op_seconds(op) for op in module.lookup(entry).body.operations)


class MeasuredEstimator:
    """``base``'s estimates, except where ``measured(op)`` gives seconds (a profile of a
    run): those replace the estimate for that op. ``replaced`` records the ops whose
    estimate was replaced, with (estimate, measurement), as the estimator was asked;
    ``measurements`` (``from_profile``) are every op a profile gave a time, with its key."""

    def __init__(self, base: LatencyEstimator,
                 measured: Callable[[Operation], float | None],
                 measurements: Sequence[Measurement] = ()):
        self.base = base
        self.measured = measured
        self.measurements = list(measurements)
        self.replaced: dict[Operation, tuple[float, float]] = {}

    @property
    def overlaps_compute(self) -> bool:
        return self.base.overlaps_compute  # a profile measures times, not the host's cores

    @classmethod
    def from_profile(cls, base: LatencyEstimator, module: Module, profile: MeasuredProfile,
                     function: str | None = None) -> MeasuredEstimator:
        """The measured times of ``profile`` (a trace read back) for the ops of ``module``'s
        ``function`` (default ``main``), matched by key (xla_core/cost/profile.py,
        Note [matching a profile]); ops without a measurement keep ``base``'s estimate."""
        match = match_profile(module, profile, function)
        seconds = {m.op: m.seconds for m in match.measured}
        return cls(base, seconds.get, match.measured)

    def replaced_estimates(self) -> list[dict]:
        """``{"key", "estimated_s", "measured_s"}`` of each measured op, in program order:
        the estimate ``base`` gives it and the measurement that replaces it."""
        out = []
        for m in self.measurements:
            estimate = self.base.collective_seconds(m.op) if m.communication \
                else self.base.op_seconds(m.op)
            out.append({"key": m.key, "estimated_s": estimate, "measured_s": m.seconds})
        return out

    def _either(self, op: Operation, estimate: float) -> float:
        seconds = self.measured(op)
        if seconds is None:
            return estimate
        self.replaced[op] = (estimate, seconds)
        return seconds

    def op_seconds(self, op: Operation) -> float:
        return self._either(op, self.base.op_seconds(op))

    def collective_seconds(self, collective: Operation) -> float:
        return self._either(collective, self.base.collective_seconds(collective))
