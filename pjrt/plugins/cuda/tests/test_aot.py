"""Ahead-of-time compilation for the cuda backend, checked without a GPU: the generated CUDA C
compiles with nvcc for sm_90a, ptxas reports no spills for elementwise and reduction
kernels, the cubin holds the kernels, the executable description's buffers cover every
step, and an op the backend cannot run is refused with its place. Results are checked in
test_aot_numerics.py (on the CPU) and by the runtime's device script."""
import json
import pathlib
import subprocess

import numpy as np
import pytest

import stablehlo
from pjrt.errors import UnimplementedError
from pjrt.plugins.cuda import aot, nvcc
from pjrt.plugins.cuda.tests.programs import (ELEMENTWISE, MIXED, REPO, SOFTMAX,
                                              SOFTMAX_LONG_ROWS, SORT)

needs_nvcc = pytest.mark.skipif(nvcc.find_tool("nvcc") is None,
                                reason="nvcc (CUDA toolkit) not found on PATH or /usr/local/cuda*")


def _compile(text: str, tmp_path) -> tuple[pathlib.Path, dict, dict]:
    out = aot.compile_module(stablehlo.parse(text), out_dir=tmp_path / "exe")
    return (out, json.loads((out / "ptxas.json").read_text()),
            json.loads((out / "executable.json").read_text()))


@needs_nvcc
def test_elementwise_kernels_compile_for_sm90a_without_spills(tmp_path):
    out, ptxas, exe = _compile(ELEMENTWISE, tmp_path)
    assert exe["target"] == "sm_90a" and exe["cubin"] == "kernels.cubin"
    assert [k["kind"] for k in ptxas.values()] == ["elementwise"]
    assert aot.spills(ptxas) == []
    assert all(k["registers"] > 0 for k in ptxas.values())
    cubin = (out / "kernels.cubin").read_bytes()
    assert cubin[:4] == b"\x7fELF"
    for name in ptxas:  # each kernel is a code section of the cubin
        assert f".text.{name}\0".encode() in cubin


@needs_nvcc
def test_softmax_row_reduction_compiles_without_spills(tmp_path):
    _, ptxas, exe = _compile(SOFTMAX, tmp_path)
    assert "reduction" in [k["kind"] for k in ptxas.values()]
    assert aot.spills(ptxas) == []
    launches = [s for s in exe["steps"] if s["op"] == "launch"]
    assert {s["kernel"] for s in launches} == set(ptxas)


@needs_nvcc
def test_long_rows_take_a_warp_each(tmp_path):
    out, ptxas, exe = _compile(SOFTMAX_LONG_ROWS, tmp_path)
    assert aot.spills(ptxas) == []
    (launch,) = [s for s in exe["steps"] if s["op"] == "launch"]
    assert launch["grid"][0] * launch["block"][0] >= 32 * 32  # 32 rows, 32 lanes each
    assert "__shfl_xor_sync" in (out / "kernels.cu").read_text()


@needs_nvcc
def test_cuobjdump_lists_the_kernels(tmp_path):
    cuobjdump = nvcc.find_tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the nvidia-cuda-cuobjdump wheel provides one)")
    out, ptxas, _ = _compile(SOFTMAX, tmp_path)
    sass = subprocess.run([cuobjdump, "-sass", str(out / "kernels.cubin")],
                          capture_output=True, text=True, check=True).stdout
    for name in ptxas:
        assert f"Function : {name}" in sass


@needs_nvcc
def test_ptxas_report_shows_spills_when_registers_run_out(tmp_path):
    # A kernel that keeps 64 values of a chain live (each needs the one before), squeezed
    # into 24 registers (sm_90's least), must spill: the parser sees what ptxas reports.
    source = tmp_path / "spill.cu"
    body = "  float v0 = p[0];\n" + "".join(f"  float v{i} = v{i - 1} * p[{i}] + 1.0f;\n"
                                            for i in range(1, 64))
    total = " + ".join(f"v{i} * v{(i * 7) % 64}" for i in range(64))
    source.write_text('extern "C" __global__ void squeezed(float* p) {\n' + body +
                      f"  p[threadIdx.x] = {total};\n}}\n")
    done = subprocess.run([nvcc.find_tool("nvcc"), "-cubin", "-arch=sm_90a", "-maxrregcount=24",
                           "-Xptxas", "-v", "-o", str(tmp_path / "spill.cubin"), str(source)],
                          capture_output=True, text=True, check=True)
    report = nvcc.parse_ptxas(done.stdout + done.stderr)
    assert report["squeezed"]["registers"] <= 24
    assert aot.spills(report) == ["squeezed"]


def test_unclaimed_op_is_refused_with_its_place(tmp_path):
    module = stablehlo.parse(SORT, "sorted.mlir")
    ok, why = aot.claims(module)
    assert not ok
    assert "sorted.mlir:3:" in why and "stablehlo.sort" in why
    with pytest.raises(UnimplementedError, match="stablehlo.sort"):
        aot.compile_module(module, out_dir=tmp_path / "exe")


def test_unknown_target_is_refused(tmp_path):
    with pytest.raises(UnimplementedError, match="sm_80"):
        aot.compile_module(stablehlo.parse(SOFTMAX), target="sm_80", out_dir=tmp_path)


