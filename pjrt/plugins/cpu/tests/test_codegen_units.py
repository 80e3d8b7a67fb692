"""A program's generated kernels in several translation units, compiled in parallel into one
library (codegen/program.py ``_units``, codegen/build.py ``compile_units``): identical fusions
compile once, every kernel lives in exactly one unit with the math it uses, and the results
are the interpreter's."""
from __future__ import annotations

import ctypes
import logging
import re

import numpy as np
import pytest

from pjrt.plugins.cpu.codegen import abi, build, program
from pjrt.plugins.cpu.tests.fusion_cases import check_against_interpreter

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C++ compiler")

_SOFTMAX_ROWS = """
  %m{i} = stablehlo.reduce(%{a} init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  %mb{i} = stablehlo.broadcast_in_dim %m{i}, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
  %s{i} = stablehlo.subtract %{a}, %mb{i} : tensor<8x32xf32>
  %e{i} = stablehlo.exponential %s{i} : tensor<8x32xf32>
  %z{i} = stablehlo.reduce(%e{i} init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  %zb{i} = stablehlo.broadcast_in_dim %z{i}, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
  %y{i} = stablehlo.divide %e{i}, %zb{i} : tensor<8x32xf32>
"""

# Two softmaxes of different arguments (the pipeline makes two identical fusions of them)
# and a tanh loop: two distinct kernels, one with exp, one with tanh.
_THREE_FUSIONS = ("""
func.func @main(%x: tensor<8x32xf32>, %w: tensor<8x32xf32>, %v: tensor<64xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<64xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
""" + _SOFTMAX_ROWS.replace("{i}", "0").replace("{a}", "x")
    + _SOFTMAX_ROWS.replace("{i}", "1").replace("{a}", "w") + """
  %t = stablehlo.tanh %v : tensor<64xf32>
  %two = stablehlo.constant dense<2.0> : tensor<64xf32>
  %u = stablehlo.multiply %t, %two : tensor<64xf32>
  return %y0, %y1, %u : tensor<8x32xf32>, tensor<8x32xf32>, tensor<64xf32>
}""")


def _kernel_symbols(unit: str) -> list[str]:
    return re.findall(r'extern "C" void (ohk_\w+)\(', unit)


def test_identical_fusions_compile_once_and_units_split_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "jobs", lambda: 3)
    monkeypatch.setattr(program, "MIN_UNIT_BYTES", 1)  # small kernels get units of their own
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 32)).astype(np.float32),
            rng.standard_normal((8, 32)).astype(np.float32),
            rng.standard_normal(64).astype(np.float32)]
    before = len(build.COMPILE_TIMES)
    lib = check_against_interpreter(_THREE_FUSIONS, args).fusion_library
    assert len(build.COMPILE_TIMES) - before == 1   # one library, however many units
    symbols = [symbol for symbol, _ in lib.entries.values()]
    assert len(symbols) == 3 and len(set(symbols)) == 2   # the two softmaxes share a kernel
    # Two kernels for three cores: one unit each, each kernel defined once.
    assert len(lib.units) == 2
    defined = [_kernel_symbols(unit) for unit in lib.units]
    assert sorted(s for unit in defined for s in unit) == sorted(set(symbols))
    # Each unit holds the prelude and only the math its kernel calls.
    exp_unit, = [u for u in lib.units if "ohm_exp(" in u]
    tanh_unit, = [u for u in lib.units if "ohm_tanh(" in u]
    assert exp_unit is not tanh_unit
    assert all(unit.startswith(abi.PRELUDE) for unit in lib.units)


def test_units_are_balanced_and_small_kernels_stay_together(monkeypatch):
    monkeypatch.setattr(program, "MIN_UNIT_BYTES", 4096)
    kernels = [("/*a*/" + " " * 5000, {"exp"}), ("/*b*/" + " " * 3000, set()),
               ("/*c*/" + " " * 3000, {"tanh"})]
    units = program._units(kernels, jobs=2)
    assert len(units) == 2
    # Largest first, each to the smallest unit: a alone, then b and c together.
    assert "/*a*/" in units[0] and "/*b*/" in units[1] and "/*c*/" in units[1]
    assert "ohm_exp(" in units[0] and "ohm_tanh(" not in units[0]
    assert "ohm_tanh(" in units[1] and "ohm_exp(" not in units[1]
    assert program._units(kernels, jobs=2) == units   # the kernel cache keys on them
    # Under MIN_UNIT_BYTES of kernel text in all: one unit, whatever the cores.
    small = [(f"/*{k}*/", set()) for k in range(5)]
    assert len(program._units(small, jobs=8)) == 1
    assert len(program._units(kernels, jobs=1)) == 1


def test_compile_units_links_every_unit_into_one_library(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))
    units = ['extern "C" int ohm_test_one() { return 1; }\n',
             'extern "C" int ohm_test_two() { return 2; }\n']
    path = build.compile_units(units)
    library = ctypes.CDLL(path)
    assert (library.ohm_test_one(), library.ohm_test_two()) == (1, 2)
    assert build.compile_units(units, now=False) == path   # a cache hit compiles nothing
    with pytest.raises(build.Deferred):
        build.compile_units(list(reversed(units)), now=False)   # other units, other key


def test_a_unit_that_does_not_compile_fails_the_library(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))
    units = ['extern "C" int ohm_test_fine() { return 1; }\n', "this is not C++\n"]
    with caplog.at_level(logging.WARNING, logger="openhlo.cpu"):
        assert build.compile_units(units) is None
    assert "failed to compile" in caplog.text
    assert not list((tmp_path / "cpu_kernels").glob("*.so"))
