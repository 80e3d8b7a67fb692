"""The compile driver: the one path from a program to what a backend runs.

    program text ──(cache hit?)──> done, nothing parsed
        │ parse (the caller, once)
    Module ──(cache hit?)──> done
        │ whole-program checks (callees, channels)
        │ SPMD partitioning, when the program runs on several partitions
        │ buffer size limits
        │ autocast (mixed precision), on a copy, when the options ask for it
        │ the backend's pipeline, on a copy
        └ the backend's code generation ──> the executable payload

The runtime contract (``pjrt``) resolves what to compile (the entry, replica and partition
counts: a ``CompileRequest``) and binds the result to devices; it does no compiler work. A
backend describes itself with a ``Backend``: its identity (keyed into the cache), the name
of its pipeline (registered in ``xla_core.passes.PIPELINES``; None: the program is
generated as given; or a function of the ``CompileRequest`` building it with this
compile's settings, e.g. the devices the executable runs on), its code
generator and its persistent cache. The program handed in is
never rewritten: partitioning and the pipeline work on copies, and a Module is never printed
back to text (the cache key is its structural fingerprint).

A pipeline that fails is a compiler bug, not the user's: the program is then generated from
the unoptimized module, with a warning naming the pass (``Compiled.pipeline_failure``).
Automatic mixed precision (``env_option_overrides={"autocast": "bf16"}``; the ``autocast``
pass, xla_core/passes/autocast.py) changes what a program computes, so it runs at every
optimization level, and only where the backend computes that type natively
(``Backend.low_precision``): elsewhere it would be slower than f32, and the request is
skipped with a warning unless ``env_option_overrides["autocast_force"]`` is true.
Passes are not re-verified one by one (the input was verified, and each pass's own tests
verify its output); ``OPENHLO_VERIFY_PASSES=1`` turns that on for debugging.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Union

from stablehlo.ir.core import Module
from xla_core.compile.fingerprint import cache_key

if TYPE_CHECKING:
    from xla_core.passes import Pipeline

LOG = logging.getLogger("openhlo.compile")


@dataclass(frozen=True)
class CompileRequest:
    """What to compile, as the runtime contract resolved it from the program and its options.

    ``options`` are the runtime's compile options as given (keyed into the cache);
    ``entry``, ``num_replicas`` and ``num_partitions`` are resolved."""
    options: object
    entry: str
    num_replicas: int = 1
    num_partitions: int = 1


@dataclass(frozen=True)
class Backend:
    """The hooks a backend fills in for the driver.

    ``identity``: the backend's name, version and every setting that changes what it
    generates (part of the cache key). ``pipeline``: a registered pipeline name, a function
    of the ``CompileRequest`` returning the ``Pipeline`` to run (one with options of this
    compile; what it reads beyond the program and the compile options belongs in
    ``identity``), or None.
    ``generate(module, request)``: the optimized module -> the backend's executable payload
    (None: the payload is the module itself). ``load_cached(key)``: ``(module, payload)`` of
    an earlier compile from the backend's persistent cache, or None; without it nothing is
    keyed. The backend stores entries itself, under ``Compiled.cache_key``, once it knows
    the payload is worth keeping. ``low_precision``: the element types (``"bf16"``) whose
    arithmetic the backend computes natively, so that autocasting to them can pay (what
    decides it, a CPU feature, belongs in ``identity``)."""
    identity: str
    pipeline: Union[str, Callable[[CompileRequest], "Pipeline"], None] = None
    generate: Optional[Callable[[Module, CompileRequest], object]] = None
    load_cached: Optional[Callable[[str], Optional[tuple]]] = None
    low_precision: frozenset = frozenset()


@dataclass
class Compiled:
    """What the driver hands the runtime.

    ``module``: the program the runtime binds (per-device when partitioned; never the
    optimized one), from which it reads the entry signature and the shardings.
    ``optimized``: the backend pipeline's output, ``payload`` what the backend generated."""
    module: Module
    optimized: Module
    payload: object
    cache_key: Optional[str] = None
    cache_hit: bool = False
    pass_seconds: list = field(default_factory=list)  # (pass name, seconds) of the pipeline
    pipeline_failure: Optional[str] = None  # "pass: error" when the pipeline was abandoned


def load_compiled(text: str, options, backend: Backend) -> Optional[Compiled]:
    """The compile of ``text`` from ``backend``'s persistent cache, without parsing it, or
    None."""
    if backend.load_cached is None:
        return None
    return _from_cache(cache_key(text, options, backend.identity), backend)


def compile_module(module: Module, request: CompileRequest, backend: Backend, *,
                   text: Optional[str] = None) -> Compiled:
    """Compile ``module`` (verified; parsed from ``text`` when the program came as text) for
    ``backend``. Raises the checks' VerificationError and BufferLimitError, and
    ``ShardingError`` / ``SpmdUnsupportedError`` for what partitioning cannot do."""
    key = None
    if backend.load_cached is not None:
        key = cache_key(text if text is not None else module, request.options,
                        backend.identity)
        if text is None:  # text was looked up before it was parsed
            cached = _from_cache(key, backend)
            if cached is not None:
                return cached
    # Here for every backend: a call of a declaration or a recv no op sends to would fail
    # far from its cause (in a lowering, or at the collective timeout).
    from xla_core.program_checks import check_program
    check_program(module)
    if request.num_partitions > 1:
        # A Module of the caller's is left as given; one parsed here from text is ours.
        module = partition(module if text is not None else _copy(module), request.entry,
                           request.num_partitions, collective_pipelining(request.options),
                           spmd_reduce_scatter(request.options))
    # Before any backend compiler materializes a value.
    from xla_core.buffers.size_limit import check_buffer_sizes
    check_buffer_sizes(module)
    compiled = _optimize(module, backend.pipeline, request, autocast_pass(request.options,
                                                                          backend))
    compiled.cache_key = key
    compiled.payload = (compiled.optimized if backend.generate is None
                        else backend.generate(compiled.optimized, request))
    return compiled


