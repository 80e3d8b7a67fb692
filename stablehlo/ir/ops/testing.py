"""Test-only dialects: ``check.*`` assertions and ``interpreter.*`` helpers."""
from stablehlo.ir.ops.base import define, Effect
from stablehlo.ir.ops.testing_rules import rule_for

define("check.expect_eq", syntax="check_binary", effects=Effect.IO,
       verify=rule_for("check.expect_eq"))
define("check.expect_eq_const", properties=("value",), syntax="check_const",
       effects=Effect.IO, verify=rule_for("check.expect_eq_const"))
define("check.expect_almost_eq", properties=("tolerance",), syntax="check_binary",
       effects=Effect.IO, verify=rule_for("check.expect_almost_eq"))
define("check.expect_almost_eq_const", properties=("value", "tolerance"), syntax="check_const",
       effects=Effect.IO, verify=rule_for("check.expect_almost_eq_const"))
define("check.expect_close", properties=("max_ulp_difference", "min_ulp_difference"),
       syntax="check_binary", effects=Effect.IO, verify=rule_for("check.expect_close"))
define("check.expect_serialized_eq", properties=("probe_id", "iteration"),
       syntax="check_serialized", effects=Effect.IO,
       verify=rule_for("check.expect_serialized_eq"))
define("interpreter.probe", properties=("probe_id",), syntax="probe", effects=Effect.IO,
       verify=rule_for("interpreter.probe"))
define("interpreter.run_parallel", properties=("programs", "infeed"),
       effects=Effect.IO)
define("interpreter.print", syntax="print", effects=Effect.IO,
       verify=rule_for("interpreter.print"))
