"""The optimizer update of an FSDP train step (fsdp.py), written in torch ops so that it is
traced into the same program as forward and backward and runs on each device's shard of
the parameters and of the optimizer state.

``update_rule(torch.optim.AdamW, {"lr": 1e-3, ...})`` reads the class and its arguments as
``torch.optim`` would (its defaults fill what is not given) and returns an ``UpdateRule``
with torch's semantics for the options it supports: ``SGD`` (``lr``, ``momentum``,
``dampening``, ``weight_decay``, ``nesterov``), ``Adam`` and ``AdamW`` (``lr``, ``betas``,
``eps``, ``weight_decay``). Other classes, and other options away from their defaults
(``amsgrad``, ``maximize``, a tensor ``lr``...), are an ``FsdpError`` naming them. The
eager optimizer cannot be used itself: its state would be whole tensors on the host.

What changes from step to step (the learning rate, Adam's bias corrections, SGD's first
step that starts the momentum buffer from the gradient) is computed on the host and passed
as scalar arguments, so one compiled program serves every step and a changed ``lr`` needs
no recompilation.
"""
from __future__ import annotations

import inspect
import math

import torch

from frameworks.torch.sharding import ShardingError


class FsdpError(ShardingError):
    """A model, optimizer or input the FSDP wrapper cannot handle; the message says which."""


# options every torch.optim class has that only choose torch's kernel, not the result
_KERNEL_CHOICES = ("foreach", "fused", "capturable", "differentiable")


class UpdateRule:
    """One optimizer's update: ``state_names`` (per parameter, each of the parameter's
    shape, zero at the start), ``scalars(step)`` (host values for step 1, 2, ...) and
    ``update(p, g, state, scalars) -> (new p, new state)`` in torch ops."""

    name = ""
    state_names: tuple = ()

    def __init__(self, options: dict):
        self.options = options
        self.lr = float(options["lr"])

    def scalars(self, step: int) -> list:
        raise NotImplementedError

    def update(self, p, g, state: list, scalars: list):
        raise NotImplementedError


class SGD(UpdateRule):
    name = "SGD"

    def __init__(self, options: dict):
        super().__init__(options)
        self.momentum = float(options["momentum"])
        self.dampening = float(options["dampening"])
        self.weight_decay = float(options["weight_decay"])
        self.nesterov = bool(options["nesterov"])
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise FsdpError("SGD: nesterov momentum requires a momentum and zero dampening "
                            "(as torch.optim.SGD)")
        self.state_names = ("momentum_buffer",) if self.momentum else ()

    def scalars(self, step: int) -> list:
        # torch starts the buffer as the first gradient itself: buf = keep * buf + take * g
        keep, take = (0.0, 1.0) if step == 1 else (self.momentum, 1.0 - self.dampening)
        return [self.lr, keep, take]

    def update(self, p, g, state, scalars):
        lr, keep, take = scalars
        if self.weight_decay:
            g = g + self.weight_decay * p
        if self.momentum:
            (buf,) = state
            buf = keep * buf + take * g
            state = [buf]
            g = g + self.momentum * buf if self.nesterov else buf
        return p - lr * g, state


class Adam(UpdateRule):
    name = "Adam"
    state_names = ("exp_avg", "exp_avg_sq")
    decoupled = False  # AdamW: weight decay scales the parameter, not the gradient

    def __init__(self, options: dict):
        super().__init__(options)
        self.beta1, self.beta2 = (float(b) for b in options["betas"])
        self.eps = float(options["eps"])
        self.weight_decay = float(options["weight_decay"])

    def scalars(self, step: int) -> list:
        correction1 = 1.0 - self.beta1 ** step
        correction2 = 1.0 - self.beta2 ** step
        return [self.lr, self.lr / correction1, 1.0 / math.sqrt(correction2)]

    def update(self, p, g, state, scalars):
        lr, step_size, inv_sqrt_correction2 = scalars
        if self.weight_decay and self.decoupled:
            p = p * (1 - lr * self.weight_decay)
        elif self.weight_decay:
            g = g + self.weight_decay * p
        m, v = state
        m = self.beta1 * m + (1 - self.beta1) * g
        v = self.beta2 * v + (1 - self.beta2) * g * g
        denom = torch.sqrt(v) * inv_sqrt_correction2 + self.eps
        return p - step_size * m / denom, [m, v]


class AdamW(Adam):
    name = "AdamW"
    decoupled = True


_RULES = {torch.optim.SGD: SGD, torch.optim.Adam: Adam, torch.optim.AdamW: AdamW}
# options of each class that may differ from their defaults
_SUPPORTED = {SGD: ("lr", "momentum", "dampening", "weight_decay", "nesterov"),
              Adam: ("lr", "betas", "eps", "weight_decay"),
              AdamW: ("lr", "betas", "eps", "weight_decay")}


def update_rule(optimizer_class, options: dict) -> UpdateRule:
    """The ``UpdateRule`` of ``optimizer_class(params, **options)``."""
    rule = _RULES.get(optimizer_class)
    if rule is None:
        raise FsdpError(f"optimizer {getattr(optimizer_class, '__name__', optimizer_class)!r}"
                        f" is not supported by the FSDP train step (supported: "
                        f"{', '.join(c.__name__ for c in _RULES)})")
    signature = inspect.signature(optimizer_class)
    try:
        bound = signature.bind(None, **options)
    except TypeError as exc:
        raise FsdpError(f"{optimizer_class.__name__}: {exc}") from None
    bound.apply_defaults()
    given = dict(bound.arguments)
    given.pop(next(iter(signature.parameters)))  # the params argument
    for name, value in given.items():
        if name in _SUPPORTED[rule] or name in _KERNEL_CHOICES:
            continue
        if value != signature.parameters[name].default:
            raise FsdpError(f"{optimizer_class.__name__}({name}={value!r}) is not supported "
                            f"by the FSDP train step (supported options: "
                            f"{', '.join(_SUPPORTED[rule])})")
    if isinstance(given["lr"], torch.Tensor):
        raise FsdpError(f"{optimizer_class.__name__}: lr must be a number, not a tensor")
    return rule(given)
