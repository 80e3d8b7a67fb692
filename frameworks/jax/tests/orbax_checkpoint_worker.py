"""One process of the orbax checkpoint tests (test_orbax_checkpoint.py), started by
frameworks.jax.distributed.launch:
``python -m frameworks.jax.tests.orbax_checkpoint_worker MODE CHECKPOINTS OUT``.

Every process trains the same small model, data-parallel over a (process, local) mesh, with
a train state of f32, bf16 and int32 arrays (some sharded, some replicated) and saves it
with an asynchronous ``orbax.checkpoint.CheckpointManager`` in CHECKPOINTS. MODE:

* ``reference``: saves the initial state (step 0), then after each of STEPS training steps
  (the step donates the state, so it overwrites the arrays of a save still being written);
  pickles per step the loss and this process's shards of the state, and the indices and
  replica ids of the initial state's shards; then restores step 0 and step 2 into the same
  shardings and step 0 into other shardings on another mesh (``restore_shardings``) and
  pickles the restored shards.
* ``interrupted``: saves steps 0 and 1 (each waited for), trains step 2, starts its save
  and SIGKILLs itself as soon as ``save`` returns: the write is under way (the ballast makes
  it take far longer than the kill).
* ``resume``: a new manager over the same CHECKPOINTS: records ``latest_step()`` and
  ``all_steps()``, restores the latest step and trains the next step; pickles its loss.

OUT/<mode>.<process>.pkl holds the results; the test checks them against numpy.
"""
import os
import pickle
import signal
import sys
import zlib

import numpy as np

STEPS = 3
BATCH, WIDTH, HIDDEN, OUTPUTS = 16, 8, 16, 4
LEARNING_RATE = 0.05
# Elements of the ballast (f32, sharded over every device): 32 MiB, so that a save's write
# takes hundreds of milliseconds against the microseconds between save's return and the kill.
BALLAST = 8 * 2 ** 20
# Shards bigger than this are recorded by a checksum, not pickled whole.
DIGEST_BYTES = 2 ** 20


def initial_state() -> dict:
    """The train state before step 1 (numpy; the same in every process and in the test)."""
    import ml_dtypes
    rng = np.random.default_rng(16)
    return {"w1": (rng.standard_normal((WIDTH, HIDDEN)) / 3).astype(np.float32),
            "w2": (rng.standard_normal((HIDDEN, OUTPUTS)) / 4).astype(np.float32),
            "scale": np.linspace(0.5, 2.0, OUTPUTS).astype(ml_dtypes.bfloat16),
            "step": np.zeros((), np.int32),
            "ballast": np.arange(BALLAST, dtype=np.float32)}


def batch(step: int) -> dict:
    rng = np.random.default_rng(zlib.crc32(f"batch {step}".encode()))
    return {"x": rng.standard_normal((BATCH, WIDTH)).astype(np.float32),
            "y": rng.standard_normal((BATCH, OUTPUTS)).astype(np.float32)}


def state_specs(P) -> dict:
    """On the (p, l) mesh: w1 sharded over the local axis (replicated across processes), w2
    over the processes, scale and step replicated, the ballast over every device."""
    return {"w1": P(None, "l"), "w2": P("p", None), "scale": P(), "step": P(),
            "ballast": P(("p", "l"))}


def restore_specs(P) -> dict:
    """On the 1-D mesh ``d`` of every device in reverse order: other axes, other owners."""
    return {"w1": P("d", None), "w2": P(), "scale": P("d"), "step": P(), "ballast": P("d")}


def train_step(jax, state: dict, data: dict):
    """One SGD step of a two-layer model (mean squared error): the new state and the loss."""
    jnp = jax.numpy

    def loss_fn(params):
        hidden = jnp.tanh(data["x"] @ params["w1"])
        predicted = hidden @ params["w2"] * params["scale"].astype(jnp.float32)
        return jnp.mean((predicted - data["y"]) ** 2)

    params = {k: state[k] for k in ("w1", "w2", "scale")}
    loss, grads = jax.value_and_grad(loss_fn)(params)
    new = {k: (params[k] - LEARNING_RATE * grads[k]).astype(params[k].dtype) for k in params}
    return dict(new, step=state["step"] + 1, ballast=state["ballast"] + 1.0), loss


