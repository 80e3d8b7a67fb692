"""CHLO ops that appear in JAX output and the conformance suites."""
from stablehlo.ir.ops.base import define, ELEMENTWISE

_UNARY = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e", "conj", "cosh",
          "digamma", "erf", "erf_inv", "erfc", "is_inf", "is_neg_inf", "is_pos_inf", "lgamma",
          "sinh", "tan", "square"]
_BINARY = ["next_after", "polygamma", "zeta", "mulhi"]

for _name in _UNARY:
    define(f"chlo.{_name}", syntax="chlo_elementwise", traits=(ELEMENTWISE,))
for _name in _BINARY:
    define(f"chlo.{_name}", syntax="chlo_elementwise", traits=(ELEMENTWISE,))
define("chlo.top_k", properties=("k",), syntax="top_k")
define("chlo.ragged_dot", properties=("ragged_dot_dimension_numbers", "precision_config"))
define("chlo.scan", properties=("dimension", "is_reverse", "is_associative"), num_regions=1)
