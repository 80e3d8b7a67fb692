"""Held-out sharded programs: ours against XLA's, on 8 virtual devices.

``python -m tools.spmd_heldout [--json OUT] [--keep DIR] [NAME ...]``

JAX (in a subprocess on 8 host cpu devices, ``tools.spmd_heldout_jax``) lowers each program
with its shardings and reports the collectives XLA's SPMD partitioner emitted (before any
combiner), those of its final program, and the unsharded results. Each lowering is then
compiled by our cpu client for 8 partitions, run with ``execute_global`` and compared with
the unsharded results; the collectives of our final per-device program are counted with
their per-device result bytes, and those our partitioner emitted before combining.

A program passes when its numerics match and our final collectives use no kind XLA's final
ones did not, are no more and move no more bytes in total, and our partitioner emitted no
more than XLA's did. Exit status 1 when any fails.
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


def check(folder: pathlib.Path, num_devices: int = 8) -> dict:
    """Compile and run one lowered program on our stack; the row of the table."""
    import pjrt
    import stablehlo
    from xla_core.passes import PassContext, spmd_pipeline
    row = {"program": folder.name}
    xla = json.loads((folder / "xla.json").read_text())
    row["xla"] = theirs = xla["final"]
    emitted = xla["partitioner"] if xla["partitioner"] is not None else theirs
    args = list(np.load(folder / "args.npz").values())
    want = list(np.load(folder / "ref.npz").values())
    text = (folder / "lowered.mlir").read_text()
    try:
        client = pjrt.make_client("cpu", num_devices=num_devices)
        exe = client.compile(text, pjrt.CompileOptions(num_partitions=num_devices))
        got = exe.execute_global(*args)
        ours = our_collectives(exe.executable.module)
        uncombined = stablehlo.parse(text)
        spmd_pipeline(num_devices=num_devices, combine=False).run(uncombined, PassContext())
    except Exception as e:  # reported per program, the others still run
        row.update(ok=False, error=f"{type(e).__name__}: {e}".splitlines()[0][:300])
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
    parser.add_argument("names", nargs="*", help="programs to run (default: all)")
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        outdir = pathlib.Path(opts.keep or tmp)
        lower_with_jax(outdir, opts.names)
        folders = [outdir / n for n in opts.names] if opts.names else sorted(
            p for p in outdir.iterdir() if (p / "xla.json").exists())
        rows = [check(f) for f in folders]
    print(table(rows))
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
