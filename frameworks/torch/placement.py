"""Which devices compiled torch graphs run on.

By default every graph runs on the first device of the backend's client (backend.py), and a
graph with sharded inputs on a client of the mesh's size (sharding.py). Inside
``on_devices(group, total)`` graphs run on ``group``, device ids of one cpu client of
``total`` virtual devices: an unsharded program on the group's first device, a sharded one
with the mesh's logical device i on ``group[i]`` (so a mesh must span its group). Pipeline
stages (pipelining.py) run their forward and backward inside their group's placement. The
placement is part of a compiled graph's plan key (runner.py): the same graph called under
another placement compiles again for those devices.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from frameworks.torch.sharding import ShardingError


@dataclass(frozen=True)
class Placement:
    devices: tuple  # device ids in the client
    total: int      # the client's device count

    def client(self):
        from frameworks.torch.sharding import client
        return client(self.total)

    def compile(self, module, num_partitions: int = 1):
        """``module`` compiled for this group: one partition on the first device, or
        ``num_partitions`` (the group's size) over the group in order."""
        import pjrt
        if num_partitions not in (1, len(self.devices)):
            raise ShardingError(f"a mesh of {num_partitions} device(s) inside a placement on "
                                f"devices {list(self.devices)}: a mesh must span its group")
        assignment = [list(self.devices[:num_partitions])]
        return self.client().compile(module, pjrt.CompileOptions(
            num_partitions=num_partitions, device_assignment=assignment))

    def __str__(self) -> str:
        return f"devices {list(self.devices)} of {self.total}"


_current: Placement | None = None


def current() -> Placement | None:
    """The placement in force (None: the default)."""
    return _current


@contextlib.contextmanager
def on_devices(devices: Sequence[int], total: int):
    """Run the compiled graphs called inside on ``devices`` of a cpu client of ``total``
    virtual devices."""
    global _current
    group = tuple(int(d) for d in devices)
    if not group or len(set(group)) != len(group) or not all(0 <= d < total for d in group):
        raise ShardingError(f"a placement needs distinct device ids in 0..{total - 1}, got "
                            f"{list(devices)}")
    previous, _current = _current, Placement(group, total)
    try:
        yield _current
    finally:
        _current = previous
