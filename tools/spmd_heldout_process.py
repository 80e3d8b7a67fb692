"""One process of ``python -m tools.spmd_heldout --num-processes P``, started by
pjrt.distributed.launch: ``python -m tools.spmd_heldout_process NUM_DEVICES FOLDER ...``.

Joins the multi-process cpu client of the launched processes (NUM_DEVICES devices here),
then compiles and runs each held-out program's lowering (spmd_heldout.run) on all the
processes' devices, in the order given (every process runs the same ones). Process 0 writes
the outcome into the program's folder: the results and our collectives, or the error
(spmd_heldout.PROCESSES_RESULTS, PROCESSES_OUTCOME), which spmd_heldout.check reads.
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import pjrt
from pjrt.distributed.options import from_environment
from tools import spmd_heldout


def main(argv: list) -> int:
    num_devices, folders = int(argv[0]), [pathlib.Path(f) for f in argv[1:]]
    options = from_environment()
    client = pjrt.make_client("cpu", num_devices=num_devices, distributed=options)
    for folder in folders:
        try:
            results, collectives = spmd_heldout.run(client, folder,
                                                    num_devices * options.num_processes)
            outcome = {"collectives": collectives}
        except Exception as e:  # reported per program, the others still run
            results, outcome = [], {"error": spmd_heldout.error_text(e)}
        if options.process_index == 0:
            np.savez(folder / spmd_heldout.PROCESSES_RESULTS, *results)
            (folder / spmd_heldout.PROCESSES_OUTCOME).write_text(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
