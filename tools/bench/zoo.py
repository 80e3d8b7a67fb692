"""``openhlo bench --zoo``: the model zoo through openhlo, Inductor and eager PyTorch.

For each model of ``frameworks.torch.models.zoo`` (the zoo, or with ``--heldout`` the
held-out set; in this process, one model after the other):

* **compile (cold)**: ``torch.compile`` with the openhlo backend and with Inductor, each on
  its own copy of the model after ``torch._dynamo.reset()``; the first call is timed (Dynamo,
  AOTAutograd, the backend's compile, one run). Cold: every model gets a fresh
  ``OPENHLO_CACHE_DIR`` and Inductor's caches are disabled; both backends first compile a
  trivial function, so one-time imports are not charged to the first model. openhlo also
  reports ``optimized_s``: until its background-compiled kernels are in place (tiered
  compilation, pjrt/plugins/cpu/tiering.py); timing starts after that.
* **check**: outputs (forward, eval mode, ``no_grad``) and, with ``--train``, the loss and
  every parameter's gradient of one training step (train mode, loss =
  ``models.loss_of``, a weighted mean square of the first output, ``backward``, SGD)
  against a float64 eager run of the same model and inputs; for openhlo both of the first
  call (op by op) and of a call from the same weights once the generated kernels are in
  place (what is timed). A tensor passes when its error (max |x - float64| / max |float64|,
  Note [Zero references] where float64's is exactly 0) is at most
  ``TOL_FACTOR`` x float32 eager's own error on it plus ``TOL_FLOOR``: eager float32 is the
  bar, so a result that eager itself gets only roughly (batch statistics over 2 images of
  1x1 feature maps) does not fail a correct backend, while an error well above eager's does.
  Eager's error is the largest of three float32 runs: on the inputs and weights as given,
  and nudged up and down by about an ulp (Note [Eager's own error]). A backend that fails
  is run on the same two nudged copies too, and each tensor is judged by the closest of its
  three results (Note [A backend's own side of a kink]).
* **fallbacks**: ops the openhlo backend ran in eager PyTorch (pjrt's metrics), ops the
  cpu backend left to the interpreter (its ``openhlo.cpu`` log) and optimization pipelines
  abandoned for the unoptimized program (a pass's internal error, ``openhlo.compile``'s
  log), during compile and the calls that are judged.
* **time**: forward (and the training step) of eager, Inductor and openhlo, interleaved
  (tools/bench/timing.py), medians; ratios openhlo / Inductor and openhlo / eager.

A model whose library (torchvision, timm, transformers) is not installed is skipped.
"""
from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

TOL_FACTOR = 10.0
TOL_FLOOR = 1e-5
BACKENDS = ("openhlo", "inductor")
# --accuracy: openhlo alone, checked and its fallbacks listed, nothing timed (as the
# --accuracy mode of PyTorch's own benchmark scripts): a check of a whole zoo with training
# steps in the time Inductor's training compiles alone would take
ACCURACY_BACKENDS = ("openhlo",)
LR = 0.01
# the relative size of the nudges of Note [Eager's own error]: float32's ulp at 1
NUDGE = 2.0 ** -23

# Note [Eager's own error]
#     One float32 eager run measures float32's error only where the result is a smooth
#     function of the rounding. Where a value sits within rounding noise of a kink, the
#     side it lands on decides whole gradients: in ShuffleNet v2's last batch norm (8
#     values per channel) a ReLU input is x - mean = -8.5e-6 in float64 at x = 0.34, and
#     float32's rounding moves it by about as much. Eager as given lands on float64's side
#     by luck (gradients 5e-5 off); eager in channels_last, or on inputs nudged by an ulp,
#     does not (3e-2 off), nor does a backend that rounds as well as eager but differently.
#     So the bar is the largest error of three eager runs: on the inputs and weights as
#     given, and with every element times 1 + NUDGE * r and 1 - NUDGE * r (r a seeded
#     normal draw). Opposite nudges put such a value on both sides of its kink; a smooth
#     result moves by its condition number times NUDGE, as under eager's own rounding.


