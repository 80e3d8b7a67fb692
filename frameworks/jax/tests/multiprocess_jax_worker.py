"""One process of the jax.distributed tests (test_multiprocess.py), started by
pjrt.distributed.launch:
``python -m frameworks.jax.tests.multiprocess_jax_worker COORDINATOR_PORT OUT``.

Joins the job with ``jax.distributed.initialize`` (coordinator on 127.0.0.1, this process's
index and the process count from the launcher's variables) on JAX_PLATFORMS=openhlo, with
OPENHLO_JAX_NUM_DEVICES devices per process, over a (process, local) mesh. It records what
JAX sees (``OUT/topology.<i>.json``), runs every program of ``programs()`` in order (every
process runs the same ones) and pickles, per program, the shards of the result this process
holds: ``OUT/<name>.<i>.pkl``, a list of (index as (start, stop) per dimension, array). The
test assembles them and checks them against numpy. Inputs are made by ``inputs(name)``,
which the test calls too.
"""
import functools
import json
import os
import pickle
import sys
import zlib

import numpy as np

ROWS = 8  # rows of each device's block of the collectives' inputs


# The element types of the collectives: the suffix of a program's name.
DTYPES = ("f32", "bf16", "f16", "int32")


def inputs(name: str, num_devices: int) -> dict:
    """The global inputs of program ``name`` (numpy), the same in every process. The bf16
    and f16 programs take float32 small integers (exact in those types, sums included) and
    convert them themselves."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name.startswith("step"):
        return {"x": rng.standard_normal((4 * num_devices, 3)).astype(np.float32),
                "y": rng.standard_normal((4 * num_devices, 1)).astype(np.float32),
                "w": rng.standard_normal((3, 1)).astype(np.float32)}
    rows, dtype = ROWS * num_devices, name.rsplit(".", 1)[-1]
    if dtype == "int32":
        return {"x": rng.integers(-50, 50, (rows, 3)).astype(np.int32)}
    if dtype in ("bf16", "f16"):
        return {"x": rng.integers(-8, 9, (rows, 3)).astype(np.float32)}
    return {"x": rng.standard_normal((rows, 3)).astype(np.float32)}


LEARNING_RATE = 0.1


def programs(jax, mesh):
    """``{name: (function of the inputs' jax arrays, in PartitionSpecs by input, out
    PartitionSpec)}``: shard_map collectives over the (process, local) mesh in every type
    of DTYPES, and a jitted data-parallel step."""
    from jax import lax
    from jax.sharding import PartitionSpec as P
    both = ("p", "l")
    size, processes = mesh.devices.size, mesh.shape["p"]
    ring = [(i, (i + 1) % size) for i in range(size)]
    process_ring = [(i, (i + 1) % processes) for i in range(processes)]
    collectives = {
        "psum": lambda b: lax.psum(b, both),
        "psum_processes": lambda b: lax.psum(b, "p"),  # groups that span the processes
        "all_gather": lambda b: lax.all_gather(b, both, tiled=True),
        "psum_scatter": lambda b: lax.psum_scatter(b, both, scatter_dimension=0, tiled=True),
        "ppermute": lambda b: lax.ppermute(b, both, ring),
        "ppermute_processes": lambda b: lax.ppermute(b, "p", process_ring),
        "all_to_all": lambda b: lax.all_to_all(b, both, 0, 0, tiled=True),
    }
    converted = {"bf16": jax.numpy.bfloat16, "f16": jax.numpy.float16}
    out = {}
    for name, body in collectives.items():
        mapped = jax.shard_map(body, mesh=mesh, in_specs=P(both), out_specs=P(both))
        for dtype in DTYPES:
            def program(x, f=mapped, to=converted.get(dtype)):
                return f(x if to is None else x.astype(to))
            out[f"{name}.{dtype}"] = (program, {"x": P(both)}, P(both))

    def step(x, y, w):
        def loss(w):
            return jax.numpy.mean((x @ w - y) ** 2)
        value, grad = jax.value_and_grad(loss)(w)
        return w - LEARNING_RATE * grad, value
    out["step"] = (step, {"x": P(both), "y": P(both), "w": P()}, (P(), P()))
    return out


def _shards(array) -> list:
    return [(tuple((s.start or 0, s.stop if s.stop is not None else dim)
                   for s, dim in zip(shard.index, array.shape)), np.asarray(shard.data))
            for shard in array.addressable_shards]


def main(argv: list) -> int:
    port, out = argv[0], argv[1]
    from pjrt.distributed.options import NUM_PROCESSES_ENV, PROCESS_INDEX_ENV
    process, count = int(os.environ[PROCESS_INDEX_ENV]), int(os.environ[NUM_PROCESSES_ENV])
    import frameworks.jax.plugin as plugin
    plugin.initialize()
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=count,
                               process_id=process)
    with open(os.path.join(out, f"topology.{process}.json"), "w") as f:
        json.dump({"devices": [[d.id, d.process_index] for d in jax.devices()],
                   "local_devices": [d.id for d in jax.local_devices()],
                   "process_index": jax.process_index(), "process_count": jax.process_count(),
                   "platform": jax.devices()[0].platform}, f)
    mesh = Mesh(np.array(jax.devices()).reshape(count, -1), ("p", "l"))
    for name, (fn, in_specs, out_specs) in programs(jax, mesh).items():
        values = inputs(name, mesh.devices.size)
        args = [jax.make_array_from_callback(
            value.shape, NamedSharding(mesh, in_specs[key]),
            functools.partial(lambda index, value: value[index], value=value))
            for key, value in values.items()]
        shardings = jax.tree_util.tree_map(lambda spec: NamedSharding(mesh, spec), out_specs)
        results = jax.jit(fn, out_shardings=shardings)(*args)
        results = results if isinstance(results, tuple) else (results,)
        with open(os.path.join(out, f"{name}.{process}.pkl"), "wb") as f:
            pickle.dump([_shards(r) for r in results], f)
    # multihost_utils and process-local data: each process contributes its index.
    local = np.full((ROWS, 3), process + 1, np.float32)
    arrays = {
        "process_local_data": jax.make_array_from_process_local_data(
            NamedSharding(mesh, P(("p", "l"))), local),
        "host_local_to_global": multihost_utils.host_local_array_to_global_array(
            local, mesh, P("p")),
    }
    for name, array in arrays.items():
        with open(os.path.join(out, f"{name}.{process}.pkl"), "wb") as f:
            pickle.dump([_shards(jax.jit(lambda a: a * 2)(array))], f)
    gathered = multihost_utils.process_allgather(np.array([process, 10 * process + 1]))
    with open(os.path.join(out, f"process_allgather.{process}.json"), "w") as f:
        json.dump(np.asarray(gathered).tolist(), f)
    multihost_utils.sync_global_devices("openhlo multiprocess test done")
    with open(os.path.join(out, f"synced.{process}"), "w") as f:
        f.write("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
