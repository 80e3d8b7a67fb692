"""Every registered op carries every fact the layers read about it, and the failure names the
op and the fact it lacks.

The facts: its effects (on the op definition), its shape/type rule (the definition's
verifier), its reference semantics (an interpreter kernel), its cost rule and its SPMD rule
(registries in xla_core keyed by the op's name, since the IR must not import the compiler).
Adding an op means adding each of them; elementwise ops get their cost and SPMD rules from
their trait, so one needs its definition, its interpreter kernel and its scalar rendering.
"""
from stablehlo.interpreter import KERNELS
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.base import ELEMENTWISE, Effect, OpDef, op_effects
from stablehlo.text import parse_module
from xla_core.cost.estimates import COST_RULES
from xla_core.spmd.op_rules import SPMD_RULES, Split

# Ops without a fact, and why (each is a decision, not an omission).
_NO_KERNEL = {
    "builtin.module": "structure: the evaluator walks it",
    "func.func": "structure: the evaluator calls it",
    "func.return": "a terminator: the evaluator reads its operands",
    "stablehlo.return": "a terminator: the evaluator reads its operands",
}
_NO_TYPE_RULE = {
    "builtin.module": "checked by stablehlo/verify.py (symbols, isolation)",
    "func.func": "checked by stablehlo/verify.py (signature against the body)",
    "func.return": "checked by stablehlo/verify.py against the function's results",
    "stablehlo.return": "checked by its parent op's rule",
    "func.call": "checked by stablehlo/verify.py against the callee's signature",
    "stablehlo.async_start": "refused by the interpreter and every backend",
    "stablehlo.async_done": "refused by the interpreter and every backend",
    "stablehlo.einsum": "deprecated op: the interpreter checks its config when it runs",
    "stablehlo.unary_einsum": "deprecated op: the interpreter checks its config when it runs",
    "interpreter.run_parallel": "test-only: its programs are checked when they run",
}


def missing_facts(opdef: OpDef) -> list[str]:
    """The facts ``opdef`` lacks, by name."""
    name = opdef.name
    missing = []
    if opdef.effects is None and opdef.effects_of is None:
        missing.append("effects (define(..., effects=Effect...) or define_pure)")
    if opdef.verify is None and name not in _NO_TYPE_RULE:
        missing.append("a shape/type rule (verify=)")
    if name not in KERNELS and name not in _NO_KERNEL:
        missing.append("an interpreter kernel (stablehlo/interpreter, @kernel)")
    if name not in COST_RULES:
        missing.append("a cost rule (xla_core/cost/estimates.py COST_RULES)")
    if name not in SPMD_RULES:
        missing.append("an SPMD rule, or whole(reason) (xla_core/spmd/op_rules.py)")
    return missing


def test_every_registered_op_has_every_fact():
    report = {name: missing_facts(OPS.get(name)) for name in OPS.names()}
    lacking = {name: facts for name, facts in report.items() if facts}
    assert not lacking, "\n".join(f"{name} lacks {', '.join(facts)}"
                                  for name, facts in sorted(lacking.items()))


def test_the_exemption_lists_name_registered_ops_only():
    assert set(_NO_KERNEL) <= set(OPS.names()) and set(_NO_TYPE_RULE) <= set(OPS.names())
    # an exempted op that gained the fact must leave its list
    assert not [n for n in _NO_KERNEL if n in KERNELS]
    assert not [n for n in _NO_TYPE_RULE if OPS.get(n).verify is not None]


def test_an_op_without_facts_is_named_with_each_missing_fact():
    bare = OpDef("stablehlo.made_up")  # never registered: OPS stays as it is
    facts = missing_facts(bare)
    assert [f.split(" (")[0] for f in facts] == [
        "effects", "a shape/type rule", "an interpreter kernel", "a cost rule",
        "an SPMD rule, or whole(reason)"]


def test_elementwise_ops_take_their_cost_and_spmd_rules_from_the_trait():
    # so a new elementwise op needs only its definition, its kernel and its scalar rendering
    for name in OPS.names():
        if OPS.get(name).has(ELEMENTWISE):
            assert SPMD_RULES.get(name).split is Split.ELEMENTWISE, name
            assert name in COST_RULES, name


def test_effects_are_what_passes_read():
    module = parse_module("""
func.func @main(%x: tensor<f32>, %s: tensor<0xi64>) -> tensor<f32> {
  %0 = stablehlo.custom_call @pure(%x) : (tensor<f32>) -> tensor<f32>
  %1 = stablehlo.custom_call @io(%x) {has_side_effect = true} : (tensor<f32>) -> tensor<f32>
  %2 = stablehlo.replica_id : tensor<ui32>
  %3 = "other.op"(%x) : (tensor<f32>) -> tensor<f32>
  %4 = stablehlo.rng %x, %x, %s, distribution = UNIFORM :
      (tensor<f32>, tensor<f32>, tensor<0xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}""")
    effects = [op_effects(op) for op in module.lookup("main").body.operations[:-1]]
    assert effects == [Effect.PURE, Effect.IO, Effect.COMMUNICATES, Effect.UNKNOWN,
                       Effect.HIDDEN_STATE]