# Note [A backend's own side of a kink]
#     Eager's nudged runs widen the bar where eager itself crosses a kink, but a backend that
#     rounds differently can sit on the far side of a kink that none of eager's three runs
#     crosses. In torchvision's MNASNet 0.5 a ReLU input is 1.6e-7 of its tensor's scale
#     (under 3 float32 ulps) and decides a batch-norm weight's gradient: on an AVX2 machine
#     openhlo's gradient was 0.0999 off as given and nudged up, 0.00045 off nudged down,
#     while eager was 0.0065 off in all three runs (Inductor 0.0067, and openhlo in float64
#     1.6e-12). So a backend that fails is also run on the two nudged copies, and a tensor
#     passes when the closest of its three results is within the bar. A wrong kernel or a
#     precision loss is wrong on all three inputs; a side of a kink chosen by rounding moves
#     with an ulp's nudge.


# Note [Zero references]
#     A gradient can be exactly 0 in float64 and in float32 eager while being a sum of
#     terms that cancel: in timm's ReXNet the squeeze-excite's fc1 feeds a batch norm over
#     2 images of 1x1 maps, so fc1's bias gradient is (dy1 - m) + (dy2 - m) with m their
#     mean, which eager's batch-norm backward rounds to exactly 0. A backend that rounds
#     the same sum in another order gets rounding noise instead, and relative to the
#     reference's own scale (0) that is an infinite error. The scale of such a tensor is
#     therefore the largest scale in the same result (the largest of the step's loss and
#     gradients, or of the outputs): rounding noise passes, a gradient that is wrong by a
#     meaningful amount does not.


def relative_error(got, want, scale: float | None = None) -> float:
    """max |got - want| / ``scale`` (want: the float64 reference; scale: max |want| unless
    given, Note [Zero references]; 0 / 0 counts as 0)."""
    import torch
    got, want = got.detach().double(), want.detach().double()
    if want.numel() == 0:
        return 0.0
    if scale is None:
        scale = float(want.abs().max())
    diff = float((got - want).abs().max())
    if diff != diff:  # NaN somewhere: wrong unless the reference has NaN there too
        same = torch.isnan(got) == torch.isnan(want)
        return 0.0 if bool(same.all()) and scale == scale else float("inf")
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def reference_scales(reference: dict) -> dict:
    """Per tensor of ``reference``: the scale its errors are relative to, max |want|, or
    where that is 0 the largest of them (Note [Zero references])."""
    scales = {key: float(want.detach().abs().max()) if want.numel() else 0.0
              for key, want in reference.items()}
    largest = max(scales.values(), default=0.0)
    return {key: scale if scale > 0 else largest for key, scale in scales.items()}


def judge(named: dict, eager_errors: dict, reference: dict) -> dict:
    """{"ok", "error", "eager_error", "worst"} of tensors ``named`` (name -> tensor) against
    the float64 ``reference``, with float32 eager's own errors (name -> error, from
    ``references``) as the bar."""
    worst, result = -1.0, {"ok": True, "error": 0.0, "eager_error": 0.0, "worst": None}
    scales = reference_scales(reference)
    for key, want in reference.items():
        got = named.get(key)
        if got is None or tuple(got.shape) != tuple(want.shape):
            return {"ok": False, "error": float("inf"), "eager_error": 0.0, "worst": key,
                    "message": f"{key}: missing or shape mismatch"}
        error = relative_error(got, want, scales[key])
        eager_error = eager_errors[key]
        allowed = TOL_FACTOR * eager_error + TOL_FLOOR
        excess = error / allowed
        if excess > worst:
            worst = excess
            result.update(error=error, eager_error=eager_error, worst=key)
        if error > allowed:
            result["ok"] = False
    return result


def closest_of_runs(runs: list[dict], reference: dict) -> dict:
    """Per tensor of ``reference``, the result of ``runs`` (name -> tensor each, results of
    the same computation on nudged inputs) closest to it: Note [A backend's own side of a
    kink]."""
    scales = reference_scales(reference)
    closest = {}
    for key, want in reference.items():
        candidates = [run[key] for run in runs
                      if key in run and tuple(run[key].shape) == tuple(want.shape)]
        if candidates:
            closest[key] = min(candidates,
                               key=lambda got: relative_error(got, want, scales[key]))
    return closest


