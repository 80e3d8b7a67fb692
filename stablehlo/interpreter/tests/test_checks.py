"""check.* comparisons: the §10 rules, against independently derived values.

ULP references come from numpy's nextafter (one step = one ULP) and from the
bit layouts of the small float types (bf16 has 7 explicit mantissa bits, so
1 + 2**-7 is one ULP above 1; f8E4M3FN has 3, so 1.125 is).
"""
import numpy as np
import ml_dtypes
import pytest

from stablehlo.errors import CheckFailure
from stablehlo.interpreter import evaluate
from stablehlo.interpreter.checks import compare_almost_eq, compare_close, compare_eq, ulp_distance
from stablehlo.text import parse_module


def run(text, *args, **kwargs):
    return evaluate(parse_module(text, "t.mlir"), args, **kwargs)


# -- expect_eq -------------------------------------------------------------------

def test_eq_floats_by_value():
    assert compare_eq(np.float32([0.0, 1.5]), np.float32([-0.0, 1.5])) is None
    assert compare_eq(np.float32([np.nan]), np.float32([np.nan])) is not None


def test_eq_reports_worst_mismatch():
    message = compare_eq(np.int32([[1, 2], [3, 4]]), np.int32([[1, 2], [3, 9]]))
    assert "1 of 4" in message and "(1, 1)" in message
    assert "actual 4" in message and "expected 9" in message


def test_eq_complex_both_parts():
    assert compare_eq(np.complex64([1 + 2j]), np.complex64([1 + 2j])) is None
    assert compare_eq(np.complex64([1 + 2j]), np.complex64([1 + 3j])) is not None


def test_eq_sub_byte_and_bool():
    i4 = np.array([-8, 7], dtype=ml_dtypes.int4)
    assert compare_eq(i4, i4.copy()) is None
    assert compare_eq(i4, np.array([-8, 6], dtype=ml_dtypes.int4)) is not None
    assert compare_eq(np.bool_([True]), np.bool_([False])) is not None


def test_eq_shape_mismatch():
    assert "shape" in compare_eq(np.zeros(3), np.zeros(4))


# -- expect_almost_eq ---------------------------------------------------------------

def test_almost_eq_default_tolerance():
    assert compare_almost_eq(np.float64([5.0]), np.float64([5.0001])) is None
    assert compare_almost_eq(np.float64([5.0]), np.float64([5.0003])) is not None
    assert compare_almost_eq(np.float64([5.0]), np.float64([5.1]), 0.1 + 1e-12) is None


def test_almost_eq_non_finite():
    inf, nan = np.inf, np.nan
    assert compare_almost_eq(np.float32([inf, -inf, nan]), np.float32([inf, -inf, nan])) is None
    assert compare_almost_eq(np.float32([inf]), np.float32([3e38])) is not None
    assert compare_almost_eq(np.float32([nan]), np.float32([0.0])) is not None
    assert compare_almost_eq(np.float32([inf]), np.float32([-inf])) is not None


def test_almost_eq_complex_parts_separately():
    # |difference| of the complex numbers is 1.41e-4 but each part is within 1e-4.
    assert compare_almost_eq(np.complex128([1 + 1j]), np.complex128([1.0001 + 1.0001j])) is None
    assert compare_almost_eq(np.complex128([1 + 1j]), np.complex128([1 + 1.001j])) is not None


def test_almost_eq_bf16():
    a = np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16)
    assert compare_almost_eq(a, a.copy()) is None
    assert compare_almost_eq(a, np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16)) is not None


# -- expect_close ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_steps_match_nextafter(dtype):
    x = dtype(1.7)
    up1 = np.nextafter(x, dtype(np.inf))
    up3 = np.nextafter(np.nextafter(up1, dtype(np.inf)), dtype(np.inf))
    assert ulp_distance(np.array([x]), np.array([up1]))[0] == 1
    assert ulp_distance(np.array([x]), np.array([up3]))[0] == 3
    assert compare_close(np.array([x]), np.array([up1])) is None
    assert compare_close(np.array([x]), np.array([up3]), max_ulp=2) is not None


def test_ulp_opposite_signs_and_zeros():
    tiny = np.nextafter(np.float32(0), np.float32(1))  # smallest subnormal
    assert ulp_distance(np.float32([tiny]), np.float32([-tiny]))[0] == 2
    assert ulp_distance(np.float32([0.0]), np.float32([-0.0]))[0] == 0


def test_ulp_non_finite():
    inf, nan = np.inf, np.nan
    assert ulp_distance(np.float32([nan]), np.float32([nan]))[0] == 0
    assert ulp_distance(np.float32([inf]), np.float32([inf]))[0] == 0
    big = np.finfo(np.float32).max
    assert ulp_distance(np.float32([inf]), np.float32([big]))[0] == np.inf
    assert ulp_distance(np.float32([nan]), np.float32([1.0]))[0] == np.inf


