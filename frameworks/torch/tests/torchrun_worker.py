"""One process of the torchrun training test (test_torchrun.py):
``torchrun --nproc-per-node P -m frameworks.torch.tests.torchrun_worker OUT.json N``.

Trains ``TinyTransformer`` with ``mark_sharding`` over a (data, model) mesh of the P * N
devices of all processes (N each) for ``STEPS`` SGD steps under
``torch.compile(backend="openhlo")``; every process feeds the full (replicated) batch, and
process 0 writes the losses, the final parameters' sum and its client's device counts to
OUT.json. ``train(num_devices)`` is the same run in one process.
"""
import json
import sys

import numpy as np
import torch

from frameworks.torch import sharding as xs
from frameworks.torch.backend import openhlo_backend

STEPS = 10
BATCH, SEQ, WIDTH, HEADS, HIDDEN = 8, 4, 16, 2, 32


class TinyTransformer(torch.nn.Module):
    """One pre-norm transformer block (multi-head self-attention, a ReLU MLP) and a head."""

    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.norm2 = torch.nn.LayerNorm(WIDTH)
        self.fc1 = torch.nn.Linear(WIDTH, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, WIDTH)
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (a.reshape(b, t, HEADS, d // HEADS).transpose(1, 2) for a in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2) / (d // HEADS) ** 0.5, dim=-1)
        x = x + self.proj((scores @ v).transpose(1, 2).reshape(b, t, d))
        x = x + self.fc2(torch.relu(self.fc1(self.norm2(x))))
        return self.head(x).squeeze(-1)


def shard(model: TinyTransformer, mesh: xs.Mesh) -> None:
    """Megatron MLP (column-parallel fc1, row-parallel fc2) over "model"; the batch is split
    over "data" where the inputs are marked."""
    xs.mark_sharding(model.fc1.weight, mesh, ("model", None))
    xs.mark_sharding(model.fc1.bias, mesh, ("model",))
    xs.mark_sharding(model.fc2.weight, mesh, (None, "model"))


def data():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, SEQ, WIDTH, generator=generator)
    target = torch.randn(BATCH, SEQ, generator=generator)
    return x, target


def train(num_devices: int, compiled: bool = True) -> dict:
    """``STEPS`` SGD steps on a (2, num_devices // 2) mesh; the losses and the sum of the
    final parameters."""
    torch.manual_seed(0)
    model = TinyTransformer()
    x, target = data()
    if num_devices > 1:
        mesh = xs.Mesh(np.arange(num_devices), (2, num_devices // 2), ("data", "model"))
        shard(model, mesh)
        xs.mark_sharding(x, mesh, ("data", None, None))
        xs.mark_sharding(target, mesh, ("data", None))

    def loss_fn(x, target):
        return torch.nn.functional.mse_loss(model(x), target)

    step = torch.compile(loss_fn, backend=openhlo_backend) if compiled else loss_fn
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = step(x, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses,
            "parameter_sum": float(sum(p.detach().double().sum() for p in model.parameters()))}


def main(argv: list) -> int:
    from frameworks.torch import distributed
    out, devices_per_process = argv[0], int(argv[1])
    world = distributed.num_processes()
    result = train(world * devices_per_process)
    result["num_processes"] = world
    client = distributed.client(world * devices_per_process)
    result["devices"] = len(client.devices())
    result["addressable_devices"] = len(client.addressable_devices())
    result["sharded_programs"] = len(xs.compiled_programs())
    if client.process_index == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
