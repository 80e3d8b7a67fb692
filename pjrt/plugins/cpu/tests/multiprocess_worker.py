"""One process of the multi-process tests (test_multiprocess.py), started by
pjrt.distributed.launch: ``python -m pjrt.plugins.cpu.tests.multiprocess_worker PROGRAMS OUT
NUM_DEVICES [EXIT_BEFORE]``.

Joins the client of the launched processes, then compiles and runs every ``*.mlir`` of
PROGRAMS in name order (every process runs the same executions in the same order).
Replicated programs run with execute_sharded on this process's devices, instance k on the
arguments ``random_arguments(types, seed=k)``, and each instance's results are pickled to
``OUT/<program>.<k>.pkl``; partitioned programs run with execute_global on the global
arguments of seed 0 and process 0 pickles the results to ``OUT/<program>.pkl``. With
EXIT_BEFORE ``P:NAME``, process P exits (status 0) just before running program NAME.
"""
import os
import pickle
import sys

import pjrt
from pjrt.distributed.options import from_environment
from stablehlo.text import parse_module
from tools.random_inputs import random_arguments


def main(argv: list[str]) -> int:
    programs, out, num_devices = argv[0], argv[1], int(argv[2])
    exit_before = argv[3] if len(argv) > 3 else None
    options = from_environment()
    client = pjrt.make_client("cpu", num_devices=num_devices, distributed=options)
    for name in sorted(n for n in os.listdir(programs) if n.endswith(".mlir")):
        if exit_before == f"{options.process_index}:{name}":
            return 0
        with open(os.path.join(programs, name)) as f:
            text = f.read()
        exe = client.compile(text)
        if exe.num_partitions > 1:
            module = parse_module(text)
            types = list(module.lookup(exe.executable.entry).type.inputs)
            results = exe.execute_global(*random_arguments(types, seed=0))
            if options.process_index == 0:
                _save(os.path.join(out, f"{name}.pkl"), results)
            continue
        assigned = [d for row in exe.device_assignment for d in row]
        mine = [assigned.index(d) for d in exe.addressable_devices()]
        outputs = exe.execute_sharded([random_arguments(exe.parameter_types, seed=k)
                                       for k in mine])
        for k, results in zip(mine, outputs):
            _save(os.path.join(out, f"{name}.{k}.pkl"), [b.to_numpy() for b in results])
    return 0


def _save(path: str, results: list) -> None:
    with open(path, "wb") as f:
        pickle.dump(list(results), f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
