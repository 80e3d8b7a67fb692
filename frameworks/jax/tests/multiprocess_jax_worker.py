"""One process of the jax.distributed tests (test_multiprocess.py), started by
frameworks.jax.distributed.launch:
``python -m frameworks.jax.tests.multiprocess_jax_worker OUT [LEAVE]``.

Joins the job with frameworks.jax.distributed.initialize (``jax.distributed.initialize``
on JAX_PLATFORMS=openhlo, OPENHLO_JAX_NUM_DEVICES devices per process) and works over a
(process, local) mesh. It records what JAX sees (``OUT/topology.<i>.json``), runs every
program of ``programs()`` in order (every process runs the same ones) and pickles, per
program, the shards of the result this process holds: ``OUT/<name>.<i>.pkl``, a list of
(index as (start, stop) per dimension, array). The test assembles them and checks them
against numpy. Inputs are made by ``inputs(name)``, which the test calls too.

With LEAVE (``exit``: sys.exit, which runs JAX's shutdown; ``crash``: os._exit, which does
not) the job is the fault test's instead: every process runs one psum, then process 1
leaves and process 0 runs it again; process 0 writes the error it gets to
``OUT/error.0.txt`` and raises it.
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
    if name.startswith("megatron"):  # batch 4 per device, hidden 4 per device
        return {"x": rng.standard_normal((4 * num_devices, MODEL_WIDTH)).astype(np.float32),
                "t": rng.standard_normal((4 * num_devices, MODEL_WIDTH)).astype(np.float32),
                "w1": (rng.standard_normal((MODEL_WIDTH, 4 * num_devices)) * 0.5
                       ).astype(np.float32),
                "w2": (rng.standard_normal((4 * num_devices, MODEL_WIDTH)) * 0.5
                       ).astype(np.float32)}
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
MODEL_WIDTH = 6  # the Megatron MLP's input and output width
# The Megatron MLP programs: name -> (the mesh axis its weights are split over ("model"),
# the one its batch is split over, element type). Over "l" the layers' all-reduces stay in
# each process; over "p" they cross the processes.
MEGATRON = {"megatron.model_local.f32": ("l", "p", "f32"),
            "megatron.model_processes.f32": ("p", "l", "f32"),
            "megatron.model_processes.bf16": ("p", "l", "bf16")}


def programs(jax, mesh):
    """``{name: (function of the inputs' jax arrays, in PartitionSpecs by input, out
    PartitionSpec)}``: shard_map collectives over the (process, local) mesh in every type
    of DTYPES, a jitted data-parallel step and Megatron MLPs (MEGATRON)."""
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

    def megatron(x, t, w1, w2, to):
        # column-parallel w1, row-parallel w2: the forward pass, the loss and its gradients
        def loss(w1, w2):
            y = jax.numpy.tanh(x.astype(to) @ w1) @ w2
            return jax.numpy.mean((y - t.astype(to)) ** 2), y
        (value, y), (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
            w1.astype(to), w2.astype(to))
        return y, value, g1, g2
    for name, (model, batch, dtype) in MEGATRON.items():
        to = converted.get(dtype, jax.numpy.float32)
        out[name] = (functools.partial(megatron, to=to),
                     {"x": P(batch), "t": P(batch), "w1": P(None, model), "w2": P(model, None)},
                     (P(batch), P(), P(None, model), P(model, None)))
    return out


def _shards(array) -> list:
    return [(tuple((s.start or 0, s.stop if s.stop is not None else dim)
                   for s, dim in zip(shard.index, array.shape)), np.asarray(shard.data))
            for shard in array.addressable_shards]


# The fault test's OPENHLO_COLLECTIVE_TIMEOUT_S (the test sets it), and how long JAX's
# shutdown barrier waits there for the other processes: a process that died never arrives,
# and JAX's default (300 s) would hold the survivor that long; one that left by sys.exit
# waits in the barrier for the survivor, which arrives after its collective timed out.
FAULT_COLLECTIVE_TIMEOUT_S = 4
FAULT_SHUTDOWN_TIMEOUT_S = FAULT_COLLECTIVE_TIMEOUT_S + 3


def main(argv: list) -> int:
    out = argv[0]
    leave = argv[1] if len(argv) > 1 else None
    from frameworks.jax import distributed
    distributed.initialize(**({"shutdown_timeout_seconds": FAULT_SHUTDOWN_TIMEOUT_S}
                              if leave else {}))
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    # the launcher's numbering, which the test checks JAX's against
    from pjrt.distributed.options import NUM_PROCESSES_ENV, PROCESS_INDEX_ENV
    process, count = int(os.environ[PROCESS_INDEX_ENV]), int(os.environ[NUM_PROCESSES_ENV])
    if leave:
        return _leave_before_a_collective(jax, process, count, leave, out)
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


def _leave_before_a_collective(jax, process: int, count: int, leave: str, out: str) -> int:
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()).reshape(count, -1), ("p", "l"))
    both = ("p", "l")
    psum = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, both), mesh=mesh,
                                 in_specs=P(both), out_specs=P(both)))
    x = jax.make_array_from_callback((mesh.devices.size,), NamedSharding(mesh, P(both)),
                                     lambda index: np.ones(mesh.devices.size, np.float32)[index])
    psum(x).block_until_ready()  # every process is in the job
    if process == 1:
        if leave == "crash":
            os._exit(0)
        sys.exit(0)
    try:
        psum(x).block_until_ready()
    except Exception as e:
        with open(os.path.join(out, f"error.{process}.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