def _leaves(outputs) -> dict:
    from torch.utils._pytree import tree_flatten
    import torch
    return {f"output{i}": t for i, t in enumerate(tree_flatten(outputs)[0])
            if isinstance(t, torch.Tensor) and t.is_floating_point()}


def _as_double(x):
    import torch
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


class _CompileLogs(logging.Handler):
    """Collects what the cpu backend left to the interpreter (its ``openhlo.cpu`` log: op
    names) and the optimization pipelines it abandoned for the unoptimized program (the
    compile driver's ``openhlo.compile`` log: "pass: error")."""

    LOGGERS = ("openhlo.cpu", "openhlo.compile")

    def __init__(self):
        super().__init__(logging.INFO)
        self.ops: dict[str, str] = {}
        self.pipeline_failures: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if record.name == "openhlo.compile":
            failed = re.search(r"failed in pass (\S+); compiling unoptimized: (.*)", message)
            failure = f"{failed[1]}: {failed[2]}"[:200] if failed else None
            if failure and failure not in self.pipeline_failures:
                self.pipeline_failures.append(failure)
        elif "interpreter" in message:
            found = re.search(r"'([\w.]+)'", message)
            op = found.group(1) if found else message.split(":")[0]
            self.ops.setdefault(op, message[:300])

    def __enter__(self):
        self._levels = []
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            self._levels.append(logger.level)
            logger.setLevel(logging.INFO)
            logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        for name, level in zip(self.LOGGERS, self._levels):
            logger = logging.getLogger(name)
            logger.removeHandler(self)
            logger.setLevel(level)


def _backend(name: str):
    if name == "openhlo":
        from frameworks.torch.backend import openhlo_backend
        return openhlo_backend
    return "inductor"


def _warm_up() -> None:
    """Each backend compiles a trivial function: its one-time costs belong to no model."""
    import torch

    from pjrt.plugins.cpu import tiering
    for name in BACKENDS:
        torch._dynamo.reset()
        torch.compile(lambda x: (torch.sin(x) * 2,), backend=_backend(name))(torch.zeros(7))
    tiering.wait_all()


def _step(model, optimizer, inputs):
    """One training step; (loss, {parameter name: gradient})."""
    from frameworks.torch.models import loss_of
    optimizer.zero_grad(set_to_none=True)
    outputs = model(*inputs)
    loss = loss_of(outputs if isinstance(outputs, tuple) else (outputs,))
    loss.backward()
    optimizer.step()
    return loss.detach(), outputs


def _train_state(module, loss) -> dict:
    named = {"loss": loss}
    named.update({f"grad {n}": p.grad for n, p in module.named_parameters()
                  if p.grad is not None})
    return named


class _Mode:
    """Forward (eval, no_grad) or training step (train): how to run a module and what of it
    to compare."""

    def __init__(self, train: bool, inputs):
        self.train, self.inputs = train, inputs

    def prepare(self, module, run=None) -> Callable[[], dict]:
        """A call of ``run`` (the compiled ``module``, else ``module``) returning the
        tensors to compare."""
        import torch
        run = module if run is None else run
        if not self.train:
            module.eval()

            def forward():
                with torch.no_grad():
                    return _leaves(run(*self.inputs))
            return forward
        module.train()
        optimizer = torch.optim.SGD(module.parameters(), lr=LR)

        def step():
            loss, _ = _step(run, optimizer, self.inputs)
            return _train_state(module, loss)
        return step


def references(model, inputs, train: bool) -> tuple[dict, dict]:
    """(float64 eager's tensors, float32 eager's own error on each: the largest of the runs
    on the inputs and weights as given and nudged up and down, Note [Eager's own error]) of
    the forward or the training step, each on its own copy of ``model``."""
    reference = _Mode(train, tuple(map(_as_double, inputs))).prepare(
        copy.deepcopy(model).double())()
    errors = dict.fromkeys(reference, 0.0)
    scales = reference_scales(reference)
    for direction in (0, 1, -1):
        nudged_model, nudged_inputs = _nudged(model, inputs, direction)
        eager = _Mode(train, nudged_inputs).prepare(nudged_model)()
        for key, want in reference.items():
            errors[key] = max(errors[key], relative_error(eager[key], want, scales[key]))
    return reference, errors


