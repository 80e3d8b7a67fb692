"""Helpers for the SPMD tests: run a sharded global program on N virtual cpu devices from
global arguments, run it unsharded on the reference interpreter (a partitioned program's
collectives are counted by xla_core.spmd.summary)."""
import numpy as np

import pjrt
import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.ir.types import numpy_dtype


def run_partitioned(text: str, args, num_devices: int):
    """``(global results, executable)``: ``text`` compiled for ``num_devices`` partitions
    and run on ``args`` by ``execute_global``."""
    client = pjrt.make_client("cpu", num_devices=num_devices)
    exe = client.compile(text, pjrt.CompileOptions(num_partitions=num_devices))
    return exe.execute_global(*args), exe


def reference(text: str, args) -> list:
    return [np.asarray(r) for r in evaluate(stablehlo.parse(text), args)]


def random_args(text: str, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    func = stablehlo.parse(text).lookup("main")
    return [rng.standard_normal(t.shape).astype(numpy_dtype(t.element_type))
            for t in func.type.inputs]
