"""Check ops on the cuda backend (host_checks.py), on the fake driver: the program computes
the checked values as extra results, the host evaluates the checks with the interpreter's
kernels. Programs here are GEMMs and copies, which the fake driver really computes (its
kernels are only recorded), and every verdict is compared with the cpu backend's."""
import numpy as np
import pytest

import pjrt
from stablehlo.errors import CheckFailure
from stablehlo.text import parse_module

from pjrt.plugins.cuda import aot
from pjrt.plugins.cuda.host_checks import CHECKS_FILE, split_checks

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
B = np.array([[1.0, 0.0], [0.5, 2.0], [-1.0, 1.0]], np.float32)


def dot_checked(expected: np.ndarray, form: str) -> str:
    """``a @ b`` returned, and checked against ``expected`` by a check op or the testdata's
    custom call."""
    values = ", ".join("[" + ", ".join(f"{v:.6e}" for v in row) + "]" for row in expected)
    check = {
        "op": f"check.expect_almost_eq_const %0, dense<[{values}]> : tensor<2x2xf32>",
        "custom_call": f"stablehlo.custom_call @check.expect_close(%0, %e) "
                       f"{{has_side_effect = true}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()",
    }[form]
    return f"""
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {{
  %e = stablehlo.constant dense<[{values}]> : tensor<2x2xf32>
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  {check}
  return %0 : tensor<2x2xf32>
}}
"""


def verdict(client, program: str):
    """The result, or the CheckFailure's class, of running ``program`` on A and B."""
    try:
        (result,) = client.compile(program)(A, B)
        return np.asarray(result)
    except CheckFailure as exc:
        return type(exc)


@pytest.mark.parametrize("form", ["op", "custom_call"])
def test_checks_pass_and_fail_as_on_cpu(fake_cuda, form):
    cuda, cpu = pjrt.make_client("cuda"), pjrt.make_client("cpu")
    product = A.astype(np.float64) @ B.astype(np.float64)
    right = dot_checked(product, form)
    got = verdict(cuda, right)
    np.testing.assert_allclose(got, product, rtol=1e-6)  # one result: the checked one hidden
    np.testing.assert_allclose(verdict(cpu, right), product, rtol=1e-6)
    wrong = dot_checked(product + np.array([[0, 0], [0, 0.5]]), form)
    assert verdict(cuda, wrong) is CheckFailure
    assert verdict(cpu, wrong) is CheckFailure


def test_a_failing_check_is_the_events_error_and_the_results(fake_cuda):
    client = pjrt.make_client("cuda")
    exe = client.compile(dot_checked(np.zeros((2, 2)), "op"))
    (result,), event = exe.execute([A, B], with_event=True)
    with pytest.raises(CheckFailure, match=r"^<string>:6:3: 'check.expect_almost_eq_const': "
                                           r"check.expect_almost_eq_const failed: 4 of 4 "
                                           r"elements differ"):
        event.wait()
    assert isinstance(event.error(), CheckFailure)
    with pytest.raises(CheckFailure):
        result.to_numpy()


def test_split_checks_moves_the_checked_values_to_the_results():
    module = parse_module(dot_checked(np.ones((2, 2)), "custom_call"))
    func = module.lookup("main")
    checks = split_checks(func)
    assert not any(op.name == "stablehlo.custom_call" for op in func.body.operations)
    returned = func.body.operations[-1].operands
    assert len(returned) == 3 and [str(t) for t in func.type.results] == \
        ["tensor<2x2xf32>"] * 3
    (call,) = [op for op in checks.lookup("main").body.operations if op.name != "func.return"]
    assert call.operands == list(checks.lookup("main").body.arguments)
    assert returned[1:] == [returned[0], func.body.operations[0].results[0]]  # %0, then %e


def test_aot_directory_holds_the_checks(fake_cuda, tmp_path):
    program = dot_checked(A.astype(np.float64) @ B, "op")
    out = aot.compile_module(parse_module(program), out_dir=tmp_path / "x.cuda")
    assert "check.expect_almost_eq_const" in (out / CHECKS_FILE).read_text()
    client = pjrt.make_client("cuda")
    exe = client.load_directory(out, program)
    np.testing.assert_allclose(exe(A, B)[0], A @ B, rtol=1e-6)


def test_probe_checks_are_refused_with_their_place():
    program = """
func.func @main(%x: tensor<2xf32>) {
  check.expect_serialized_eq %x, probe_id = "p", iter = 0 : tensor<2xf32>
  func.return
}
"""
    ok, why = aot.claims(parse_module(program))
    assert not ok and "reads the interpreter's probes" in why and "3:3" in why