def shards(array) -> list:
    """This process's shards of ``array``: (index as (start, stop) per dimension, replica
    id, data), the data of shards over DIGEST_BYTES as the CRC-32 of their bytes."""
    out = []
    for shard in array.addressable_shards:
        data = np.asarray(shard.data)
        out.append((tuple((s.start or 0, s.stop if s.stop is not None else dim)
                          for s, dim in zip(shard.index, array.shape)), shard.replica_id,
                    zlib.crc32(data.tobytes()) if data.nbytes > DIGEST_BYTES else data))
    return out


class Job:
    """The mesh, the jitted step and the checkpoint manager of one process."""

    def __init__(self, checkpoints: str):
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        self.jax, self.ocp = jax, ocp
        self.mesh = Mesh(np.array(jax.devices()).reshape(jax.process_count(), -1), ("p", "l"))
        self.shardings = {k: NamedSharding(self.mesh, spec)
                          for k, spec in state_specs(P).items()}
        data_sharding = NamedSharding(self.mesh, P(("p", "l")))
        self.data_shardings = {"x": data_sharding, "y": data_sharding}
        replicated = NamedSharding(self.mesh, P())
        self.step = jax.jit(lambda state, data: train_step(jax, state, data),
                            in_shardings=(self.shardings, self.data_shardings),
                            out_shardings=(self.shardings, replicated), donate_argnums=0)
        self.manager = ocp.CheckpointManager(
            checkpoints, options=ocp.CheckpointManagerOptions(enable_async_checkpointing=True))

    def put(self, values: dict, shardings: dict) -> dict:
        return {k: self.jax.make_array_from_callback(v.shape, shardings[k],
                                                     lambda index, v=v: v[index])
                for k, v in values.items()}

    def train(self, state: dict, step: int):
        return self.step(state, self.put(batch(step), self.data_shardings))

    def save(self, step: int, state: dict) -> None:
        self.manager.save(step, args=self.ocp.args.StandardSave(state))

    def restore(self, step: int, shardings: dict) -> dict:
        like = {k: self.jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=shardings[k])
                for k, v in initial_state().items()}
        return self.manager.restore(step, args=self.ocp.args.StandardRestore(like))


def reference(job: Job) -> dict:
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    state = job.put(initial_state(), job.shardings)
    saved = {0: {k: shards(v) for k, v in state.items()}}
    job.save(0, state)
    losses = {}
    for step in range(1, STEPS + 1):
        state, loss = job.train(state, step)  # donates the state a save may still write
        losses[step] = float(loss)
        saved[step] = {k: shards(v) for k, v in state.items()}
        job.save(step, state)
    job.manager.wait_until_finished()
    other_mesh = Mesh(np.array(job.jax.devices()[::-1]), ("d",))
    other = {k: NamedSharding(other_mesh, spec) for k, spec in restore_specs(P).items()}
    restored = {"same_0": job.restore(0, job.shardings), "same_2": job.restore(2, job.shardings),
                "other_0": job.restore(0, other)}
    return {"all_steps": list(job.manager.all_steps()), "losses": losses, "saved": saved,
            "restored": {name: {k: shards(v) for k, v in arrays.items()}
                         for name, arrays in restored.items()},
            "restored_specs": {name: {k: tuple(v.sharding.spec) for k, v in arrays.items()}
                               for name, arrays in restored.items()}}


def interrupted(job: Job) -> None:
    state = job.put(initial_state(), job.shardings)
    for step in (0, 1, 2):
        if step:
            state, _ = job.train(state, step)
        job.save(step, state)
        if step < 2:
            job.manager.wait_until_finished()
    # save returned: the arrays are on the host and orbax writes them in the background.
    os.kill(os.getpid(), signal.SIGKILL)


def resume(job: Job) -> dict:
    latest = job.manager.latest_step()
    state = job.restore(latest, job.shardings)
    restored = {k: shards(v) for k, v in state.items()}
    _, loss = job.train(state, latest + 1)
    return {"latest_step": latest, "all_steps": list(job.manager.all_steps()),
            "restored": restored, "next_step": latest + 1, "loss": float(loss)}


def main(argv: list) -> int:
    mode, checkpoints, out = argv
    from frameworks.jax import distributed
    distributed.initialize()
    import jax
    process = jax.process_index()
    job = Job(checkpoints)
    if mode == "interrupted":
        interrupted(job)  # does not return
    result = reference(job) if mode == "reference" else resume(job)
    job.manager.close()
    with open(os.path.join(out, f"{mode}.{process}.pkl"), "wb") as f:
        pickle.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
