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

# slow: the README's pytest runs this file; Bazel's runner leaves it out (among the
# costliest targets, and CI would pay for it twice)
pytestmark = pytest.mark.slow

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


REDUCE = """
func.func @main(%x: tensor<8x64xT>, %init: tensor<T>) -> tensor<8xT> {
  %v = stablehlo.reverse %x, dims = [1] : tensor<8x64xT>
  %r = stablehlo.reduce(%v init: %init) across dimensions = [1] :
      (tensor<8x64xT>, tensor<T>) -> tensor<8xT>
    reducer(%a: tensor<T>, %b: tensor<T>) {
      %c = OP : tensor<T>
      stablehlo.return %c : tensor<T>
    }
  return %r : tensor<8xT>
}
"""
_MONOIDS = ["add", "multiply", "maximum", "minimum", "and", "or", "xor"]
_ELEMENT_TYPES = ["f32", "f64", "f16", "bf16", "i1", "i8", "i32", "ui32", "i64", "ui64"]
# the bitwise monoids take integers only
_CASES = [(op, t) for op in _MONOIDS for t in _ELEMENT_TYPES
          if not (op in ("and", "or", "xor") and t.startswith(("f", "bf")))]


def _reduce_program(op: str, element_type: str, operands: str) -> str:
    return REDUCE.replace("OP", f"stablehlo.{op} {operands}").replace("T>", f"{element_type}>")


@pytest.mark.parametrize("operands", ["%a, %b", "%b, %a"])
@pytest.mark.parametrize("op, element_type", _CASES)
def test_every_reduce_fusion_formed_has_a_kernel(op, element_type, operands):
    # legality and the hook recognise the body as the reduction template does, so a fused
    # reduce is one the template writes; an unfused one is one the renderer cannot compute
    from pjrt.plugins.cpu.codegen.target import CPU_TARGET
    from stablehlo.ir.regions import region_monoid
    from xla_core.codegen import fusion_kernel
    from xla_core.fusion.legality import FUSION_NAME
    module = stablehlo.parse(_reduce_program(op, element_type, operands))
    reduce = next(o for o in module.walk() if o.name == "stablehlo.reduce")
    monoid = region_monoid(reduce.regions[0])
    combiner = reduce.regions[0].blocks[0].operations[0]
    identity = monoid.identity(reduce.results[0].type.element_type)
    renderable = CPU_TARGET.renderer.why_not(combiner) is None and identity is not None
    fuse_module(module, codegen=CPU_CODEGEN)
    fusions = [o for o in module.functions()[0].body.operations
               if o.name == "stablehlo.composite" and o.attr("name").value == FUSION_NAME]
    assert len(fusions) == (1 if renderable else 0)
    for fusion in fusions:
        text, _, _ = fusion_kernel(fusion, module, CPU_TARGET)  # raises NotGeneratable
        assert "acc0" in text  # the reduction template's accumulator


@pytest.mark.parametrize("op, element_type", [("xor", "ui32"), ("maximum", "f32"),
                                              ("minimum", "i8")])
def test_a_reduce_with_its_operands_swapped_is_generated_and_runs_right(op, element_type):
    text = _reduce_program(op, element_type, "%b, %a")
    rng = np.random.default_rng(1)
    if element_type == "f32":
        x = rng.standard_normal((8, 64)).astype(np.float32)
    else:
        x = rng.integers(-100 if element_type == "i8" else 0, 100, (8, 64)).astype(
            np.dtype("uint32" if element_type == "ui32" else element_type.replace("i", "int")))
    init = np.asarray(7, x.dtype)
    exe = pjrt.make_client("cpu").compile(text, SYNC)
    assert len(exe.program.fusions_generated) == 1
    assert not exe.program.fusions_inlined
    np.testing.assert_array_equal(exe(x, init)[0], evaluate(stablehlo.parse(text), [x, init])[0])