def test_ulp_small_float_types_use_their_own_bits():
    bf = ml_dtypes.bfloat16
    assert ulp_distance(np.array([1.0], bf), np.array([1.0 + 2 ** -7], bf))[0] == 1
    f8 = ml_dtypes.float8_e4m3fn
    assert ulp_distance(np.array([1.0], f8), np.array([1.125], f8))[0] == 1
    assert ulp_distance(np.array([1.0], f8), np.array([1.375], f8))[0] == 3


def test_ulp_f64_neighbours_are_exact():
    x = np.float64(1e300)
    assert ulp_distance(np.array([x]), np.array([np.nextafter(x, np.inf)]))[0] == 1


def test_ulp_complex_takes_larger_part():
    re1 = np.nextafter(np.float32(2), np.float32(3))
    a = np.array([complex(2, 5)], np.complex64)
    b = np.array([complex(re1, 5)], np.complex64)
    assert ulp_distance(a, b)[0] == 1


def test_close_min_ulp():
    x = np.float32([1.0])
    assert compare_close(x, x, max_ulp=3, min_ulp=1) is not None


# -- the ops, through the evaluator ------------------------------------------------------

def test_check_ops_pass():
    run("""
    func.func @main() {
      %a = stablehlo.constant dense<[-2, 0, 2]> : tensor<3xi64>
      check.expect_eq %a, %a : tensor<3xi64>
      check.expect_eq_const %a, dense<[-2, 0, 2]> : tensor<3xi64>
      %f = stablehlo.constant dense<5.0> : tensor<f64>
      check.expect_almost_eq_const %f, dense<5.1> : tensor<f64> {tolerance = 0.2 : f64}
      %h = stablehlo.constant dense<5.0> : tensor<f16>
      %g = stablehlo.constant dense<5.010> : tensor<f16>
      check.expect_close %h, %g, max_ulp_difference = 3 : tensor<f16>, tensor<f16>
      func.return
    }""")


def test_check_failure_names_place_and_values():
    with pytest.raises(CheckFailure) as info:
        run("""
        func.func @main() {
          %a = stablehlo.constant dense<[1, 2, 3]> : tensor<3xi32>
          check.expect_eq_const %a, dense<[1, 2, 4]> : tensor<3xi32>
          func.return
        }""")
    message = str(info.value)
    assert "t.mlir:4:" in message and "check.expect_eq_const" in message
    assert "actual 3" in message and "expected 4" in message


def test_generic_check_on_i2():
    run("""
    func.func @main() {
      %c = stablehlo.constant dense<[1, 0, -1, -2]> : tensor<4xi2>
      "check.expect_eq_const"(%c) <{value = dense<[1, 0, -1, -2]> : tensor<4xi2>}>
          : (tensor<4xi2>) -> ()
      return
    }""")


PROBE = """
func.func @main() {
  %init = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %three = stablehlo.constant dense<3> : tensor<i64>
  %r = stablehlo.while(%i = %init) : tensor<i64>
  cond {
    %c = stablehlo.compare LT, %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %n = stablehlo.add %i, %one : tensor<i64>
    %p = interpreter.probe %n, probe_id = "counter" : tensor<i64>
    stablehlo.return %p : tensor<i64>
  }
  check.expect_serialized_eq %one, probe_id = "counter", iter = 0 : tensor<i64>
  check.expect_serialized_eq %three, probe_id = "counter", iter = 2 : tensor<i64>
  func.return
}
"""


def test_probe_in_memory():
    run(PROBE)


def test_probe_files(tmp_path):
    run(PROBE, probe_dir=str(tmp_path))
    index = (tmp_path / "index.csv").read_text().splitlines()
    assert len(index) == 3 and all(line.startswith("counter,tensor<i64>,") for line in index)
    saved = [np.load(line.rsplit(",", 1)[1]) for line in index]
    assert [int(s) for s in saved] == [1, 2, 3]


def test_serialized_eq_mismatch_and_missing_iteration():
    bad = PROBE.replace("iter = 2", "iter = 1")
    with pytest.raises(CheckFailure):
        run(bad)
    missing = PROBE.replace("iter = 2", "iter = 7")
    with pytest.raises(Exception, match="no iteration 7"):
        run(missing)


def test_probe_bf16_round_trip(tmp_path):
    run("""
    func.func @main() {
      %0 = stablehlo.constant dense<[1.0, 2.5, -3.0]> : tensor<3xbf16>
      %1 = interpreter.probe %0, probe_id = "b" : tensor<3xbf16>
      check.expect_serialized_eq %1, probe_id = "b" : tensor<3xbf16>
      func.return
    }""", probe_dir=str(tmp_path))
