"""Contractions, convolutions, transforms and factorizations."""
from stablehlo.ir.ops.base import define, define_pure, Effect
from stablehlo.ir.ops.linalg_rules import rule_for

_CONV = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "window_reversal",
         "dimension_numbers", "feature_group_count", "batch_group_count", "precision_config")

define_pure("stablehlo.dot_general", properties=("dot_dimension_numbers", "precision_config",
                                                 "algorithm"), syntax="dot_general",
            verify=rule_for("dot_general"))
define_pure("stablehlo.dot", properties=("precision_config",), syntax="dot", verify=rule_for("dot"))
define_pure("stablehlo.einsum", properties=("einsum_config",), syntax="einsum")
define_pure("stablehlo.unary_einsum", properties=("einsum_config",), syntax="unary_einsum")
define_pure("stablehlo.convolution", properties=_CONV, syntax="convolution",
            verify=rule_for("convolution"))
define_pure("stablehlo.dynamic_conv", properties=_CONV, verify=rule_for("dynamic_conv"))
define_pure("stablehlo.fft", properties=("fft_type", "fft_length"), syntax="fft",
            verify=rule_for("fft"))
define_pure("stablehlo.cholesky", properties=("lower",), syntax="cholesky",
            verify=rule_for("cholesky"))
define_pure("stablehlo.triangular_solve", properties=("left_side", "lower", "unit_diagonal",
                                                      "transpose_a"),
            verify=rule_for("triangular_solve"))
define_pure("stablehlo.batch_norm_training", properties=("epsilon", "feature_index"),
            verify=rule_for("batch_norm_training"))
define_pure("stablehlo.batch_norm_inference", properties=("epsilon", "feature_index"),
            verify=rule_for("batch_norm_inference"))
define_pure("stablehlo.batch_norm_grad", properties=("epsilon", "feature_index"),
            verify=rule_for("batch_norm_grad"))
define("stablehlo.rng", properties=("rng_distribution",), syntax="rng",
       effects=Effect.HIDDEN_STATE, verify=rule_for("rng"))
define_pure("stablehlo.rng_bit_generator", properties=("rng_algorithm",),
            syntax="rng_bit_generator", verify=rule_for("rng_bit_generator"))
