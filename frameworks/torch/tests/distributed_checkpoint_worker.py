"""One process of the checkpoint test (test_distributed_checkpoint.py):
``torchrun --nproc-per-node 2 -m frameworks.torch.tests.distributed_checkpoint_worker OUT_DIR``.

``TinyTransformer`` (torchrun_worker.py) with SGD + momentum on a ("model", "data") mesh of the
4 devices of both processes: "model" spans the processes (process p holds model index p), so
the Megatron-sharded fc1/fc2 and their momentum have pieces only one process holds. Under
OUT_DIR/ckpt, in order:

1. two steps, ``dcp.save`` into step 2; step 3's loss is the uninterrupted run's;
2. ``dcp.async_save`` of step 3, and step 4 at once (changing the state under the write);
   step 4's loss is the uninterrupted run's;
3. a fresh model sharded the other way (fc1 on dim 1, fc2 on dim 0) loads step 2: its values
   and its next-step loss; a fresh model sharded as saved loads step 3 (the async one): its
   values and its next-step loss;
4. process 0 writes OUT_DIR/result.json and the saved values (OUT_DIR/step_2.pt,
   step_3.pt), then a save of step 4 starts and process 1 exits in the middle of writing its
   file (after writing OUT_DIR/interrupted), as a killed process would: torchrun fails.
"""
import json
import os
import sys
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from frameworks.torch import checkpoint as ckpt
from frameworks.torch import distributed
from frameworks.torch import sharding as xs
from frameworks.torch.backend import openhlo_backend
from frameworks.torch.tests.torchrun_worker import TinyTransformer, data, shard

# What process 1 exits with in the middle of the last save.
INTERRUPT_EXIT_CODE = 17


def make_mesh(num_devices: int = 4) -> xs.Mesh:
    return xs.Mesh(np.arange(num_devices), (2, num_devices // 2), ("model", "data"))


def shard_other_way(model: TinyTransformer, mesh: xs.Mesh) -> None:
    xs.mark_sharding(model.fc1.weight, mesh, (None, "model"))
    xs.mark_sharding(model.fc2.weight, mesh, ("model", None))


class Trainer:
    """A model, its SGD (momentum 0.9) and a compiled step on the fixed batch."""

    def __init__(self, seed: int, mesh, shard_fn=shard):
        torch.manual_seed(seed)
        self.model = TinyTransformer()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.x, self.target = data()
        if mesh is not None:
            shard_fn(self.model, mesh)
            xs.mark_sharding(self.x, mesh, ("data", None, None))
            xs.mark_sharding(self.target, mesh, ("data", None))
        self.loss_fn = torch.compile(self._loss, backend=openhlo_backend)

    def _loss(self, x, target):
        return torch.nn.functional.mse_loss(self.model(x), target)

    def step(self) -> float:
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.x, self.target)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def state(self) -> dict:
        return ckpt.training_state(self.model, self.optimizer)


def values(state: dict) -> dict:
    """The tensors of a training state by DCP name, copied."""
    leaves, _ = ckpt.flatten_state(state)
    return {fqn: v.detach().clone() for fqn, v in leaves.items() if isinstance(v, torch.Tensor)}


def max_difference(state: dict, expected: dict) -> float:
    got = values(state)
    assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
    return max(float((got[k] - expected[k]).abs().max()) for k in expected)


class InterruptedSavePlanner(ckpt.ShardedSavePlanner):
    """Process 1 dies once its first tensor piece is in its file (``os._exit``: no cleanup,
    as a killed process)."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker
        self.resolved = 0

    def resolve_data(self, write_item):
        if distributed.process_index() == 1 and write_item.tensor_data is not None:
            self.resolved += 1
            if self.resolved == 2:
                with open(self.marker, "w") as f:
                    f.write("interrupted")
                os._exit(INTERRUPT_EXIT_CODE)
        return super().resolve_data(write_item)


def main(argv: list) -> int:
    out = argv[0]
    root = os.path.join(out, "ckpt")
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = distributed.process_index()
    mesh = make_mesh()
    client = distributed.client(mesh.size())
    owners = [distributed.process_of_device(d.id, mesh.size()) for d in client.devices()]
    result = {"device_processes_agree": owners == [d.process_index for d in client.devices()]}

    trainer = Trainer(0, mesh)
    result["losses"] = [trainer.step(), trainer.step()]
    saved_2 = values(trainer.state())
    dcp.save(trainer.state(), checkpoint_id=ckpt.checkpoint_path(root, 2),
             planner=ckpt.ShardedSavePlanner())
    result["losses"].append(trainer.step())
    saved_3 = values(trainer.state())
    future = dcp.async_save(trainer.state(), checkpoint_id=ckpt.checkpoint_path(root, 3),
                            planner=ckpt.ShardedSavePlanner(), async_stager=ckpt.ShardedStager())
    result["losses"].append(trainer.step())  # changes the state while it is written
    future.result()

    resharded = Trainer(1, mesh, shard_other_way)
    state = resharded.state()
    ckpt.load(state, ckpt.checkpoint_path(root, 2))
    ckpt.apply_training_state(resharded.model, resharded.optimizer, state)
    result["resharded_difference"] = max_difference(resharded.state(), saved_2)
    result["resharded_next_loss"] = resharded.step()

    resumed = Trainer(2, mesh)
    state = resumed.state()
    dcp.load(state, checkpoint_id=ckpt.checkpoint_path(root, 3),
             planner=ckpt.ShardedLoadPlanner())
    ckpt.apply_training_state(resumed.model, resumed.optimizer, state)
    result["async_difference"] = max_difference(resumed.state(), saved_3)
    result["resumed_next_loss"] = resumed.step()

    if rank == 0:
        torch.save(saved_2, os.path.join(out, "step_2.pt"))
        torch.save(saved_3, os.path.join(out, "step_3.pt"))
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(result, f)
    dcp.save(trainer.state(), checkpoint_id=ckpt.checkpoint_path(root, 4),
             planner=InterruptedSavePlanner(os.path.join(out, "interrupted")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
