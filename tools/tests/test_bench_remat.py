"""Training steps under a memory limit of half their peak (issue 21): the cpu backend keeps
the limit (``exe.memory_stats()``) and gives the bits of the step compiled without one;
``openhlo opt`` and ``openhlo run`` take ``--memory-limit``; ``tools.bench_remat`` reports.
Speed is not asserted."""
import json

import numpy as np
import pytest

from pjrt.plugins.cpu.blas import gemm_bits_depend_on_panels
from tools import bench_remat
from tools.tests.helpers import run_cli


@pytest.fixture(scope="module")
def client():
    import pjrt
    return pjrt.make_client("cpu")


# The transformer twice: with its attention fused (forward and backward kernels, which keep
# no L x L scores: the lower peak, next test) and materialized.
@pytest.mark.parametrize("name, fused", [("mlp", True), ("transformer", True),
                                         ("transformer", False)],
                         ids=["mlp", "transformer", "transformer-materialized-attention"])
def test_half_the_peak_with_the_same_bits(name, fused, client):
    text, args = bench_remat.lowered(bench_remat.STEPS[name].build)
    plain = bench_remat.compile_step(client, text, wait=False, fused_attention=fused)
    peak = plain.memory_stats()["peak_bytes"]
    limit = peak // 2
    limited = bench_remat.compile_step(client, text, limit, wait=False, fused_attention=fused)
    stats = limited.memory_stats()
    assert stats["peak_bytes"] <= limit < stats["peak_bytes_without_remat"]
    assert stats["recomputed_ops"] > 0
    assert plain.memory_stats()["peak_bytes_without_remat"] == peak
    ran, results = bench_remat.run_peak_bytes(limited, args)
    assert ran <= stats["peak_bytes"]  # the executor holds no more than memory_stats says
    same_bits = not gemm_bits_depend_on_panels()
    for want, got in zip(plain(*args), results, strict=True):
        want, got = np.asarray(want), np.asarray(got)
        if same_bits:
            assert want.tobytes() == got.tobytes()
        else:  # a recomputed dot cut into other panels, by a BLAS that rounds by panel
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_the_fused_attention_step_has_the_lower_peak(client):
    text, _ = bench_remat.lowered(bench_remat.STEPS["transformer"].build)
    fused = bench_remat.compile_step(client, text, wait=False)
    unfused = bench_remat.compile_step(client, text, wait=False, fused_attention=False)
    assert fused.memory_stats()["peak_bytes"] < unfused.memory_stats()["peak_bytes"]


def test_a_copy_read_again_later_is_kept_where_it_fits(monkeypatch):
    # The sweep frees a value for one position at a time, so a deep MLP's step has some
    # layers recomputed twice: a copy read at one position and again later. Where keeping
    # the first copy live until then fits the limit, the second is not made.
    import stablehlo
    from pjrt.plugins.cpu.optimize import cpu_pipeline
    from xla_core.buffers import assign_buffers
    from xla_core.buffers.remat import _FunctionRemat, remat_summary
    from xla_core.passes import PassContext
    text, args = bench_remat.lowered(
        lambda rng: bench_remat.mlp_step(rng, depth=16, width=16, batch=256))

    def compiled(limit: int = 0):
        m = stablehlo.parse(text)
        cpu_pipeline(memory_limit=limit).run(m, PassContext())
        return m
    plain = compiled()
    limit = assign_buffers(plain.lookup("main")).peak_bytes // 2
    kept = compiled(limit)
    monkeypatch.setattr(_FunctionRemat, "_reuse_a_copy", lambda *_: False)
    recomputed_twice = compiled(limit)
    summary = remat_summary(kept.lookup("main"))
    assert summary["peak_after"] <= limit
    assert summary["recomputed"] < remat_summary(recomputed_twice.lookup("main"))["recomputed"]
    for want, got in zip(stablehlo.evaluate(plain, args), stablehlo.evaluate(kept, args)):
        assert np.asarray(want).tobytes() == np.asarray(got).tobytes()


def test_opt_and_run_take_a_memory_limit(tmp_path, capsys):
    text, args = bench_remat.lowered(bench_remat.STEPS["mlp"].build)
    path = tmp_path / "step.mlir"
    path.write_text(text)
    r = run_cli(capsys, "opt", path, "--pipeline=cpu", "-o", tmp_path / "plain.mlir")
    assert r.code == 0, r.err
    limit = _peak(tmp_path / "plain.mlir") // 2
    r = run_cli(capsys, "opt", path, "--pipeline=cpu", "--memory-limit", str(limit),
                "-o", tmp_path / "limited.mlir")
    assert r.code == 0, r.err
    assert _peak(tmp_path / "limited.mlir") <= limit
    assert "openhlo.remat}" in (tmp_path / "limited.mlir").read_text()  # a marked copy
    np.savez(tmp_path / "args.npz", **{f"arg{i}": a for i, a in enumerate(args)})
    r = run_cli(capsys, "run", path, "--inputs", tmp_path / "args.npz", "--memory-limit",
                f"{limit / 2**20:.4f}MiB", "-o", tmp_path / "out.npz")
    assert r.code == 0, r.err
    assert "peak memory: " in r.err and "without recomputing" in r.err
    r = run_cli(capsys, "opt", path, "--memory-limit", "lots")
    assert r.code != 0 and "--memory-limit: remat: memory limit 'lots'" in r.err


def _peak(path) -> int:
    import stablehlo
    from xla_core.buffers import assign_buffers
    return assign_buffers(stablehlo.parse(path.read_text()).lookup("main")).peak_bytes


def test_the_report(tmp_path, capsys):
    out = tmp_path / "remat.json"
    assert bench_remat.main(["--steps", "mlp", "--budget", "0.01", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["identical"] and row["under_limit"] and row["time_ratio"] > 0
    assert "mlp" in capsys.readouterr().out
