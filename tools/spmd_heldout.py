"""Held-out sharded programs: ours against XLA's, on 8 virtual devices.

``python -m tools.spmd_heldout [--num-processes P] [--json OUT] [--keep DIR] [NAME ...]``

JAX (in a subprocess on 8 host cpu devices, ``tools.spmd_heldout_jax``) lowers each program
with its shardings and reports the collectives XLA's SPMD partitioner emitted (before any
combiner), those of its final program, and the unsharded results. Each lowering is then
compiled by our cpu client for 8 partitions, run with ``execute_global`` and compared with
the unsharded results; the collectives of our final per-device program are counted with
their per-device result bytes, and those our partitioner emitted before combining.

A program passes when its numerics match and our final collectives use no kind XLA's final
ones did not, are no more and move no more bytes in total, and our partitioner emitted no
more than XLA's did. Exit status 1 when any fails. XLA's partitioner count is taken before
its collective pipeliner, so ours is too (the spmd pipeline without collective-pipeliner);
the final counts are of the programs as they run, pipelined: a pipelined loop has one more
collective op (its prologue gather or epilogue reduction) for as many collectives run.

With ``--num-processes P`` (P dividing 8) the programs run instead on a multi-process cpu
client of P processes x 8/P devices on this machine (pjrt.distributed.launch starts them,
each ``tools.spmd_heldout_process``): the same 8 partitions, their collectives crossing the
processes over gloo, the results compared with the same unsharded ones.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def lower_with_jax(outdir: pathlib.Path, names=()) -> None:
    """Run ``tools.spmd_heldout_jax`` in a subprocess (its own XLA flags and 8 devices)."""
    dump = outdir / "_dump"
    env = dict(os.environ)
    env["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count=8 --xla_dump_to={dump} "
                        f"--xla_dump_hlo_pass_re=spmd-partitioning")
    env["JAX_PLATFORMS"] = "cpu"
    env["HELDOUT_DUMP"] = str(dump)
    proc = subprocess.run([sys.executable, "-m", "tools.spmd_heldout_jax", str(outdir), *names],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"lowering the held-out programs with JAX failed:\n{proc.stderr}")


def our_collectives(module) -> list:
    """``[{"kind", "result", "bytes"}]`` of a partitioned module's collectives."""
    from xla_core.spmd.summary import collectives
    return [{"kind": kind, "result": str(shape), "bytes": nbytes}
            for kind, shape, nbytes in collectives(module)]


def error_text(e: Exception) -> str:
    """A program's error as its row shows it: the first line, shortened."""
    return f"{type(e).__name__}: {e}".splitlines()[0][:300]


def run(client, folder: pathlib.Path, num_partitions: int) -> tuple:
    """Compile one lowered program for ``num_partitions`` on ``client`` and run it with
    execute_global on its arguments: (results, our collectives)."""
    import pjrt
    args = list(np.load(folder / "args.npz").values())
    exe = client.compile((folder / "lowered.mlir").read_text(),
                         pjrt.CompileOptions(num_partitions=num_partitions))
    return exe.execute_global(*args), our_collectives(exe.executable.module)


def check(folder: pathlib.Path, num_devices: int = 8, across_processes: bool = False) -> dict:
    """Compile and run one lowered program on our stack; the row of the table. With
    ``across_processes`` the outcome of run_across_processes in the folder is checked
    instead."""
    import pjrt
    import stablehlo
    from xla_core.passes import PassContext, spmd_pipeline
    row = {"program": folder.name}
    xla = json.loads((folder / "xla.json").read_text())
    row["xla"] = theirs = xla["final"]
    emitted = xla["partitioner"] if xla["partitioner"] is not None else theirs
    want = list(np.load(folder / "ref.npz").values())
    text = (folder / "lowered.mlir").read_text()
    try:
        if across_processes:
            outcome = json.loads((folder / PROCESSES_OUTCOME).read_text())
            if "error" in outcome:
                row.update(ok=False, error=outcome["error"])
                return row
            got = list(np.load(folder / PROCESSES_RESULTS).values())
            ours = outcome["collectives"]
        else:
            got, ours = run(pjrt.make_client("cpu", num_devices=num_devices), folder,
                            num_devices)
        uncombined = stablehlo.parse(text)
        spmd_pipeline(num_devices=num_devices, combine=False,
                      pipeline_collectives=False).run(uncombined, PassContext())
    except Exception as e:  # reported per program, the others still run
        row.update(ok=False, error=error_text(e))
        return row
    row["ours"] = ours
    row["ours_uncombined"], row["xla_uncombined"] = len(our_collectives(uncombined)), len(emitted)
    errs = [float(np.max(np.abs(np.asarray(g, np.float64) - w))) if w.size else 0.0
            for g, w in zip(got, want)]
    row["numerics_ok"] = len(got) == len(want) and all(
        np.allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4) for g, w in zip(got, want))
    row["max_abs_err"] = max(errs, default=0.0)
    row["kinds_ok"] = {c["kind"] for c in ours} <= {c["kind"] for c in theirs}
    row["count_ok"] = (len(ours) <= len(theirs)
                       and row["ours_uncombined"] <= row["xla_uncombined"])
    row["bytes_ok"] = sum(c["bytes"] for c in ours) <= sum(c["bytes"] for c in theirs)
    row["ok"] = all(row[k] for k in ("numerics_ok", "kinds_ok", "count_ok", "bytes_ok"))
    return row


