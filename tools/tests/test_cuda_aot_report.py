"""tools/cuda_aot_report.py: a testdata file becomes its program, and programs are reported
as claimed and compiled, or unclaimed with the reason."""
import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from pjrt.plugins.cuda import nvcc
from tools import cuda_aot_report

TESTDATA = """
module @jit_main {
  func.func public @main() -> (tensor<2x2xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<2x2xf32>
    %1 = call @expected() : () -> tensor<2x2xf32>
    %2 = stablehlo.abs %0 : tensor<2x2xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true}
        : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
    return %2 : tensor<2x2xf32>
  }
  func.func private @inputs() -> (tensor<2x2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[[-1.5, 2.0], [0.25, -3.0]]> : tensor<2x2xf32>
    return %cst : tensor<2x2xf32>
  }
  func.func private @expected() -> (tensor<2x2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[[1.5, 2.0], [0.25, 3.0]]> : tensor<2x2xf32>
    return %cst : tensor<2x2xf32>
  }
}
"""


def test_testdata_inputs_become_parameters():
    module = stablehlo.parse(TESTDATA)
    cuda_aot_report.program_of_testdata(module)
    main = module.lookup("main")
    assert [str(t) for t in main.type.inputs] == ["tensor<2x2xf32>"]
    names = [op.name for op in main.body.operations]
    assert "stablehlo.custom_call" not in names and "func.call" not in names
    x = np.array([[-4.0, 0.5], [2.0, -0.0]], np.float32)
    (got,) = evaluate(module, [x])
    np.testing.assert_array_equal(got, np.abs(x))


@pytest.mark.skipif(nvcc.find_tool("nvcc") is None, reason="nvcc (CUDA toolkit) not found")
def test_compile_one_reports_compiled_and_unclaimed(tmp_path):
    compiled = cuda_aot_report.compile_one("abs", TESTDATA, True, str(tmp_path / "a"))
    assert compiled["status"] == "compiled" and compiled["kernels"] == 1
    assert compiled["spills"] == []
    sort = TESTDATA.replace("stablehlo.abs %0 : tensor<2x2xf32>",
                            '"stablehlo.sort"(%0) ({\n    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n'
                            "      %c = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>)"
                            " -> tensor<i1>\n      stablehlo.return %c : tensor<i1>\n"
                            "    }) {dimension = 0 : i64} : (tensor<2x2xf32>) -> tensor<2x2xf32>")
    unclaimed = cuda_aot_report.compile_one("sort", sort, True, str(tmp_path / "s"))
    assert unclaimed["status"] == "unclaimed" and "stablehlo.sort" in unclaimed["reason"]