def _extent(ref, nbytes) -> tuple[int, int]:
    """(buffer id, end offset) a step touches through ``ref`` for ``nbytes``."""
    return (ref, nbytes) if isinstance(ref, int) else (ref["id"], ref["offset"] + nbytes)


def _gemm_extents(step) -> list[tuple]:
    # Independent of gemm.py: the last element each operand's strides reach, row-major.
    size = {"f32": 4, "f16": 2, "bf16": 2}[step["dtype"]]
    m, n, k, batch = step["m"], step["n"], step["k"], step["batch"]
    a_rows, a_cols = (k, m) if step["trans_a"] else (m, k)
    b_rows, b_cols = (n, k) if step["trans_b"] else (k, n)
    return [_extent(step[name], size * ((batch - 1) * step[f"stride_{name}"] +
                                        (rows - 1) * step[f"ld{name}"] + cols))
            for name, rows, cols in (("a", a_rows, a_cols), ("b", b_rows, b_cols),
                                     ("c", m, n))]


@needs_nvcc
def test_buffers_cover_every_step(tmp_path):
    _, _, exe = _compile(MIXED, tmp_path)
    buffers = {b["id"]: b for b in exe["buffers"]}
    sizes = {"f32": 4, "bf16": 2, "f16": 2}
    for i, p in enumerate(exe["params"]):
        (param,) = [b for b in exe["buffers"] if b.get("param") == i]
        assert param["kind"] == "param"
        assert param["bytes"] == int(np.prod(p["shape"])) * sizes[p["dtype"]]
    touched = []
    for step in exe["steps"]:
        if step["op"] == "gemm":
            touched += _gemm_extents(step)
        elif step["op"] == "copy":
            touched += [_extent(step["src"], step["bytes"]), _extent(step["dst"], step["bytes"])]
        else:
            touched += [_extent(ref, n) for ref, n in zip(step["args"], step["bytes"])]
    for buffer_id, end in touched:
        assert end <= buffers[buffer_id]["bytes"], (buffer_id, end)
    # the results, by their shapes: [4,8,32], [1024], [5,24], [5], [24,5] of f32
    assert [buffers[r]["bytes"] for r in exe["results"]] == \
        [4 * 8 * 32 * 4, 1024 * 4, 5 * 24 * 4, 5 * 4, 24 * 5 * 4]
    assert len(set(exe["results"])) == 5
    (gemm,) = [s for s in exe["steps"] if s["op"] == "gemm"]
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["batch"]) == (8, 32, 16, 4)
    assert (gemm["stride_a"], gemm["stride_b"], gemm["stride_c"]) == (8 * 16, 16 * 32, 8 * 32)
    # the returned parameter is copied into a result buffer of its own
    copies = [s for s in exe["steps"] if s["op"] == "copy"]
    assert any(s["src"] == 2 and s["dst"] == exe["results"][4] for s in copies)


@needs_nvcc
def test_cli_compile_hello(tmp_path, capsys):
    from tools.cli import main
    assert main(["compile", str(REPO / "examples" / "hello.mlir"), "--backend", "cuda",
                 "-o", str(tmp_path / "hello")]) == 0
    printed = capsys.readouterr().out
    assert "k0" in printed and "reduction" in printed
    exe = json.loads((tmp_path / "hello" / "executable.json").read_text())
    assert [s["op"] for s in exe["steps"]] == ["gemm", "launch"]
    gemm = exe["steps"][0]
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["lda"], gemm["ldb"]) == (2, 4, 3, 3, 4)
    assert [b["bytes"] for b in exe["buffers"] if b["id"] in exe["results"]] == [32, 8]
    assert (tmp_path / "hello" / "kernels.cubin").stat().st_size > 0


def test_cli_compile_refuses_other_backends(tmp_path, capsys):
    from tools.cli import main
    assert main(["compile", str(REPO / "examples" / "hello.mlir"), "--backend", "cpu",
                 "-o", str(tmp_path / "x")]) == 1
    assert "does not compile ahead of time" in capsys.readouterr().err


DONATED_INPUT_REUSED = """
func.func @main(%x: tensor<16x16xf32> {jax.buffer_donor = true}) -> tensor<16x16xf32> {
  %0 = stablehlo.exponential %x : tensor<16x16xf32>
  %1 = stablehlo.dot_general %0, %0, contracting_dims = [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %1 : tensor<16x16xf32>
}
"""


def test_a_donated_parameter_written_in_place_is_named():
    """The buffer assignment puts exp(x) in x's donated storage: the description must say
    so (``written_params``), or a runtime would overwrite an argument the caller kept."""
    doc = aot.describe(*aot.optimize(stablehlo.parse(DONATED_INPUT_REUSED))).json(
        "sm_90a", None, [], [])
    param = next(b["id"] for b in doc["buffers"] if b.get("param") == 0)
    written = {ref if isinstance(ref, int) else ref["id"]
               for step in doc["steps"] if step["op"] == "launch"
               for ref in step["args"][-1:]}
    assert param in written and doc["written_params"] == [0]
    kept = aot.describe(*aot.optimize(stablehlo.parse(
        DONATED_INPUT_REUSED.replace(" {jax.buffer_donor = true}", "")))).json(
        "sm_90a", None, [], [])
    assert kept["written_params"] == []
