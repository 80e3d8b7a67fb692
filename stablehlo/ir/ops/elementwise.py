"""Elementwise ops: unary and binary math, logic, comparison, conversion, select, clamp."""
from stablehlo.ir.ops.base import define_pure, ELEMENTWISE, COMMUTATIVE
from stablehlo.ir.ops.elementwise_rules import rule_for

# unary ops whose operand and result types match (syntax "same_type" prints
# `: T` when all types are equal and a functional type otherwise)
_UNARY_WITH_ACCURACY = [
    "cbrt", "cosine", "exponential", "exponential_minus_one", "log", "log_plus_one",
    "logistic", "rsqrt", "sine", "sqrt", "tan", "tanh",
]
_UNARY = [
    "abs", "ceil", "count_leading_zeros", "floor", "imag", "is_finite", "negate", "not",
    "popcnt", "real", "round_nearest_afz", "round_nearest_even", "sign",
]
_BINARY = ["atan2", "divide", "power", "remainder", "shift_left",
           "shift_right_arithmetic", "shift_right_logical", "subtract"]
_COMMUTATIVE_BINARY = ["add", "and", "maximum", "minimum", "multiply", "or", "xor"]

for _name in _UNARY_WITH_ACCURACY:
    define_pure(f"stablehlo.{_name}", properties=("result_accuracy",), syntax="same_type",
                traits=(ELEMENTWISE,), verify=rule_for(_name))
for _name in _UNARY + _BINARY:
    define_pure(f"stablehlo.{_name}", syntax="same_type", traits=(ELEMENTWISE,),
                verify=rule_for(_name))
for _name in _COMMUTATIVE_BINARY:
    define_pure(f"stablehlo.{_name}", syntax="same_type", traits=(ELEMENTWISE, COMMUTATIVE),
                verify=rule_for(_name))

define_pure("stablehlo.complex", syntax="complex", traits=(ELEMENTWISE,),
            verify=rule_for("complex"))
define_pure("stablehlo.clamp", syntax="same_type", traits=(ELEMENTWISE,), verify=rule_for("clamp"))
define_pure("stablehlo.select", syntax="select", traits=(ELEMENTWISE,), verify=rule_for("select"))
define_pure("stablehlo.compare", properties=("comparison_direction", "compare_type"),
            syntax="compare", traits=(ELEMENTWISE,), verify=rule_for("compare"))
define_pure("stablehlo.convert", syntax="same_type", traits=(ELEMENTWISE,),
            verify=rule_for("convert"))
define_pure("stablehlo.bitcast_convert", syntax="functional", verify=rule_for("bitcast_convert"))
define_pure("stablehlo.reduce_precision", properties=("exponent_bits", "mantissa_bits"),
            syntax="reduce_precision", traits=(ELEMENTWISE,), verify=rule_for("reduce_precision"))
define_pure("stablehlo.uniform_quantize", syntax="same_type", traits=(ELEMENTWISE,),
            verify=rule_for("uniform_quantize"))
define_pure("stablehlo.uniform_dequantize", syntax="same_type", traits=(ELEMENTWISE,),
            verify=rule_for("uniform_dequantize"))
