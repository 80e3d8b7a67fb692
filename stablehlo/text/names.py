"""SSA value names, chosen the way MLIR's printer (SSANameState) chooses them.

Note [MLIR value numbering]
Pretty form: regions are numbered one at a time from a stack. A region starts from the value,
argument and conflict counters its parent region had *after* the whole parent was numbered,
and sees the names used in its ancestors but not its siblings'. Within a region, op result
groups get ``%N`` (one number per op; ``%N:2`` / ``%N#1`` for several results), entry-block
arguments ``%argN``, and ops with suggested names (``%c``/``%cst`` for constants, ...) get that
name made unique with a ``_K`` suffix from the conflict counter. So sibling regions (two
reduce bodies, two functions) reuse the same numbers.
Generic form: no suggested names, and counters are never restored: one running count for the
whole module, regions taken last-pushed-first from the stack.
"""
from __future__ import annotations

from stablehlo.ir.core import Block, Operation, Region, Value
from stablehlo.ir.types import IntegerType, TensorType


def _constant_names(op: Operation):
    typ = op.results[0].type if op.results else None
    elem = typ.element_type if isinstance(typ, TensorType) else None
    return ["c" if isinstance(elem, IntegerType) else "cst"]


# Ops that suggest names for their results (OpAsmOpInterface::getAsmResultNames).
RESULT_NAMES = {
    "stablehlo.constant": _constant_names,
    "stablehlo.rng_bit_generator": lambda op: ["output_state", "output"],
    "chlo.top_k": lambda op: ["values", "indices"],
}
def _scan_arg_names(op: Operation, count: int):
    segments = op.attributes.get("operandSegmentSizes")
    inputs = segments.values[0] if segments is not None else count // 2
    return ["input"] * inputs + ["carry"] * (count - inputs)


# Ops that suggest names for their regions' entry-block arguments: op, argument count -> names.
BLOCK_ARG_NAMES = {
    "stablehlo.while": lambda op, count: ["iterArg"] * count,
    "chlo.scan": _scan_arg_names,
}


class _Scope:
    """Names used in a region and its ancestors (MLIR's scoped ``usedNames`` table)."""

    __slots__ = ("names", "parent")

    def __init__(self, parent: _Scope | None):
        self.names: set[str] = set()
        self.parent = parent

    def __contains__(self, name: str) -> bool:
        scope = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False


class Names:
    """Result of numbering: ``value_names[v]`` is the text of a use (``%0#1``),
    ``result_defs[op]`` the text before ``=``, ``block_labels[b]`` ``^bbN``."""

    def __init__(self, top: Operation, generic: bool):
        self.generic = generic
        self.value_names: dict[Value, str] = {}
        self.result_defs: dict[Operation, str] = {}
        self.block_labels: dict[Block, str] = {}
        self._next_value = self._next_arg = self._next_conflict = 0
        self._scope = _Scope(None)
        self._number_op(top)
        stack = [(r, 0, 0, 0, self._scope) for r in top.regions]
        while stack:
            region, value_id, arg_id, conflict_id, parent_scope = stack.pop()
            if not generic:
                self._next_value, self._next_arg = value_id, arg_id
                self._next_conflict = conflict_id
            self._scope = _Scope(parent_scope)
            self._number_region(region)
            for block in region.blocks:
                for op in block.operations:
                    for child in op.regions:
                        stack.append((child, self._next_value, self._next_arg,
                                      self._next_conflict, self._scope))

    def _unique(self, name: str) -> str:
        if name in self._scope:
            while True:
                candidate = f"{name}_{self._next_conflict}"
                self._next_conflict += 1
                if candidate not in self._scope:
                    name = candidate
                    break
        self._scope.names.add(name)
        return name

    def _number_region(self, region: Region) -> None:
        suggest = None
        if not self.generic and region.parent is not None:
            suggest = BLOCK_ARG_NAMES.get(region.parent.name)
        for index, block in enumerate(region.blocks):
            self.block_labels[block] = f"^bb{index}"
            names = None
            if index == 0 and suggest is not None:
                names = suggest(region.parent, len(block.arguments))
            for position, arg in enumerate(block.arguments):
                if index != 0:
                    self.value_names[arg] = f"%{self._next_value}"
                    self._next_value += 1
                elif names is not None:
                    self.value_names[arg] = "%" + self._unique(names[position])
                else:
                    self.value_names[arg] = f"%arg{self._next_arg}"
                    self._next_arg += 1
            for op in block.operations:
                self._number_op(op)

    def _number_op(self, op: Operation) -> None:
        results = op.results
        if not results:
            return
        suggest = None if self.generic else RESULT_NAMES.get(op.name)
        if suggest is not None:
            names = suggest(op)
            if len(names) == len(results):
                texts = ["%" + self._unique(n) for n in names]
                for value, text in zip(results, texts):
                    self.value_names[value] = text
                self.result_defs[op] = ", ".join(texts)
                return
        base = f"%{self._next_value}"
        self._next_value += 1
        if len(results) == 1:
            self.value_names[results[0]] = base
            self.result_defs[op] = base
        else:
            for index, value in enumerate(results):
                self.value_names[value] = f"{base}#{index}"
            self.result_defs[op] = f"{base}:{len(results)}"


def printed_names(top: Operation) -> dict[Value, str]:
    """``{value: "%3"}`` for every value under ``top``: the names ``print_op(top)`` (and
    ``print_module`` when ``top`` is the module op) writes at their uses, in pretty form."""
    return Names(top, generic=False).value_names