def _nudged(model, inputs, direction: int) -> tuple:
    """Copies of ``model`` and ``inputs`` whose floating-point tensors (parameters, buffers,
    inputs) are multiplied by ``1 + direction * NUDGE * r``; the same draws ``r`` for every
    direction."""
    import torch
    model = copy.deepcopy(model)
    if direction == 0:
        return model, inputs
    generator = torch.Generator().manual_seed(0)

    def nudge(t):
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return t
        r = torch.randn(t.shape, generator=generator, dtype=torch.float64)
        return (t.double() * (1 + direction * NUDGE * r)).to(t.dtype)
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            tensor.copy_(nudge(tensor))
    return model, tuple(map(nudge, inputs))


def run_backend(backend: str, model, inputs, train: bool, eager_errors: dict,
                reference: dict, log: Callable[[str], None]) -> tuple[dict, Callable | None]:
    """Compile a copy of ``model`` on ``backend``, time its first call, judge its results;
    for openhlo also the fallbacks and the time until its kernels are in place. Returns the
    record and the call to time (None if it failed)."""
    import pjrt
    entry = {"status": "ok"}
    pjrt.reset_metrics()
    try:
        with _CompileLogs() as logs:
            results, times, call = _run_compiled(backend, model, inputs, train)
            entry.update(times)
            verdicts = [judge(got, eager_errors, reference) for got in results]
            if not all(v["ok"] for v in verdicts):  # Note [A backend's own side of a kink]
                entry["judged_nudged"] = True
                nudged = [_run_compiled(backend, *_nudged(model, inputs, d), train)[0]
                          for d in (1, -1)]
                verdicts = [judge(closest_of_runs([got, *(n[i] for n in nudged)], reference),
                                  eager_errors, reference) for i, got in enumerate(results)]
    except Exception as exc:  # noqa: BLE001 - a model a backend cannot run is a result
        entry.update(status="error", message=f"{type(exc).__name__}: {exc}"[:500])
        log(f"    ERROR {backend}: {entry['message']}")
        return entry, None
    if backend == "openhlo":
        entry["eager_fallbacks"] = dict(pjrt.metrics().fallbacks)
        entry["interpreter_fallbacks"] = sorted(logs.ops)
        entry["pipeline_failures"] = logs.pipeline_failures
    entry.update(next((v for v in verdicts if not v["ok"]), verdicts[0]))
    if entry.get("judged_nudged") and entry["ok"]:
        log(f"    {backend}: within the bar on the closest of its 3 nudged runs "
            f"(Note [A backend's own side of a kink])")
    if not entry["ok"]:
        entry["status"] = "mismatch"
        log(f"    MISMATCH {backend}: {entry['worst']}: error {entry['error']:.3g}, "
            f"eager's {entry['eager_error']:.3g}")
    return entry, call


def _run_compiled(backend: str, model, inputs, train: bool) -> tuple[list, dict, Callable]:
    """Compiles a copy of ``model`` on ``backend`` and calls it: (the tensors to judge of
    each call, {"compile_s": the first call's time, and for openhlo "optimized_s": until its
    kernels were in place}, the call)."""
    import torch

    from pjrt.plugins.cpu import tiering
    module = copy.deepcopy(model)
    initial = copy.deepcopy(module.state_dict())
    call = _Mode(train, inputs).prepare(module, torch.compile(module, backend=_backend(backend)))
    start = time.perf_counter()
    results = [call()]
    times = {"compile_s": time.perf_counter() - start}
    if backend == "openhlo":
        tiering.wait_all()
        times["optimized_s"] = time.perf_counter() - start
        # the first call ran op by op; what is timed runs the generated kernels: judge that
        # too, from the same weights (the step changed them)
        module.load_state_dict(initial)
        results.append(call())
    return results, times, call


