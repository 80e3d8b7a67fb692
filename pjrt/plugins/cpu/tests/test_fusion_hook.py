"""The cpu backend's fusion hook (codegen/hook.py): every fusion its pipeline forms has a
generated kernel, so no fusion is formed and then run op by op; ops the generator cannot
compute stay out of fusions while their neighbours still fuse."""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import CompileOptions
from pjrt.plugins.cpu.codegen.hook import CPU_CODEGEN
from pjrt.plugins.cpu.tests import tier_bits
from stablehlo.interpreter import evaluate
from tools.conformance.slice import choose_testdata
from xla_core.fusion import fuse_module
from xla_core.testing.conformance import conformance_dir

TESTDATA = conformance_dir("testdata")
SYNC = CompileOptions(env_option_overrides={"async_codegen": False})

SHIFT = """
func.func @main(%x: tensor<64x128xui32>, %y: tensor<64x128xui32>) -> tensor<64x128xui32> {
  %a = stablehlo.add %x, %y : tensor<64x128xui32>
  %s = stablehlo.shift_left %a, %y : tensor<64x128xui32>
  %m = stablehlo.multiply %s, %x : tensor<64x128xui32>
  %o = stablehlo.xor %m, %a : tensor<64x128xui32>
  return %o : tensor<64x128xui32>
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))


def _fused_ops(module) -> list[str]:
    return sorted(op.name for f in module.functions() if f.name.startswith("fused_")
                  for op in f.body.operations if op.name != "func.return")


def test_an_op_the_generator_lacks_stays_out_and_its_neighbours_fuse():
    plain = stablehlo.parse(SHIFT)
    fuse_module(plain)
    assert "stablehlo.shift_left" in _fused_ops(plain)  # without the hook: one fusion
    hooked = stablehlo.parse(SHIFT)
    explain = fuse_module(hooked, codegen=CPU_CODEGEN)
    assert "stablehlo.shift_left" not in _fused_ops(hooked)
    assert explain.counters["fusions"] == 1
    assert _fused_ops(hooked) == ["stablehlo.multiply", "stablehlo.xor"]


def test_the_hook_names_what_the_generator_lacks():
    module = stablehlo.parse(SHIFT.replace("ui32", "f16").replace("shift_left", "add")
                             .replace("xor", "maximum"))
    ops = [op for op in module.functions()[0].body.operations if op.name != "func.return"]
    assert "f16" in CPU_CODEGEN.why_not_op(ops[0])
    shift = stablehlo.parse(SHIFT).functions()[0].body.operations[1]
    assert "shift_left" in CPU_CODEGEN.why_not_op(shift)


def test_program_with_an_op_the_generator_lacks_runs_right():
    rng = np.random.default_rng(0)
    args = [rng.integers(0, 2**32, (64, 128), dtype=np.uint32),
            rng.integers(0, 40, (64, 128), dtype=np.uint32)]
    exe = pjrt.make_client("cpu").compile(SHIFT, SYNC)
    assert len(exe.program.fusions_generated) == 1
    assert not exe.program.fusions_inlined
    np.testing.assert_array_equal(exe(*args)[0], evaluate(stablehlo.parse(SHIFT), args)[0])


def _inlined(text: str) -> list:
    exe = pjrt.make_client("cpu").compile(text, SYNC)
    return exe.program.fusions_inlined


@pytest.mark.parametrize("name", sorted(tier_bits.FUSED))
def test_no_fused_program_runs_a_fusion_op_by_op(name):
    assert _inlined(tier_bits.FUSED[name]) == []


@pytest.mark.skipif(TESTDATA is None, reason="conformance suites not found")
def test_no_conformance_slice_program_runs_a_fusion_op_by_op():
    inlined = {}
    for path in choose_testdata(TESTDATA):
        found = _inlined(path.read_text())
        if found:
            inlined[path.name] = found
    assert inlined == {}
