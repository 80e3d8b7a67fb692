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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from stablehlo.errors import VerificationError
from stablehlo.registry import Registry

VARIADIC = -1

# Traits
ELEMENTWISE = "elementwise"
COMMUTATIVE = "commutative"
TERMINATOR = "terminator"
SIDE_EFFECTING = "side_effecting"
SAME_OPERANDS_AND_RESULT_TYPE = "same_operands_and_result_type"
COLLECTIVE = "collective"
ISOLATED = "isolated_from_above"


@dataclass(frozen=True)
class OpDef:
    name: str
    properties: tuple = ()
    syntax: str = "generic"
    num_regions: int = 0
    verify: Optional[Callable] = None
    traits: frozenset = field(default_factory=frozenset)
    summary: str = ""

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
           traits=(), summary="") -> OpDef:
    opdef = OpDef(name, tuple(properties), syntax, num_regions, verify, frozenset(traits),
                  summary)
    OPS.register(name, opdef)
    return opdef


def op_error(op, message: str) -> VerificationError:
    """A VerificationError naming the op and its source location."""
    return VerificationError(f"{op.where()}: {message}")
