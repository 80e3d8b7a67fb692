"""The verifier: is a module a well-formed StableHLO program?

``verify_module(module)`` checks, for every op, in this order:

1. structure: an op of a registered dialect (stablehlo, chlo, func, builtin,
   check, interpreter, openhlo) must be known to the op registry; it has the declared
   number of regions; every block of a stablehlo/chlo region ends with
   ``stablehlo.return`` and a function body with ``func.return``, and
   terminators appear only last;
2. SSA dominance: an operand is a block argument or an earlier result of
   the same block, or a value visible in an enclosing region (implicit
   capture), except across isolated ops (``func.func``, ``builtin.module``);
3. the nested regions, recursively;
4. the op's own constraints and inferred result types: the ``verify=`` Rule
   of its declaration (stablehlo/ir/ops/*_rules.py);
5. symbols: functions' bodies and ``func.return`` match their type;
   ``func.call``, composite decompositions, ``custom_call``'s
   ``called_computations`` and ``interpreter.run_parallel``'s programs name
   functions of the module, with matching types where the op implies them.

Ops of other dialects (``sdy.*``, ...) are kept opaque: only their operands'
dominance and their nested ops are checked. The first violation raises
``VerificationError`` naming the op, its location, and expected vs actual.
"""
from __future__ import annotations

from typing import Optional

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import ArrayAttr, SymbolRefAttr, TypeAttr
from stablehlo.ir.core import Module, Operation
from stablehlo.ir.ops import OPS, VARIADIC, op_error
from stablehlo.ir.ops.shape_inference import check_fits_int64
from stablehlo.ir.types import FunctionType

REGISTERED_DIALECTS = frozenset({"stablehlo", "chlo", "func", "builtin", "check",
                                 "interpreter", "openhlo"})

# which terminator closes the regions of ops of a dialect / of a given op
_FUNC_TERMINATOR = "func.return"
_REGION_TERMINATOR = "stablehlo.return"
_TERMINATORS = frozenset({_FUNC_TERMINATOR, _REGION_TERMINATOR})
_ISOLATED = frozenset({"func.func", "builtin.module"})


def verify_module(module) -> None:
    """Verify a ``Module`` (or its ``builtin.module`` operation); raise on the first error."""
    op = module.op if isinstance(module, Module) else module
    _Verifier(_symbol_table(op)).verify(op, set())


def verify_op(op: Operation) -> None:
    """Verify ``op`` and everything nested in it.

    Values defined outside ``op`` count as visible; symbols resolve in the
    nearest enclosing ``builtin.module`` (if ``op`` is inside one).
    """
    module = _enclosing_module(op)
    visible = _visible_at(op)
    _Verifier(_symbol_table(module) if module is not None else {}).verify(op, visible)


def _enclosing_module(op: Operation) -> Optional[Operation]:
    current = op
    while current is not None:
        if current.name == "builtin.module":
            return current
        block = current.parent
        region = block.parent if block is not None else None
        current = region.parent if region is not None else None
    return None


def _visible_at(op: Operation) -> set:
    """The values defined before ``op`` in its block and its ancestors' blocks."""
    visible: set = set()
    current = op
    while current is not None and current.parent is not None:
        block = current.parent
        visible.update(block.arguments)
        for earlier in block.operations:
            if earlier is current:
                break
            visible.update(earlier.results)
        region = block.parent
        current = region.parent if region is not None else None
        if current is not None and current.name in _ISOLATED:
            break
    return visible


def _symbol_table(module_op: Operation) -> dict:
    """Top-level symbols of a module by name; a repeated name is an error."""
    table: dict = {}
    if not module_op.regions or not module_op.regions[0].blocks:
        return table
    for op in module_op.regions[0].blocks[0].operations:
        name = op.attributes.get("sym_name")
        if name is None or not hasattr(name, "value"):
            continue
        if name.value in table:
            raise op_error(op, f"redefinition of symbol @{name.value}")
        table[name.value] = op
    return table


def _value_name(value) -> str:
    hint = getattr(value, "name_hint", None)
    return f"%{hint}" if hint else f"of type {value.type}"


