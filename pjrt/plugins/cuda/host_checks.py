"""Check ops (the conformance suites' assertions) on the cuda backend.

A check op (``check.expect_*``, or a ``stablehlo.custom_call @check.*`` of the testdata)
has no GPU kernel: the device program computes what it checks, and the host compares. Before
the executable is described, ``split_checks`` takes the entry's check ops out of it: their
operands become extra results of the entry, after its own, and the ops move, unchanged, into
a module of their own whose ``@main`` takes those values (``checks.mlir`` beside
``executable.json``). After a run the plugin downloads the extra results and evaluates that
module with the reference interpreter, so the comparison is the interpreter's own check
kernels (stablehlo/interpreter/checks.py, control_flow.py's custom_call targets), and a
failing check is the same CheckFailure as on the cpu backend.
"""
from __future__ import annotations

from stablehlo.errors import CheckFailure
from stablehlo.ir.attributes import ArrayAttr, StringAttr, TypeAttr
from stablehlo.ir.core import Func, Module, Operation, make_func
from stablehlo.ir.ops.control_flow import custom_call_target
from stablehlo.ir.types import FunctionType

from pjrt.errors import UnimplementedError

CHECKS_FILE = "checks.mlir"
# Module attribute of checks.mlir: each check op's place in the program, in order, so that a
# failure names the program's line rather than checks.mlir's.
PLACES = "openhlo.check_places"
# Needs the interpreter's probe store of the same run: not a value the device computes.
_DEVICE_LESS = ("check.expect_serialized_eq",)


def is_check(op: Operation) -> bool:
    if op.name == "stablehlo.custom_call":
        return (custom_call_target(op) or "").startswith("check.")
    return op.name.startswith("check.")


def split_checks(func: Func) -> Module | None:
    """Moves ``func``'s check ops into a module of their own and returns it (None when
    ``func`` has none); their operands become ``func``'s last results, in the order of
    that module's ``@main`` arguments."""
    checks = [op for op in func.body.operations if is_check(op)]
    if not checks:
        return None
    checked: list = []  # the values the checks read, each once
    for op in checks:
        if op.name in _DEVICE_LESS or op.results:
            why = "it reads the interpreter's probes" if op.name in _DEVICE_LESS else \
                "it has results"
            raise UnimplementedError(f"{op.where()}: the cuda backend checks on the host "
                                     f"after the run, and cannot run this check: {why}")
        checked += [v for v in op.operands if v not in checked]
    types = tuple(v.type for v in checked)
    main = make_func("main", FunctionType(types, ()))
    block = main.regions[0].blocks[0]
    argument = dict(zip(checked, block.arguments))
    for op in checks:
        func.body.operations.remove(op)
        op.operands = [argument[v] for v in op.operands]
        block.append(op)
    block.append(Operation("func.return"))
    terminator = func.body.operations[-1]
    terminator.operands = list(terminator.operands) + checked
    func.op.attributes["function_type"] = TypeAttr(
        FunctionType(tuple(func.type.inputs), tuple(func.type.results) + types))
    func.op.attributes.pop("res_attrs", None)  # one per result: no longer as many
    module = Module()
    module.attributes[PLACES] = ArrayAttr(tuple(StringAttr(str(op.location or "?"))
                                                for op in checks))
    module.body.append(main)
    return module


class HostChecks:
    """The checks of an executable: ``module`` (text of ``checks.mlir``) evaluated by the
    reference interpreter on the checked values, the executable's last results."""

    def __init__(self, text: str):
        from stablehlo.text import parse_module
        self.module = parse_module(text, CHECKS_FILE)
        main = self.module.lookup("main")
        self.types = list(main.type.inputs)
        places = self.module.attributes.get(PLACES)
        ops = [op for op in main.body.operations if op.name != "func.return"]
        self.places = {} if places is None else {
            f"{op.location}: ": f"{place.value}: " for op, place in zip(ops, places.values)}

    def run(self, values: list) -> None:
        """Raises the interpreter's CheckFailure when a check fails, naming the check's
        place in the program."""
        from stablehlo.interpreter.evaluator import evaluate
        try:
            evaluate(self.module, values)
        except CheckFailure as exc:
            message = str(exc)
            for here, there in self.places.items():
                if message.startswith(here):
                    raise CheckFailure(there + message[len(here):]) from None
            raise
