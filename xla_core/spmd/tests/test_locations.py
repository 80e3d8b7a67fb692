"""Ops the SPMD passes build keep the location of the program's op they come from (as XLA
keeps an instruction's metadata): no op of a partitioned program carries a place in the
compiler's Python source, and the profile keys of the per-device program are the user
program's places, the same on every checkout."""
from __future__ import annotations

import os

import stablehlo
import xla_core
from stablehlo.ir.core import Location
from xla_core.cost.profile import op_keys
from xla_core.passes import PassContext, make_pass, spmd_pipeline
from xla_core.spmd.tests.pipeliner_programs import gather_loop
from xla_core.spmd.tests.sharded_programs import SHARDED_DOT_PROGRAM

USER_FILE = "model.mlir"


def files(module) -> set:
    """The files named by the locations of ``module``'s ops (None: an op without one)."""
    return {op.location.file if isinstance(op.location, Location) else op.location
            for op in module.walk() if op.name != "builtin.module"}


def test_partitioned_ops_take_the_places_of_the_users_ops():
    module = stablehlo.parse(SHARDED_DOT_PROGRAM, USER_FILE)
    spmd_pipeline("main", 4).run(module, PassContext())
    names = {op.name for op in module.walk()}
    # the partitioner built collectives, slices and device-id arithmetic
    assert {"openhlo.async_start", "stablehlo.all_reduce", "stablehlo.dynamic_slice",
            "stablehlo.partition_id"} <= names
    assert files(module) == {USER_FILE}
    source = os.path.dirname(os.path.dirname(xla_core.__file__))
    for op in module.walk():
        assert source not in str(op.location), op
    keys = op_keys(module, "main")
    lines = {op.location.line for op in stablehlo.parse(SHARDED_DOT_PROGRAM, USER_FILE).walk()
             if op.name.startswith("stablehlo.")}
    for key in keys:
        file, line = key.split(":")[:2]
        assert file == USER_FILE and int(line) in lines, key


def test_pipelined_loop_counters_take_the_loops_place():
    module = stablehlo.parse(gather_loop(4), USER_FILE)
    assert make_pass("collective-pipeliner").run(module, PassContext())
    assert files(module) == {USER_FILE}
