"""CHLO ops that appear in JAX output and the conformance suites."""
from stablehlo.ir.ops.base import define_pure, ELEMENTWISE
from stablehlo.ir.ops.chlo_rules import rule_for

_UNARY = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e", "conj", "cosh",
          "digamma", "erf", "erf_inv", "erfc", "is_inf", "is_neg_inf", "is_pos_inf", "lgamma",
          "sinh", "tan", "square"]
_BINARY = ["next_after", "polygamma", "zeta", "mulhi"]

for _name in _UNARY:
    define_pure(f"chlo.{_name}", syntax="chlo_elementwise", traits=(ELEMENTWISE,),
                verify=rule_for(_name))
for _name in _BINARY:
    define_pure(f"chlo.{_name}", syntax="chlo_elementwise", traits=(ELEMENTWISE,),
                verify=rule_for(_name))
define_pure("chlo.top_k", properties=("k",), syntax="top_k", verify=rule_for("top_k"))
define_pure("chlo.ragged_dot", properties=("ragged_dot_dimension_numbers", "precision_config"),
            verify=rule_for("ragged_dot"))
define_pure("chlo.scan", properties=("dimension", "is_reverse", "is_associative",
                                    "operandSegmentSizes", "resultSegmentSizes"), syntax="scan",
            num_regions=1,
            verify=rule_for("scan"))
