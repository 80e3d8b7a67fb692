"""The sharding conformance programs (``../shared/conformance/sharding``: JAX lowerings on 8
devices, Shardy and GSPMD spellings, with XLA's collectives in ``summary.json``) partitioned by
``Client.compile`` and run on 8 virtual cpu devices: results equal the unsharded program's
(reference interpreter), and our collectives match XLA's final ones in kind, count (after
combining), bytes per device and group size; before combining, our partitioner emits as many
as XLA's did."""
import json
import math
import pathlib
import re

import numpy as np
import pytest

import stablehlo
from pjrt.tests.spmd_support import random_args, reference, run_partitioned
from xla_core.passes import PassContext, spmd_pipeline
from xla_core.spmd.summary import collectives

ROOT = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "sharding"
PROGRAMS = sorted(p.name for p in ROOT.iterdir() if (p / "summary.json").exists()) \
    if ROOT.is_dir() else []


def _group_size(replica_groups: str) -> int:
    """``mesh['axis_0'=1,'axis_1'=8] {'axis_1'}`` -> 8 (the product of the spanned axes)."""
    sizes = dict((name, int(size)) for name, size in re.findall(r"'(\w+)'=(\d+)", replica_groups))
    spanned = re.search(r"\{(.*)\}", replica_groups).group(1)
    return math.prod(sizes[name] for name in re.findall(r"'(\w+)'", spanned))


@pytest.mark.skipif(not PROGRAMS, reason=f"{ROOT} is absent (the shared conformance corpus)")
@pytest.mark.parametrize("program", PROGRAMS)
def test_conformance_program(program):
    folder = ROOT / program
    text = (folder / "lowered_stablehlo.mlir").read_text()
    summary = json.loads((folder / "summary.json").read_text())
    # the unsharded reference: the Shardy twin (the interpreter has no GSPMD @Sharding)
    twin = (ROOT / program.removesuffix("_gspmd") / "lowered_stablehlo.mlir").read_text()
    args = random_args(text)
    got, exe = run_partitioned(text, args, 8)
    for ours, want in zip(got, reference(twin, args)):
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4)

    module = exe.executable.module
    ours = collectives(module)
    theirs = summary["collectives"]
    assert {kind for kind, _, _ in ours} == {c["kind"] for c in theirs}
    assert len(ours) == len(theirs)
    uncombined = stablehlo.parse(text)
    spmd_pipeline(num_devices=8, combine=False,
                  pipeline_collectives=False).run(uncombined, PassContext())
    assert len(collectives(uncombined)) == summary.get("before_combining", len(theirs))
    assert sum(nbytes for _, _, nbytes in ours) == \
        sum(c["bytes_per_device_result"] for c in theirs)
    sizes = {_group_size(c["replica_groups"]) for c in theirs}
    for op in module.walk():
        if op.name.startswith("stablehlo.all_") or op.name == "stablehlo.reduce_scatter":
            assert {len(g) for g in op.attributes["replica_groups"].array.tolist()} == sizes
