"""The runners of ``openhlo bench`` and the compilation caches they use.

Every runner takes the workload's numpy inputs and returns numpy outputs (numpy in, numpy
out: what a user of each stack pays per call). ``prepare`` compiles one workload and
reports the compile time and the peak memory the runner can tell:

* ``openhlo``: the JAX function's StableHLO (``jax.jit(f).lower(...).as_text()``),
  compiled by ``pjrt.make_client("cpu").compile(text)``; compile time = that call (parse
  included); memory = ``exe.memory_stats()["peak_bytes"]`` (the cpu executable's buffer
  assignment: always there);
* ``xla``: ``jax.jit``; compile time = ``lowered.compile()`` (tracing and lowering excluded,
  as for openhlo); memory = ``memory_analysis()``: arguments + outputs + temporaries -
  aliased (n/a where jax gives no memory analysis);
* ``torch_eager``: no compile; ``inductor``: ``torch.compile`` (default backend), compile
  time = first call - second call (it compiles lazily, on the first call). Memory for both:
  arguments + the peak of bytes held by PyTorch's CPU allocator during one call, from the
  profiler's allocation events (n/a where that private event tree is missing).
* ``jax_plugin`` (not run unless asked for): the openhlo runtime again, reached through
  JAX's PJRT plugin (frameworks/jax): ``jax.jit`` on ``jax.devices("openhlo")``, inputs
  placed there once with ``device_put``, each call ending in ``block_until_ready`` (jax
  arrays out: the figure is what a JAX user pays per call, set against ``openhlo``'s
  direct call); compile time = ``lowered.compile()`` on that device (after ``openhlo``'s
  compile of the same program, its kernels come from the cache); memory: n/a (the plugin
  reports none).

Each runner's ``peak_memory`` says in a line what its peak-memory figure is (the report's
footnote).

``use_cache_root`` points all three persistent compilation caches (OpenHLO's kernel cache,
JAX's compilation cache, TorchInductor's cache) at one folder, so a fresh folder gives
cold compiles and a second process on the same folder gives cached ones.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from tools.bench.workloads import Instance

RUNNERS = ("openhlo", "xla", "torch_eager", "inductor")   # the default selection
OPTIONAL_RUNNERS = ("jax_plugin",)                          # run when named


def _jax_platforms(runners: Iterable[str]) -> str:
    """cpu first (the default device, where the reference results are computed), then the
    openhlo plugin when ``jax_plugin`` runs and the plugin library is built (else that
    runner's setup says why it cannot run)."""
    if "jax_plugin" not in runners:
        return "cpu"
    from frameworks.jax import plugin
    from pjrt.c_api import loader
    if loader.library_path() is None:
        return "cpu"
    plugin.initialize()  # the jax_plugins entry point does it too, where installed
    return f"cpu,{plugin.PLATFORM}"


def use_cache_root(root: str, runners: Iterable[str] = ()) -> None:
    """Send every compilation cache to subfolders of ``root``; call before compiling, and
    before JAX starts its backends (``runners``: the names run, which decide them).

    The hardware calibration (a measurement of the machine, not a compiled artifact) is
    copied along so a cold compile does not include re-measuring the machine.
    """
    use_torch_cache_root(root)
    import jax
    jax.config.update("jax_platforms", _jax_platforms(runners))
    jax.config.update("jax_compilation_cache_dir", os.path.join(root, "jax"))
    # cache every executable, however quick to compile or small
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def use_torch_cache_root(root: str) -> None:
    """``use_cache_root`` without JAX: openhlo's and Inductor's caches under ``root`` (the
    hardware calibration copied along)."""
    from xla_core.cost import calibrate
    known = calibrate.cache_path()
    os.environ["OPENHLO_CACHE_DIR"] = os.path.join(root, "openhlo")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    if os.path.exists(known) and not os.path.exists(calibrate.cache_path()):
        os.makedirs(os.path.dirname(calibrate.cache_path()), exist_ok=True)
        shutil.copyfile(known, calibrate.cache_path())


def lower(instance: Instance):
    """``jax.jit(f).lower(*inputs)`` of a workload: shared by openhlo, xla and the costs."""
    import jax
    return jax.jit(instance.jax_fn).lower(*instance.inputs)


@dataclass
class Prepared:
    call: Callable[[], list]      # runs the workload on its inputs, numpy outputs
    compile_s: float | None       # None: the runner does not compile
    peak_bytes: Callable[[], int | None]  # measured on demand; None: the runner cannot tell
    optimized_s: float | None = None  # openhlo: until its background-compiled kernels were in


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _warm_up_instance() -> Instance:
    """An unrelated tiny program: compiling it pays a runner's one-time costs (imports,
    native libraries, backend start), which belong to no workload's compile time."""
    import jax.numpy as jnp
    return Instance((np.zeros(7, np.float32),), lambda x: (jnp.sin(x) * 2,), None)


def warm_up_program():
    """An unrelated tiny program: compiling it first pays a compiler's one-time costs (shared by
    the runners and tools/bench_compile.py)."""
    return lower(_warm_up_instance())


class OpenHLORunner:
    name = "openhlo"
    compiles = True
    peak_memory = ("exe.memory_stats()['peak_bytes']: arguments + the packed heap of "
                   "temporaries of the cpu executable's buffer assignment")

    def setup(self) -> None:
        import pjrt
        self.client = pjrt.make_client("cpu")
        self.client.compile(warm_up_program().as_text())

    def prepare(self, instance: Instance, lowered) -> Prepared:
        text = lowered.as_text()
        start = time.perf_counter()
        exe = self.client.compile(text)
        seconds = time.perf_counter() - start
        # compile returns a runnable program; its generated kernels may still be compiling
        # in the background (pjrt/plugins/cpu/tiering.py): measure the program with them.
        exe.wait_optimized()
        optimized = time.perf_counter() - start
        inputs = instance.inputs
        peak = exe.memory_stats()["peak_bytes"]
        return Prepared(lambda: exe(*inputs), seconds, lambda: peak, optimized)


class XlaRunner:
    name = "xla"
    compiles = True
    peak_memory = ("memory_analysis(): arguments + outputs + temporaries - aliased "
                   "(n/a where jax gives none)")

    def setup(self) -> None:
        warm_up_program().compile()

    def prepare(self, instance: Instance, lowered) -> Prepared:
        import jax
        compiled, seconds = _timed(lowered.compile)
        memory = compiled.memory_analysis()
        peak = None
        if memory is not None:
            peak = int(memory.argument_size_in_bytes + memory.output_size_in_bytes
                       + memory.temp_size_in_bytes - memory.alias_size_in_bytes)
        jitted, inputs = jax.jit(instance.jax_fn), instance.inputs
        jitted(*inputs)  # its own compile (a persistent-cache hit by now), not timed
        return Prepared(lambda: [np.asarray(o) for o in jitted(*inputs)], seconds,
                        lambda: peak)


class JaxPluginRunner:
    """The openhlo runtime through JAX: ``JAX_PLATFORMS=openhlo``'s path, next to ``openhlo``.

    Its kernels are waited for as ``openhlo``'s are (``exe.wait_optimized()`` there,
    ``loader.wait_optimized()`` here); the timing's warm-up calls then hand the executable
    to the plugin's C fast path where the program can take it.
    """
    name = "jax_plugin"
    compiles = True
    peak_memory = "n/a (the plugin reports no memory figure)"

    def setup(self) -> None:
        import jax

        from frameworks.jax import plugin
        from pjrt.c_api import loader
        if loader.library_path() is None:
            raise RuntimeError("pjrt/c_api/_openhlo_pjrt*.so is not built (pip install .)")
        self.device = jax.devices(plugin.PLATFORM)[0]  # registered by use_cache_root
        self._prepare(_warm_up_instance())

    def prepare(self, instance: Instance, lowered) -> Prepared:
        return self._prepare(instance)

    def _prepare(self, instance: Instance) -> Prepared:
        import jax

        from pjrt.c_api import loader
        inputs = [jax.device_put(a, self.device) for a in instance.inputs]
        jitted = jax.jit(instance.jax_fn)
        lowered = jitted.lower(*inputs)  # as xla: tracing and lowering not timed
        start = time.perf_counter()
        lowered.compile()
        seconds = time.perf_counter() - start
        jitted(*inputs)  # the jit's own compile (cache hits by now), not timed
        loader.wait_optimized()
        optimized = time.perf_counter() - start

        def call():
            return jax.block_until_ready(jitted(*inputs))
        return Prepared(call, seconds, lambda: None, optimized)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2: the profiler's C++ side logs each start and stop there."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _torch_peak_bytes(fn, inputs) -> int | None:
    """Arguments + the peak of bytes held by PyTorch's CPU allocator during one call.

    The profiler records every allocation with the allocator's running total (counted from
    the profiler's start, so the arguments allocated before are added). Its event tree is
    a private API: where it is missing, the figure is None (n/a).
    """
    from torch.profiler import ProfilerActivity, profile
    try:
        from torch._C._profiler import _EventType
    except ImportError:
        return None
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    peak, stack = 0, list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            peak = max(peak, node.extra_fields.total_allocated)
        stack.extend(node.children)
    return sum(a.nbytes for a in inputs) + peak


class _TorchRunner:
    compiles = False
    peak_memory = ("arguments + the peak of torch's CPU allocator during one call, from the "
                   "profiler (n/a where its event tree is missing)")

    def setup(self) -> None:
        import torch
        self.torch = torch
        if self.compiles:  # as warm_up_program, for torch.compile
            torch.compile(lambda x: (torch.sin(x) * 2,))(torch.zeros(7))

    def prepare(self, instance: Instance, lowered) -> Prepared:
        torch = self.torch
        fn = torch.compile(instance.torch_fn) if self.compiles else instance.torch_fn
        inputs = instance.inputs

        def call():
            return [o.detach().numpy() for o in fn(*(torch.from_numpy(a) for a in inputs))]
        seconds = None
        if self.compiles:
            _, first = _timed(call)
            _, second = _timed(call)
            seconds = max(first - second, 0.0)
        return Prepared(call, seconds, lambda: _torch_peak_bytes(call, inputs))


class TorchEagerRunner(_TorchRunner):
    name = "torch_eager"


class InductorRunner(_TorchRunner):
    name = "inductor"
    compiles = True


RUNNER_CLASSES = {cls.name: cls for cls in
                  (OpenHLORunner, XlaRunner, TorchEagerRunner, InductorRunner, JaxPluginRunner)}
