"""``openhlo bench --save-programs``: the files a reader of the compiler's decisions gets."""
import re

import stablehlo
from tools.bench.programs import save_programs


def test_saved_programs_show_fusions_and_memory(tmp_path):
    save_programs(str(tmp_path), ["layernorm_gelu"], quick=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["layernorm_gelu.fusion.txt", "layernorm_gelu.memory.txt",
                     "layernorm_gelu.mlir", "layernorm_gelu.optimized.mlir"]
    original = stablehlo.parse((tmp_path / "layernorm_gelu.mlir").read_text())
    optimized = stablehlo.parse((tmp_path / "layernorm_gelu.optimized.mlir").read_text())
    ops = [op.name for op in optimized.lookup("main").body.operations]
    assert ops.count("stablehlo.composite") == 1  # layer norm + GELU + residual: one kernel
    assert len(original.lookup("main").body.operations) > 10
    explain = (tmp_path / "layernorm_gelu.fusion.txt").read_text()
    assert re.search(r"^fused %\S+ \(stablehlo\.\w+ @ layernorm_gelu\.mlir:\d+", explain, re.M)
    memory = (tmp_path / "layernorm_gelu.memory.txt").read_text()
    assert "peak" in memory and "intermediates" in memory
