"""Control flow, calls, composites, custom calls, tokens and I/O."""
from stablehlo.ir.attributes import BoolAttr, StringAttr, SymbolRefAttr
from stablehlo.ir.ops.base import define, define_pure, Effect, TERMINATOR, ISOLATED, VARIADIC
from stablehlo.ir.ops.control_flow_rules import rule_for


def _custom_call_effects(op) -> Effect:
    # A custom call says itself whether it acts on the world (as in XLA): without
    # has_side_effect = true it is a function of its operands.
    flag = op.attributes.get("has_side_effect")
    return Effect.IO if isinstance(flag, BoolAttr) and flag.value else Effect.PURE


def custom_call_target(op) -> str | None:
    """The target a ``stablehlo.custom_call`` calls: its ``call_target_name``, a string or
    (as some producers write it) a symbol reference. None for any other op, or a call
    without one."""
    if op.name != "stablehlo.custom_call":
        return None
    attr = op.attributes.get("call_target_name")
    if isinstance(attr, StringAttr):
        return attr.value
    if isinstance(attr, SymbolRefAttr):
        return attr.name
    return None


define_pure("stablehlo.while", syntax="while", num_regions=2, verify=rule_for("while"))
define_pure("stablehlo.if", num_regions=2, verify=rule_for("if"))
define_pure("stablehlo.case", num_regions=VARIADIC, verify=rule_for("case"))
define_pure("stablehlo.return", syntax="return", traits=(TERMINATOR,))
define("stablehlo.optimization_barrier", syntax="optimization_barrier",
       effects=Effect.BARRIER, verify=rule_for("optimization_barrier"))
define_pure("stablehlo.composite", properties=("name", "composite_attributes", "decomposition",
                                               "version"), syntax="composite",
            verify=rule_for("composite"))
define("stablehlo.custom_call",
       properties=("call_target_name", "has_side_effect", "backend_config", "api_version",
                   "called_computations", "operand_layouts", "result_layouts",
                   "output_operand_aliases"), syntax="custom_call",
       effects_of=_custom_call_effects, verify=rule_for("custom_call"))
define_pure("stablehlo.after_all", syntax="after_all", verify=rule_for("after_all"))
define_pure("stablehlo.create_token", syntax="nullary", verify=rule_for("create_token"))
define("stablehlo.infeed", properties=("infeed_config", "layout"), effects=Effect.IO,
       verify=rule_for("infeed"))
define("stablehlo.outfeed", properties=("outfeed_config",), effects=Effect.IO,
       verify=rule_for("outfeed"))
define("stablehlo.send", properties=("channel_handle", "is_host_transfer",
                                     "source_target_pairs"), effects=Effect.IO,
       verify=rule_for("send"))
define("stablehlo.recv", properties=("channel_handle", "is_host_transfer",
                                     "source_target_pairs"), effects=Effect.IO,
       verify=rule_for("recv"))
define("stablehlo.async_start", properties=("execution_thread",), num_regions=0,
       effects=Effect.ASYNC_PAIR)
define("stablehlo.async_done", num_regions=0, effects=Effect.ASYNC_PAIR)

# builtin and func dialects
define_pure("builtin.module", properties=("sym_name", "sym_visibility"), syntax="module",
            num_regions=1, traits=(ISOLATED,))
define_pure("func.func", properties=("sym_name", "function_type", "sym_visibility", "arg_attrs",
                                     "res_attrs"), syntax="func", num_regions=1, traits=(ISOLATED,))
define_pure("func.return", syntax="func_return", traits=(TERMINATOR,))
define_pure("func.call", properties=("callee", "arg_attrs", "res_attrs", "no_inline"),
            syntax="call")