class _Verifier:
    def __init__(self, symbols: dict):
        self.symbols = symbols

    def verify(self, op: Operation, visible: set) -> None:
        opdef = self._opdef(op)
        self._check_dominance(op, visible)
        _check_type_sizes(op)
        if opdef is not None:
            self._check_regions(op, opdef)
        inner = set() if op.name in _ISOLATED else visible
        for region in op.regions:
            for block in region.blocks:
                self._verify_block(block, inner)
        if opdef is not None and opdef.verify is not None:
            opdef.verify(op)
        check = _SYMBOL_CHECKS.get(op.name)
        if check is not None:
            check(self, op)

    def _verify_block(self, block, visible: set) -> None:
        added = list(block.arguments)
        visible.update(added)
        try:
            for op in block.operations:
                self.verify(op, visible)
                visible.update(op.results)
                added.extend(op.results)
        finally:
            visible.difference_update(added)

    # -- structure ---------------------------------------------------------

    @staticmethod
    def _opdef(op: Operation):
        dialect = op.name.split(".", 1)[0]
        if dialect not in REGISTERED_DIALECTS:
            return None
        opdef = OPS.lookup(op.name)
        if opdef is None:
            raise op_error(op, f"unknown op '{op.name}' in the registered dialect "
                               f"'{dialect}'")
        return opdef

    @staticmethod
    def _check_dominance(op: Operation, visible: set) -> None:
        for i, value in enumerate(op.operands):
            if value not in visible:
                raise op_error(op, f"operand #{i} ({_value_name(value)}) is used before it is "
                                   f"defined, or is not visible here")

    @staticmethod
    def _check_regions(op: Operation, opdef) -> None:
        expected = opdef.num_regions
        if expected != VARIADIC and len(op.regions) != expected:
            raise op_error(op, f"expected {expected} region(s), got {len(op.regions)}")
        if op.name == "builtin.module":
            return
        terminator = _FUNC_TERMINATOR if op.name == "func.func" else _REGION_TERMINATOR
        for r, region in enumerate(op.regions):
            if op.name == "func.func" and not region.blocks:
                continue  # an external function declaration
            if not region.blocks:
                raise op_error(op, f"region #{r} is empty, expected a block ending with "
                                   f"{terminator}")
            for block in region.blocks:
                _check_block_terminator(op, r, block, terminator)


def _check_type_sizes(op: Operation) -> None:
    """Result and block argument types must have element counts that fit in int64."""
    for i, result in enumerate(op.results):
        check_fits_int64(op, f"result #{i}", result.type)
    for r, region in enumerate(op.regions):
        for b, block in enumerate(region.blocks):
            for a, arg in enumerate(block.arguments):
                check_fits_int64(op, f"region #{r} block #{b} argument #{a}", arg.type)


def _check_block_terminator(op: Operation, r: int, block, terminator: str) -> None:
    ops = block.operations
    last = ops[-1] if ops else None
    if last is None or last.name != terminator:
        found = f"'{last.name}'" if last is not None else "nothing"
        raise op_error(op, f"region #{r} must end with {terminator}, found {found}")
    for inner in ops[:-1]:
        if inner.name in _TERMINATORS:
            raise op_error(inner, f"must be the last op of its block (in region #{r} of "
                                  f"{op.where()})")


# ---------------------------------------------------------------------------
# Functions and symbol uses

def _function_type(op: Operation) -> FunctionType:
    attr = op.attributes.get("function_type")
    if not isinstance(attr, TypeAttr) or not isinstance(attr.type, FunctionType):
        raise op_error(op, f"attribute 'function_type' must be a function type, got {attr}")
    return attr.type


def _check_func(verifier: _Verifier, op: Operation) -> None:
    ftype = _function_type(op)
    if not op.regions or not op.regions[0].blocks:
        # As in MLIR: a body-less function is a declaration of a symbol defined elsewhere,
        # which only a private (or nested) symbol may be.
        visibility = getattr(op.attributes.get("sym_visibility"), "value", "public")
        if visibility not in ("private", "nested"):
            raise op_error(op, f"function @{_sym_name(op)} has no body: a symbol "
                               f"declaration cannot have public visibility")
        return
    block = op.regions[0].blocks[0]
    args = [a.type for a in block.arguments]
    if args != list(ftype.inputs):
        raise op_error(op, f"entry block arguments have types ({_types(args)}), expected "
                           f"({_types(ftype.inputs)}) from the function type")
    for blk in op.regions[0].blocks:
        ret = blk.operations[-1]
        got = [v.type for v in ret.operands]
        if got != list(ftype.results):
            raise op_error(ret, f"returns ({_types(got)}), expected ({_types(ftype.results)}) "
                                f"(the result types of function @{_sym_name(op)})")


