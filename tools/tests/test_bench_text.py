"""``openhlo bench-text`` reports each phase over the files it is given."""
from __future__ import annotations

from tools.tests.helpers import REPO_ROOT, run_cli


def test_bench_text_reports_phases(capsys, tmp_path):
    broken = tmp_path / "broken.mlir"
    broken.write_text("func.func @main( {\n")
    r = run_cli(capsys, "bench-text", REPO_ROOT / "examples", broken)
    assert r.code == 0, r.err
    rows = {line.split()[0]: line.split() for line in r.out.splitlines() if line.split()}
    for phase in ("parse", "verify", "print", "total"):
        assert phase in rows
    # One module parsed (hello.mlir; 14 ops with module, func and reduce body), one failed.
    assert rows["parse"][1] == "1" and rows["parse"][-1] == "1"
    assert int(rows["parse"][3]) >= 10
    assert any(line.startswith("failed: ") and "broken.mlir" in line
               for line in r.out.splitlines())
