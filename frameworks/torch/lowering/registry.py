"""The ATen-to-StableHLO lowering registry: ``LOWERINGS`` and the ``@lowers`` decorator.

Each ATen ``OpOverload`` maps to one rule, registered once (a second registration raises,
as every OpenHLO registry does). A rule is ``rule(ctx, *args, **kwargs)`` where ``ctx`` is
the ``LoweringContext`` of the FX node being lowered and the arguments are the node's own,
with tensor-valued nodes replaced by StableHLO ``Value``s and symbolic sizes by the
Python ints they have for the inputs being compiled. It returns a ``Value``, or a tuple of
them for a multi-result op. A rule refuses a case it does not handle by raising
``Unsupported``; the caller then runs that node in eager PyTorch.
"""
from __future__ import annotations

from typing import Callable

from stablehlo.registry import Registry

LOWERINGS: Registry[Callable] = Registry("ATen lowering")


class Unsupported(Exception):
    """A rule (or the graph walker) cannot lower this node; the message says why."""


def lowers(*overloads) -> Callable[[Callable], Callable]:
    """Register the decorated rule for each ATen ``OpOverload`` in ``overloads``."""
    if not overloads:
        raise ValueError("@lowers needs at least one OpOverload")

    def decorate(rule: Callable) -> Callable:
        for overload in overloads:
            LOWERINGS.register(overload, rule)
        return rule
    return decorate
