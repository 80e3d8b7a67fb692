"""The cpu backend's compiler pipeline: which xla_core passes run before code generation.

Optimization levels (``CompileOptions(env_option_overrides={"opt_level": N})``, else
``make_client("cpu", opt_level=N)``, else the ``OPENHLO_CPU_OPT_LEVEL`` environment
variable, else 1):

* 0: the program is lowered as given (op by op on native kernels);
* 1: the ``cpu`` pipeline (``cpu_pipeline``: xla_core's target-independent ``cpu-opt``
  cleanup with ``quant-lower`` after its constant folding, then priority fusion and the
  latency-hiding scheduler), then the fusions become generated C++ kernels (codegen/).

``env_option_overrides={"latency_hiding": False}`` (or ``OPENHLO_CPU_LATENCY_HIDING=0``)
schedules with the memory scheduler alone (the ``cpu-memory-schedule`` pipeline): the
collectives keep the windows the spmd pipeline gave them.

``env_option_overrides={"profile": "trace.json"}`` (or ``OPENHLO_PROFILE=trace.json``;
``openhlo run/opt --profile-in``) feeds a Chrome trace of an earlier run (``openhlo run
--trace``) to the latency-hiding scheduler: measured times replace its estimates
(profile-guided latency estimation). The profile's content hash is part of the compilation
cache key; without the latency-hiding scheduler (level 0, ``latency_hiding`` off) it is
not used.

``env_option_overrides={"devices_per_host": N}`` describes the host to the fusion cost
model and the latency-hiding scheduler as shared by N devices computing at once
(``xla_core.cost.hardware(name, devices_per_host)``); left out, the backend fills in the
executable's devices in this process (replicas x partitions that the device assignment puts
here: ``CpuClient._compiler``), so 8 virtual devices on 2 cores are scheduled as what they
are (their collectives stay synchronous: no core is left for a communication thread).

``env_option_overrides={"memory_limit": bytes}`` (an int, or text such as ``"64MiB"``) keeps
the program's peak memory (``exe.memory_stats()["peak_bytes"]``: arguments + heap) under that
many bytes by recomputing values (xla_core's ``remat`` pass, last in the pipeline); fusion then
forms no multi-output fusions, whose one kernel would keep every value it reads (a reduction
of each layer's gradient, say) live until all of them exist. ``memory_stats()`` reports the
peak without remat too.

The pipeline is registered as ``cpu`` in xla_core's pipeline registry (by pjrt/registry.py,
lazily, next to the backend itself), so ``openhlo opt --pipeline=cpu`` runs it too (one
device per host there). xla_core's compile driver runs it, on a copy of the program (see
``xla_core/compile/driver.py``).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import replace

from xla_core.cost.profile import ProfileError, read_profile

from xla_core.buffers.remat import with_memory_limit
from xla_core.fusion import FusionPass
from xla_core.passes import Pipeline, make_pipeline, parse_pass_list
from xla_core.passes.constant_fold import ConstantFoldPass
from xla_core.quantization.quant_lower import QuantLowerPass
from xla_core.scheduling import LatencyHidingSchedulerPass

from pjrt.plugins.cpu.codegen.hook import CPU_CODEGEN

DEFAULT_OPT_LEVEL = 1
PIPELINE_OF_LEVEL = {0: None, 1: "cpu"}


def cpu_pipeline(latency_hiding: bool = True, profile: str = "",
                 devices_per_host: int = 0, fused_attention: bool = True,
                 memory_limit: int = 0) -> Pipeline:
    """The cpu backend's whole pipeline: weight-only-dot (weight-only quantized matmuls as
    one op, run by the weight-only kernels), cpu-opt (``quant-lower`` after its constant
    folding: ``_with_quant_lower``), then (with ``fused_attention``) attention
    into its composite for the native flash kernel (after cpu-opt, whose constant folding
    leaves the scale a constant), then fusion (constant folding first, so
    constant-only subprograms are folded rather than fused), dce of what fusion left, and
    the schedule last, on the fused program the executor will run. Fusion forms only what
    the cpu code generator can emit (codegen/hook.py). The schedule is XLA's sequence:
    every collective becomes an async pair again (the spmd pipeline joined those with
    nothing between them), the latency-hiding scheduler (the memory schedule where no pair
    is) moves starts early and dones late, and the pairs still with nothing between become
    synchronous, or every pair where the ``cpu`` description shared by ``devices_per_host``
    devices leaves no core for a communication thread (``convert-async-to-sync{hardware=cpu
    ...}``, before fusion as well). Without ``latency_hiding``: the memory schedule alone.
    ``profile``: a trace whose measured times the latency-hiding scheduler uses
    (``profile_of``).
    ``devices_per_host``: the devices sharing the host, for fusion's and the scheduler's
    hardware description (0: one, as ``hardware("cpu")`` describes it).
    ``memory_limit``: bytes the peak must stay under (0: no limit): no multi-output fusion,
    and ``remat`` after the schedule."""
    host = f"{{hardware=cpu devices-per-host={devices_per_host}}}"
    # where the devices leave no core for communication, every pair becomes synchronous:
    # before fusion too, whose legality would keep work in windows nothing overlaps
    schedule = (f"async-collective-creator,latency-hiding-scheduler,convert-async-to-sync{host}"
                if latency_hiding else "memory-schedule")
    first = f"convert-async-to-sync{host}," if latency_hiding else ""
    attention = "fuse-attention,dce," if fused_attention else ""
    # weight-only-dot first: constant folding and fusion would take the dequantization apart
    passes = (parse_pass_list("weight-only-dot")
              + _with_quant_lower(make_pipeline("cpu-opt").passes)
              + parse_pass_list(f"{attention}{first}fusion,dce,{schedule}"))
    if memory_limit:
        passes = with_memory_limit(passes, memory_limit)
    passes = [replace(p, codegen=CPU_CODEGEN, devices_per_host=devices_per_host)
              if isinstance(p, FusionPass) else p for p in passes]
    passes = [replace(p, profile=profile, devices_per_host=devices_per_host)
              if isinstance(p, LatencyHidingSchedulerPass) else p for p in passes]
    return Pipeline("cpu" if latency_hiding else "cpu-memory-schedule", passes)


def _with_quant_lower(passes: list) -> list:
    """``passes`` with ``quant-lower`` right after their first constant folding: quantized
    values become storage integers, their dot_generals and convolutions the int8 GEMM's
    ``i8 x i8 -> i32`` dot_generals (xla_core/quantization/integer_contraction.py), and the
    rest of cpu-opt cleans up after it. After the folding, as quantized values were never
    folded before: a program's quantized contractions run, on the integer kernels, rather
    than being evaluated at compile time. Not strict: a program with ops it does not lower
    (regions over quantized types) keeps its quantized ops for the interpreter fallbacks."""
    at = next(i for i, p in enumerate(passes) if isinstance(p, ConstantFoldPass)) + 1
    return [*passes[:at], QuantLowerPass(strict=False), *passes[at:]]


def cpu_memory_schedule_pipeline() -> Pipeline:
    """The ``cpu`` pipeline with the memory scheduler in place of the latency-hiding one."""
    return cpu_pipeline(latency_hiding=False)


def latency_hiding(options=None) -> bool:
    """Whether the compile options (else ``OPENHLO_CPU_LATENCY_HIDING``, default on) ask for
    the latency-hiding scheduler."""
    given = options.env_option_overrides.get("latency_hiding") if options is not None else None
    if given is None:
        return os.environ.get("OPENHLO_CPU_LATENCY_HIDING", "1") != "0"
    return bool(given)


def fused_attention(options=None) -> bool:
    """Whether the compile options (``env_option_overrides["fused_attention"]``, else
    ``OPENHLO_CPU_FUSED_ATTENTION``, default on) let fuse-attention run: off, attention runs
    as the math it was written as (the materialized baseline of tools/bench_attention.py)."""
    given = options.env_option_overrides.get("fused_attention") if options is not None \
        else None
    if given is None:
        return os.environ.get("OPENHLO_CPU_FUSED_ATTENTION", "1") != "0"
    return bool(given)


def profile_of(options=None) -> tuple[str, str] | None:
    """``(path, sha256 of its content)`` of the profile the compile options
    (``env_option_overrides["profile"]``, else ``OPENHLO_PROFILE``) feed the latency-hiding
    scheduler, or None. The file is read and checked here, so a missing or malformed one
    fails the compile with a ProfileError naming it and the option (a pass that fails only
    makes the pipeline be skipped)."""
    given = options.env_option_overrides.get("profile") if options is not None else None
    source = "env_option_overrides['profile']"
    if given is None:
        given, source = os.environ.get("OPENHLO_PROFILE") or None, "OPENHLO_PROFILE"
    if given is None:
        return None
    if not isinstance(given, (str, os.PathLike)):
        raise ProfileError(f"{source} must be the path of a trace file, got {given!r}")
    path = os.fspath(given)
    try:
        read_profile(path)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except ProfileError as exc:
        raise ProfileError(f"{source}: {exc}") from None
    return path, digest


def devices_per_host_of(options=None) -> int | None:
    """The devices sharing the host the compile options describe
    (``env_option_overrides["devices_per_host"]``, a positive int), or None: the backend's
    to fill in."""
    given = options.env_option_overrides.get("devices_per_host") if options is not None \
        else None
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        from pjrt.api import ArgumentError
        raise ArgumentError(f"env_option_overrides['devices_per_host'] must be a positive "
                            f"int, got {given!r}")
    return given


def memory_limit_of(options=None) -> int:
    """The peak bytes the compile options allow (``env_option_overrides["memory_limit"]``: a
    positive int, or text such as ``"64MiB"``), 0 when they set none."""
    given = options.env_option_overrides.get("memory_limit") if options is not None else None
    if given is None:
        return 0
    from pjrt.api import ArgumentError
    if isinstance(given, str):
        from xla_core.buffers.remat import RematError, parse_limit
        try:
            return parse_limit(given)
        except RematError as exc:
            raise ArgumentError(f"env_option_overrides['memory_limit']: {exc}") from None
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise ArgumentError(f"env_option_overrides['memory_limit'] must be a positive number "
                            f"of bytes or a size such as '64MiB', got {given!r}")
    return given


def pipeline_name(level: int, options=None) -> str | None:
    """The registered pipeline the cpu backend runs at ``level`` under ``options``."""
    name = PIPELINE_OF_LEVEL[level]
    if name is not None and not latency_hiding(options):
        return "cpu-memory-schedule"
    return name


def opt_level(options=None, client_level=None) -> int:
    """The level asked for: the compile options', else the client's, else the environment's,
    else the default."""
    given = options.env_option_overrides.get("opt_level") if options is not None else None
    source = "env_option_overrides['opt_level']"
    if given is None and client_level is not None:
        given, source = client_level, "opt_level"
    if given is None and os.environ.get("OPENHLO_CPU_OPT_LEVEL"):
        given, source = os.environ["OPENHLO_CPU_OPT_LEVEL"], "OPENHLO_CPU_OPT_LEVEL"
    if given is None:
        return DEFAULT_OPT_LEVEL
    try:
        level = int(given)
    except (TypeError, ValueError):
        level = -1
    if level not in PIPELINE_OF_LEVEL or isinstance(given, bool):
        from pjrt.api import ArgumentError
        raise ArgumentError(f"{source} must be one of {sorted(PIPELINE_OF_LEVEL)}, "
                            f"got {given!r}")
    return level
