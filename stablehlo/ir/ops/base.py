"""The op registry: each op is declared once, and the parser, printer,
verifier and interpreter all key on the declaration.

An ``OpDef`` says:

* ``properties``: the inherent attribute names. The generic printer puts them
  in ``<{...}>``; every other attribute goes to the trailing attr-dict.
* ``syntax``: the name of the op's pretty format in
  ``stablehlo.text.formats.FORMATS`` (``"generic"`` = always generic form).
* ``num_regions``: how many regions the op has (``VARIADIC`` for ``case``).
* ``verify``: ``verify(op)`` checks constraints and inferred result types,
  raising ``VerificationError`` through ``op_error``.
* ``traits``: properties that passes and the interpreter key on.
* ``effects``: what running the op does besides computing its results from its
  operands (an ``Effect``); passes ask ``op_effects(op)``, never a list of names.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Optional

from stablehlo.errors import VerificationError
from stablehlo.registry import Registry

VARIADIC = -1

# Traits
ELEMENTWISE = "elementwise"
COMMUTATIVE = "commutative"
TERMINATOR = "terminator"
SAME_OPERANDS_AND_RESULT_TYPE = "same_operands_and_result_type"
COLLECTIVE = "collective"
ISOLATED = "isolated_from_above"


class Effect(enum.Flag):
    """What an op does besides computing its results from its operands.

    An op with no effect (``PURE``) may be removed when unused, merged with an
    equal op, moved, or evaluated at compile time; any flag forbids all of that.
    The flags say why, for diagnostics and for passes that care about one kind.
    """
    PURE = 0
    IO = enum.auto()            # acts on the world outside: feeds, send/recv, checks, print
    HIDDEN_STATE = enum.auto()  # reads and advances state that is not an operand (rng)
    COMMUNICATES = enum.auto()  # talks to, or asks about, other devices (collectives)
    BARRIER = enum.auto()       # exists to stop optimizations (optimization_barrier)
    ASYNC_PAIR = enum.auto()    # half of a start/done pair that must stay together
    UNKNOWN = enum.auto()       # nothing is known: unregistered ops


@dataclass(frozen=True)
class OpDef:
    name: str
    properties: tuple = ()
    syntax: str = "generic"
    num_regions: int = 0
    verify: Optional[Callable] = None
    traits: frozenset = field(default_factory=frozenset)
    summary: str = ""
    # None: not declared (``op_effects`` then assumes the worst, and a test names the op)
    effects: Optional[Effect] = None
    # op -> Effect, for ops whose effects depend on their attributes (custom_call)
    effects_of: Optional[Callable] = None

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def mnemonic(self) -> str:
        return self.name.split(".", 1)[1]

    def has(self, trait: str) -> bool:
        return trait in self.traits


OPS: Registry[OpDef] = Registry("op")


def define(name: str, *, properties=(), syntax="generic", num_regions=0, verify=None,
           traits=(), summary="", effects=None, effects_of=None) -> OpDef:
    opdef = OpDef(name, tuple(properties), syntax, num_regions, verify, frozenset(traits),
                  summary, effects, effects_of)
    OPS.register(name, opdef)
    return opdef


def define_pure(name: str, **declaration) -> OpDef:
    """``define`` an op without effects: its results depend on its operands only."""
    return define(name, effects=Effect.PURE, **declaration)


def op_effects(op) -> Effect:
    """The effects of ``op`` itself (not of the ops in its regions, nor of a callee).

    Unregistered ops, and registered ones that declare none, have ``Effect.UNKNOWN``.
    """
    opdef = op.opdef
    if opdef is None:
        return Effect.UNKNOWN
    if opdef.effects_of is not None:
        return opdef.effects_of(op)
    return Effect.UNKNOWN if opdef.effects is None else opdef.effects


def op_error(op, message: str) -> VerificationError:
    """A VerificationError naming the op and its source location."""
    return VerificationError(f"{op.where()}: {message}")