def _sym_name(op: Operation) -> str:
    attr = op.attributes.get("sym_name")
    return getattr(attr, "value", "?")


def _types(types) -> str:
    return ", ".join(str(t) for t in types)


def _lookup_function(verifier: _Verifier, op: Operation, ref, what: str) -> Operation:
    if not isinstance(ref, SymbolRefAttr):
        raise op_error(op, f"attribute '{what}' must be a symbol reference (@name), got {ref}")
    target = verifier.symbols.get(ref.name)
    if target is None:
        raise op_error(op, f"'{what}' refers to @{ref.name}, which is not defined in the "
                           f"module")
    if target.name != "func.func":
        raise op_error(op, f"'{what}' refers to @{ref.name}, which is a {target.name}, not a "
                           f"function")
    return target


def _check_signature(op: Operation, callee: Operation, what: str) -> None:
    ftype = _function_type(callee)
    operands = [v.type for v in op.operands]
    results = [r.type for r in op.results]
    name = _sym_name(callee)
    if operands != list(ftype.inputs):
        raise op_error(op, f"operand types ({_types(operands)}) do not match the inputs "
                           f"({_types(ftype.inputs)}) of {what} @{name}")
    if results != list(ftype.results):
        raise op_error(op, f"result types ({_types(results)}) do not match the results "
                           f"({_types(ftype.results)}) of {what} @{name}")


def _check_call(verifier: _Verifier, op: Operation) -> None:
    callee = _lookup_function(verifier, op, op.attributes.get("callee"), "callee")
    _check_signature(op, callee, "callee")


def _check_composite(verifier: _Verifier, op: Operation) -> None:
    ref = op.attributes.get("decomposition")
    callee = _lookup_function(verifier, op, ref, "decomposition")
    _check_signature(op, callee, "decomposition")


def _check_custom_call(verifier: _Verifier, op: Operation) -> None:
    called = op.attributes.get("called_computations")
    if called is None:
        return
    if not isinstance(called, ArrayAttr):
        raise op_error(op, f"attribute 'called_computations' must be an array of symbols, "
                           f"got {called}")
    for ref in called.values:
        _lookup_function(verifier, op, ref, "called_computations")


def _check_run_parallel(verifier: _Verifier, op: Operation) -> None:
    programs = op.attributes.get("programs")
    if not isinstance(programs, ArrayAttr):
        raise op_error(op, f"attribute 'programs' must be an array of arrays of symbols, "
                           f"got {programs}")
    inputs, results = [], []
    for row in programs.values:
        for ref in getattr(row, "values", (row,)):
            ftype = _function_type(_lookup_function(verifier, op, ref, "programs"))
            inputs += ftype.inputs
            results += ftype.results
    infeed = op.attributes.get("infeed")
    for ref in getattr(infeed, "values", ()):
        _lookup_function(verifier, op, ref, "infeed")
    operands = [v.type for v in op.operands]
    if operands != inputs:
        raise op_error(op, f"operand types ({_types(operands)}) do not match the programs' "
                           f"inputs ({_types(inputs)})")
    if [r.type for r in op.results] != results:
        raise op_error(op, f"result types ({_types(r.type for r in op.results)}) do not match "
                           f"the programs' results ({_types(results)})")


_SYMBOL_CHECKS = {
    "func.func": _check_func,
    "func.call": _check_call,
    "stablehlo.composite": _check_composite,
    "stablehlo.custom_call": _check_custom_call,
    "interpreter.run_parallel": _check_run_parallel,
}

__all__ = ["verify_module", "verify_op", "VerificationError", "REGISTERED_DIALECTS"]