# What process 0 of run_across_processes writes into a program's folder: the results
# (npz) and {"collectives": ...} or {"error": ...} (json).
PROCESSES_RESULTS, PROCESSES_OUTCOME = "processes.npz", "processes.json"
# Bounds of a run across processes: each collective's wait (OPENHLO_COLLECTIVE_TIMEOUT_S),
# and the whole launch.
PROCESSES_COLLECTIVE_TIMEOUT_S = 60
PROCESSES_LAUNCH_TIMEOUT_S = 1800.0


def run_across_processes(folders: list, num_processes: int, num_devices: int = 8) -> None:
    """Run the lowered programs of ``folders`` on a cpu client of ``num_processes`` processes
    (``tools.spmd_heldout_process``, started by pjrt.distributed.launch) with
    ``num_devices // num_processes`` devices each; ``check(folder, across_processes=True)``
    then reads their outcome."""
    from pjrt.distributed.launch import launch
    from pjrt.errors import ArgumentError
    if num_processes < 1 or num_devices % num_processes:
        raise ArgumentError(f"spmd_heldout: the number of processes must divide "
                            f"{num_devices}, got {num_processes}")
    for folder in folders:  # no outcome of an earlier run is taken for this one's
        for name in (PROCESSES_RESULTS, PROCESSES_OUTCOME):
            (folder / name).unlink(missing_ok=True)
    env = dict(os.environ, OPENHLO_COLLECTIVE_TIMEOUT_S=str(PROCESSES_COLLECTIVE_TIMEOUT_S),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    launch([sys.executable, "-m", "tools.spmd_heldout_process",
            str(num_devices // num_processes), *map(str, folders)],
           num_processes, PROCESSES_LAUNCH_TIMEOUT_S, env=env, cwd=str(ROOT))


def _summary(cs) -> str:
    if not cs:
        return "none"
    kinds = {}
    for c in cs:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    return ", ".join(f"{n} {k}" for k, n in kinds.items()) + f"; {sum(c['bytes'] for c in cs)} B"


def table(rows) -> str:
    lines = [f"{'program':<18} {'ok':<5} {'numerics':<9} {'uncombined':<11} {'ours':<52} xla"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['program']:<18} {'FAIL':<5} {'-':<9} {r['error'][:120]}")
            continue
        num = "ok" if r["numerics_ok"] else f"{r['max_abs_err']:.1e}"
        uncombined = f"{r['ours_uncombined']}/{r['xla_uncombined']}"
        lines.append(f"{r['program']:<18} {'ok' if r['ok'] else 'FAIL':<5} {num:<9} "
                     f"{uncombined:<11} {_summary(r['ours']):<52} {_summary(r['xla'])}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.spmd_heldout", description=__doc__)
    parser.add_argument("--json", help="write the rows as JSON here")
    parser.add_argument("--keep", help="lower into this folder (kept) instead of a temporary one")
    parser.add_argument("--num-processes", type=int, default=1, metavar="P",
                        help="run on P processes x 8/P devices (default: 1 process)")
    parser.add_argument("names", nargs="*", help="programs to run (default: all)")
    opts = parser.parse_args(argv)
    if opts.num_processes < 1 or 8 % opts.num_processes:
        parser.error(f"--num-processes must divide 8, got {opts.num_processes}")
    with tempfile.TemporaryDirectory() as tmp:
        outdir = pathlib.Path(opts.keep or tmp)
        lower_with_jax(outdir, opts.names)
        folders = [outdir / n for n in opts.names] if opts.names else sorted(
            p for p in outdir.iterdir() if (p / "xla.json").exists())
        if opts.num_processes > 1:
            run_across_processes(folders, opts.num_processes)
        rows = [check(f, across_processes=opts.num_processes > 1) for f in folders]
    print(table(rows))
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
