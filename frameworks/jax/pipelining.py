"""Pipeline parallelism for JAX on openhlo devices: stage functions plus a schedule.

    from frameworks.jax.pipelining import Pipeline
    pipe = Pipeline([stage0, stage1, stage2, stage3], loss_fn, n_microbatches=8,
                    schedule="1f1b")                     # or "gpipe"
    result = pipe.step(params, x, target)                # params: one pytree per stage
    result.loss, result.grads, result.outputs

A stage function is ``(params, x) -> y``; ``loss_fn(y, target)`` of the last stage's output is
a scalar. Stage s runs on ``devices[s]`` (default: the s-th openhlo device; run with
``OPENHLO_JAX_NUM_DEVICES`` >= the number of stages): its parameters are put there, its
forward is ``jax.jit`` of ``jax.vjp`` (the residuals stay on its device, inside the returned
vjp function) and its backward ``jax.jit`` of applying that vjp function. Activations and
gradients move between stages with ``jax.device_put`` (the runtime's device-to-device copy).
The schedule (pjrt/pipelining) is run by pjrt's executor; gradients are summed over
microbatches on each stage's device. The step's loss is the mean of the microbatch losses
and the gradients are its gradients (for a mean-reduced loss: the whole batch's).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pjrt.pipelining import PipelineError, make_schedule, run_schedule, simulate

__all__ = ["Pipeline", "PipelineError", "StepResult"]


class StepResult(NamedTuple):
    loss: Any      # mean of the microbatch losses
    grads: list    # per stage, its params' gradients (a pytree like its params)
    outputs: Any   # the last stage's output for the whole batch


class _Stage:
    """One stage's jitted forward (with vjp) and backward on its device."""

    def __init__(self, fn: Callable, device, loss_fn: Callable | None):
        import jax
        self.device = device
        self.params = None
        self.targets: list = []
        self.grad_seed = 1.0
        self.losses: list = []
        self._vjps: dict = {}
        if loss_fn is None:
            self._forward = jax.jit(lambda p, x: jax.vjp(fn, p, x))
        else:
            def with_loss(p, x, t):
                def loss_and_output(p, x):
                    y = fn(p, x)
                    return loss_fn(y, t), y
                return jax.vjp(loss_and_output, p, x, has_aux=True)
            self._forward = jax.jit(with_loss)
        self.is_last = loss_fn is not None
        self._backward = jax.jit(lambda vjp, g: vjp(g))
        self._add = jax.jit(lambda a, b: jax.tree_util.tree_map(jax.numpy.add, a, b))

    def receive(self, value):
        import jax
        return jax.device_put(value, self.device)

    def forward(self, microbatch: int, x):
        if self.is_last:
            loss, vjp, y = self._forward(self.params, x, self.targets[microbatch])
            self.losses[microbatch] = loss
        else:
            y, vjp = self._forward(self.params, x)
        self._vjps[microbatch] = vjp
        return y

    def backward(self, microbatch: int, grad):
        import jax.numpy as jnp
        vjp = self._vjps.pop(microbatch)
        if grad is None:  # the last stage: d(mean loss)/d(this microbatch's loss)
            grad = jnp.asarray(self.grad_seed, self.losses[microbatch].dtype)
        grad_params, grad_x = self._backward(vjp, grad)
        return grad_x, grad_params

    def accumulate(self, total, grads):
        return self._add(total, grads)


class Pipeline:
    """``stage_fns`` run as a pipeline on ``devices`` (one openhlo device per stage) with the
    schedule named ``schedule`` over ``n_microbatches`` microbatches."""

    def __init__(self, stage_fns: Sequence[Callable], loss_fn: Callable, n_microbatches: int,
                 schedule: str = "1f1b", devices: Sequence | None = None):
        import jax
        stage_fns = list(stage_fns)
        self.schedule = make_schedule(schedule, len(stage_fns), n_microbatches)
        if devices is None:
            available = jax.devices("openhlo")
            if len(available) < len(stage_fns):
                raise PipelineError(f"{len(stage_fns)} stages need {len(stage_fns)} openhlo "
                                    f"devices, JAX sees {len(available)} (set "
                                    f"OPENHLO_JAX_NUM_DEVICES)")
            devices = available[:len(stage_fns)]
        devices = list(devices)
        if len(devices) != len(stage_fns) or len(set(devices)) != len(devices):
            raise PipelineError(f"{len(stage_fns)} stages need as many distinct devices, got "
                                f"{devices}")
        last = len(stage_fns) - 1
        self.stages = [_Stage(fn, d, loss_fn if s == last else None)
                       for s, (fn, d) in enumerate(zip(stage_fns, devices))]
        self.n_microbatches = n_microbatches

    @property
    def bubble_fraction(self) -> float:
        """The idle share of the schedule's timeline with equal forward and backward times."""
        return simulate(self.schedule).bubble_fraction

    def step(self, params: Sequence, x, target) -> StepResult:
        """One step over the batch ``x`` (split on its first dimension) against ``target``."""
        import jax
        import jax.numpy as jnp
        m = self.n_microbatches
        if len(params) != len(self.stages):
            raise PipelineError(f"{len(self.stages)} stages, got params for {len(params)}")
        for what, value in (("x", x), ("target", target)):
            if jnp.ndim(value) == 0 or jnp.shape(value)[0] % m:
                raise PipelineError(f"{what} of shape {jnp.shape(value)} cannot be split into "
                                    f"{m} equal microbatches on its first dimension")
        last = self.stages[-1]
        last.targets = [jax.device_put(t, last.device) for t in jnp.split(target, m)]
        last.losses = [None] * m
        last.grad_seed = 1.0 / m
        for stage, p in zip(self.stages, params):
            stage.params = jax.device_put(p, stage.device)
        run = run_schedule(self.schedule, self.stages, jnp.split(x, m))
        loss = sum(last.losses[1:], last.losses[0]) / m
        return StepResult(loss, run.grads, jnp.concatenate(run.outputs))