def partition(module: Module, entry: str, num_partitions: int,
              pipeline_collectives: bool = True, reduce_scatter: bool = False) -> Module:
    """``module`` (a global sharded program) rewritten in place into its per-device program
    by the ``spmd`` pipeline: shard_map/pmap bodies become the entry, other sharded
    programs are propagated and partitioned (``pipeline_collectives``: see
    ``collective_pipelining``; ``reduce_scatter``: see ``spmd_reduce_scatter``)."""
    from xla_core.passes import PassContext, spmd_pipeline
    spmd_pipeline(entry, num_partitions, pipeline_collectives=pipeline_collectives,
                  reduce_scatter=reduce_scatter).run(module, PassContext())
    return module


def collective_pipelining(options) -> bool:
    """Whether loops' collectives are pipelined across iterations (the spmd pipeline's
    collective-pipeliner): ``env_option_overrides["collective_pipelining"]`` of the compile
    options, a bool, true when not given."""
    return _bool_override(options, "collective_pipelining", True)


def spmd_reduce_scatter(options) -> bool:
    """Whether the partitioner reduce-scatters partial sums whose result is split over the
    summed axes (FSDP's gradients) instead of all-reducing and slicing them, XLA's cpu
    form: ``env_option_overrides["spmd_reduce_scatter"]`` of the compile options, a bool,
    false when not given."""
    return _bool_override(options, "spmd_reduce_scatter", False)


_skipped_autocasts: set = set()  # (backend identity, dtype) warned about


def autocast_pass(options, backend: Backend):
    """The ``autocast`` pass ``env_option_overrides["autocast"]`` of the compile options asks
    for (a low-precision type name such as ``"bf16"``; absent, empty or ``"none"``: None), or
    None where ``backend`` does not compute that type natively and
    ``env_option_overrides["autocast_force"]`` is not true (logged once per backend and
    type). A bad value raises PassError."""
    from xla_core.passes import PassError, make_pass
    overrides = getattr(options, "env_option_overrides", None) or {}
    dtype = overrides.get("autocast")
    if dtype is None or dtype in ("", "none"):
        return None
    if not isinstance(dtype, str):
        raise PassError(f"env_option_overrides['autocast'] must be a type name such as "
                        f"'bf16', got {dtype!r}")
    autocast = make_pass("autocast", {"dtype": dtype})
    if dtype in backend.low_precision or _bool_override(options, "autocast_force", False):
        return autocast
    if (backend.identity, dtype) not in _skipped_autocasts:
        _skipped_autocasts.add((backend.identity, dtype))
        LOG.warning("autocast to %s skipped: this backend computes no %s arithmetic natively, "
                    "so it would run slower than f32 (env_option_overrides['autocast_force']"
                    "=True applies it anyway)", dtype, dtype)
    return None


def _bool_override(options, name: str, default: bool) -> bool:
    overrides = getattr(options, "env_option_overrides", None) or {}
    given = overrides.get(name, default)
    if not isinstance(given, bool):
        from xla_core.passes import PassError
        raise PassError(f"env_option_overrides[{name!r}] must be a bool, got {given!r}")
    return given


def _from_cache(key: str, backend: Backend) -> Optional[Compiled]:
    hit = backend.load_cached(key)
    if hit is None:
        return None
    module, payload = hit
    return Compiled(module, module, payload, cache_key=key, cache_hit=True)


def _optimize(module: Module, spec: Union[str, Callable[[CompileRequest], "Pipeline"], None],
              request: CompileRequest, autocast=None) -> Compiled:
    """``module`` through the ``autocast`` pass, if given, then the pipeline ``spec`` names
    or builds for ``request``, on copies (``Compiled.payload`` left unset). A pipeline that
    fails leaves the autocast program; an autocast that fails, the program as given."""
    from xla_core.passes import PassContext, make_pipeline
    source = module
    if autocast is not None:
        source = _copy(module)
        try:
            autocast.run(source, PassContext())
        except Exception as exc:  # noqa: BLE001 - a pass bug: compile at full precision
            LOG.warning("the autocast pass failed; compiling without it: %s: %s",
                        type(exc).__name__, exc)
            source = module
    if spec is None:
        return Compiled(module, source, None)
    copy = _copy(source)
    ctx = PassContext(verify=os.environ.get("OPENHLO_VERIFY_PASSES") == "1")
    pipeline = make_pipeline(spec) if isinstance(spec, str) else spec(request)
    pipeline_name = pipeline.name
    start = time.perf_counter()
    try:
        pipeline.run(copy, ctx)
    except Exception as exc:  # noqa: BLE001 - any pass bug: generate the program unoptimized
        failed = pipeline.passes[min(len(ctx.records), len(pipeline.passes) - 1)].name
        LOG.warning("the %s pipeline failed in pass %s; compiling unoptimized: %s: %s",
                    pipeline_name, failed, type(exc).__name__, exc)
        return Compiled(module, source, None, pipeline_failure=f"{failed}: {exc}")
    LOG.debug("%s pipeline: %.1f ms", pipeline_name, 1e3 * (time.perf_counter() - start))
    return Compiled(module, copy, None, pass_seconds=[(r.name, r.seconds) for r in ctx.records])


def _copy(module: Module) -> Module:
    from xla_core.ir_utils import clone_operation
    return Module(clone_operation(module.op, {}))