def _measure_mode(model, inputs, train: bool, budget: float, log,
                  accuracy: bool = False) -> dict:
    import torch

    from tools.bench.timing import interleaved_medians
    reference, eager_errors = references(model, inputs, train)
    result = {"backends": {}, "eager": {}}
    calls = {"eager": _Mode(train, inputs).prepare(copy.deepcopy(model))}
    torch._dynamo.reset()
    for backend in ACCURACY_BACKENDS if accuracy else BACKENDS:
        result["backends"][backend], call = run_backend(backend, model, inputs, train,
                                                        eager_errors, reference, log)
        if call is not None:
            calls[backend] = call
    if accuracy:
        return result
    timings = interleaved_medians(calls, budget, min_samples=3)
    for runner, timing in timings.items():
        target = result["eager"] if runner == "eager" else result["backends"][runner]
        target.update(median_s=timing["median_s"], min_s=timing["min_s"],
                      max_s=timing["max_s"])
    log("    " + ", ".join(f"{runner} {t['median_s'] * 1e3:.3g} ms"
                           for runner, t in timings.items()))
    return result


def measure_model(name: str, *, train: bool, budget: float, cache_root: str,
                  log: Callable[[str], None], accuracy: bool = False) -> dict:
    """One model: forward (and training step) on every backend. A JSON-ready record."""
    from frameworks.torch.models.zoo import ZOO, build_zoo_model
    from tools.bench.runners import use_torch_cache_root
    record = {"name": name, "library": ZOO.get(name).library,
              "load_average": os.getloadavg()[0]}
    try:
        model, inputs = build_zoo_model(name)
    except ImportError as exc:
        record.update(status="skipped", message=f"{ZOO.get(name).library} is not installed "
                                                f"({exc})")
        log(f"    skipped: {record['message']}")
        return record
    record["parameters"] = sum(p.numel() for p in model.parameters())
    record["status"] = "ok"
    from torch._inductor.utils import clear_caches
    use_torch_cache_root(os.path.join(cache_root, name))  # cold: nothing cached yet...
    clear_caches()  # ... and Inductor looks there, not in what it remembers of the last
    modes = ("forward", "train") if train else ("forward",)
    for mode in modes:
        log(f"  {mode}")
        record[mode] = _measure_mode(model, inputs, mode == "train", budget, log, accuracy)
    return record


def run_zoo(names: list[str], *, train: bool = False, heldout: bool = False,
            budget: float = 1.0, threads: int | None = None, accuracy: bool = False,
            on_model: Callable[[dict], None] = lambda report: None,
            log: Callable[[str], None] = lambda line: print(line, file=sys.stderr,
                                                            flush=True)) -> dict:
    """Everything ``openhlo bench --zoo`` measures, as one JSON-ready dict; ``on_model`` gets
    the report so far after each model (a long run can be stopped and still reported).
    ``heldout``: ``names`` are of the held-out set (recorded in the report).
    ``threads``: PyTorch's thread count (eager and Inductor's kernels), else its default.
    ``accuracy``: openhlo alone, checked, not timed (``ACCURACY_BACKENDS``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import torch._inductor.config
    # one compile worker: a pool of them takes the cores from the timings that follow
    torch._inductor.config.compile_threads = 1
    if threads is not None:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    cache_root = tempfile.mkdtemp(prefix="openhlo-zoo-")
    from tools.bench.runners import use_torch_cache_root
    records = []
    report = {"versions": _versions(), "cores": os.cpu_count(),
              "torch_threads": torch.get_num_threads(),
              "load_average": {"start": load_before}, "train": train, "heldout": heldout,
              "accuracy": accuracy,
              "budget_s": budget,
              "tolerance": {"factor": TOL_FACTOR, "floor": TOL_FLOOR}, "models": records}
    try:
        use_torch_cache_root(os.path.join(cache_root, "warm-up"))
        step = time.perf_counter()
        _warm_up()
        log(f"[setup] backends warmed up ({time.perf_counter() - step:.1f} s)")
        for i, name in enumerate(names, 1):
            log(f"[{i}/{len(names)}] {name} (load {os.getloadavg()[0]:.1f})")
            step = time.perf_counter()
            records.append(measure_model(name, train=train, budget=budget,
                                         cache_root=cache_root, log=log, accuracy=accuracy))
            log(f"  ({time.perf_counter() - step:.1f} s)")
            report["load_average"]["end"] = os.getloadavg()[0]
            report["wall_s"] = time.perf_counter() - started
            on_model(report)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    return report


def _versions() -> dict:
    from importlib import metadata
    versions = {"python": sys.version.split()[0]}
    for package in ("torch", "torchvision", "timm", "transformers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions
