"""while / if / case / call / composite / optimization_barrier / custom_call."""
import numpy as np
import pytest

from stablehlo.errors import CheckFailure, InterpreterError
from stablehlo.interpreter import evaluate
from stablehlo.text import parse_module


def run(text, *args, **kwargs):
    return evaluate(parse_module(text, "t.mlir"), args, **kwargs)


def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@pytest.mark.parametrize("n", [0, 1, 2, 10, 40])
def test_while_fibonacci(n):
    (out,) = run("""
    func.func @main(%n: tensor<i64>) -> tensor<i64> {
      %zero = stablehlo.constant dense<0> : tensor<i64>
      %one = stablehlo.constant dense<1> : tensor<i64>
      %r:3 = stablehlo.while(%i = %zero, %a = %zero, %b = %one)
          : tensor<i64>, tensor<i64>, tensor<i64>
      cond {
        %c = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      } do {
        %i1 = stablehlo.add %i, %one : tensor<i64>
        %s = stablehlo.add %a, %b : tensor<i64>
        stablehlo.return %i1, %b, %s : tensor<i64>, tensor<i64>, tensor<i64>
      }
      return %r#1 : tensor<i64>
    }""", np.int64(n))
    assert int(out) == fibonacci(n)


IF = """
func.func @main(%p: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r = "stablehlo.if"(%p) ({
    %0 = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %0 : tensor<3xf32>
  }, {
    %1 = stablehlo.add %x, %x : tensor<3xf32>
    stablehlo.return %1 : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
"""


@pytest.mark.parametrize("pred", [True, False])
def test_if(pred):
    x = np.float32([1, -2, 3])
    (out,) = run(IF, np.bool_(pred), x)
    np.testing.assert_array_equal(out, -x if pred else x + x)


CASE = """
func.func @main(%i: tensor<i32>) -> tensor<i64> {
  %r = "stablehlo.case"(%i) ({
    %a = stablehlo.constant dense<10> : tensor<i64>
    stablehlo.return %a : tensor<i64>
  }, {
    %b = stablehlo.constant dense<11> : tensor<i64>
    stablehlo.return %b : tensor<i64>
  }, {
    %c = stablehlo.constant dense<12> : tensor<i64>
    stablehlo.return %c : tensor<i64>
  }) : (tensor<i32>) -> tensor<i64>
  return %r : tensor<i64>
}
"""


@pytest.mark.parametrize("index, expected", [(0, 10), (1, 11), (2, 12), (3, 12), (-1, 12),
                                             (2**31 - 1, 12)])
def test_case_out_of_range_runs_last_branch(index, expected):
    assert int(run(CASE, np.int32(index))[0]) == expected


def test_recursive_call():
    # factorial(n) = n <= 1 ? 1 : n * factorial(n - 1), through func.call and if.
    (out,) = run("""
    func.func @main(%n: tensor<i64>) -> tensor<i64> {
      %0 = func.call @fact(%n) : (tensor<i64>) -> tensor<i64>
      return %0 : tensor<i64>
    }
    func.func private @fact(%n: tensor<i64>) -> tensor<i64> {
      %one = stablehlo.constant dense<1> : tensor<i64>
      %small = stablehlo.compare LE, %n, %one : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %r = "stablehlo.if"(%small) ({
        stablehlo.return %one : tensor<i64>
      }, {
        %m = stablehlo.subtract %n, %one : tensor<i64>
        %f = call @fact(%m) : (tensor<i64>) -> tensor<i64>
        %p = stablehlo.multiply %n, %f : tensor<i64>
        stablehlo.return %p : tensor<i64>
      }) : (tensor<i1>) -> tensor<i64>
      return %r : tensor<i64>
    }""", np.int64(10))
    assert int(out) == 3628800


def test_composite_calls_decomposition():
    (out,) = run("""
    func.func @add_n.impl(%arg0: tensor<i64>) -> tensor<i64> {
      %0 = stablehlo.constant dense<2> : tensor<i64>
      %1 = stablehlo.add %arg0, %0 : tensor<i64>
      func.return %1 : tensor<i64>
    }
    func.func @main(%x: tensor<i64>) -> tensor<i64> {
      %1 = stablehlo.composite "my.add_n" %x {
        composite_attributes = { n = 2 : i64 }, decomposition = @add_n.impl
      } : (tensor<i64>) -> tensor<i64>
      return %1 : tensor<i64>
    }""", np.int64(40))
    assert int(out) == 42


def test_optimization_barrier_passes_values():
    a, b = run("""
    func.func @main(%a: tensor<2xf32>, %b: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {
      %r:2 = stablehlo.optimization_barrier %a, %b : tensor<2xf32>, tensor<i32>
      return %r#0, %r#1 : tensor<2xf32>, tensor<i32>
    }""", np.float32([1, 2]), np.int32(7))
    assert a.tolist() == [1, 2] and int(b) == 7


def custom_call_program(target, actual, expected, dtype="f32", results="()"):
    return f"""
    func.func @main() -> tensor<i1> {{
      %a = stablehlo.constant dense<{actual}> : tensor<2x{dtype}>
      %e = stablehlo.constant dense<{expected}> : tensor<2x{dtype}>
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.custom_call @{target}(%a, %e) {{has_side_effect = true}}
          : (tensor<2x{dtype}>, tensor<2x{dtype}>) -> {results}
      return %t : tensor<i1>
    }}"""


@pytest.mark.parametrize("target, actual, expected, ok", [
    ("check.expect_eq", "[1.0, 2.0]", "[1.0, 2.0]", True),
    ("check.expect_eq", "[1.0, 2.0]", "[1.0, 2.5]", False),
    ("check.expect_almost_eq", "[1.0, 2.0]", "[1.0009, 2.0]", True),   # tolerance 1e-3
    ("check.expect_almost_eq", "[1.0, 2.0]", "[1.002, 2.0]", False),
    # 1.0 + 3 * 2**-23 is 3 ULP above 1.0 in f32; 4 ULP fails.
    ("check.expect_close", "[1.0, 2.0]", "[1.00000036, 2.0]", True),
    ("check.expect_close", "[1.0, 2.0]", "[1.00000048, 2.0]", False),
])
def test_testdata_check_targets(target, actual, expected, ok):
    text = custom_call_program(target, actual, expected)
    if ok:
        run(text)
    else:
        with pytest.raises(CheckFailure, match=f"@{target} failed"):
            run(text)


def test_check_eq_returns_i1_and_fails_on_mismatch():
    (out,) = run("""
    func.func @main() -> tensor<i1> {
      %e = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
      %a = stablehlo.constant dense<[1.00005, 2.0]> : tensor<2xf32>
      %0 = stablehlo.custom_call @check.eq(%e, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>
      return %0 : tensor<i1>
    }""")
    assert out.dtype == np.bool_ and bool(out)
    with pytest.raises(CheckFailure, match=r"actual 3, expected 4"):
        run("""
        func.func @main() -> tensor<i1> {
          %e = stablehlo.constant dense<[4]> : tensor<1xi8>
          %a = stablehlo.constant dense<[3]> : tensor<1xi8>
          %0 = stablehlo.custom_call @check.eq(%e, %a) : (tensor<1xi8>, tensor<1xi8>) -> tensor<i1>
          return %0 : tensor<i1>
        }""")


def test_unsupported_custom_call_target():
    with pytest.raises(InterpreterError, match=r"unsupported custom_call target '@foo'"):
        run(custom_call_program("foo", "[1.0, 2.0]", "[1.0, 2.0]"))
