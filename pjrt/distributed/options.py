"""What a process needs to join a multi-process client, and the topology exchange.

``make_client("cpu", num_devices=N, distributed=DistributedOptions(process_index=i,
num_processes=P, store=store))`` in each of P processes gives one client over all their
devices (pjrt/plugins/cpu/README.md, Multi-process). ``from_environment()`` reads the
options a launcher (``openhlo run --num-processes``, launch.py) gives its children.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional

from pjrt.distributed.store import KeyValueStore, PrefixStore, TcpStore
from pjrt.errors import ArgumentError

# The variables a launcher sets in each child (launch.py) and from_environment reads.
STORE_ENV = "OPENHLO_STORE"  # host:port of the TcpStore
PROCESS_INDEX_ENV = "OPENHLO_PROCESS_INDEX"
NUM_PROCESSES_ENV = "OPENHLO_NUM_PROCESSES"


@dataclass(frozen=True)
class DistributedOptions:
    """One process's place in a multi-process client.

    ``store``: the key-value store every process reaches (store.py); ``hostname``: the
    address this process's collectives listen on, reachable by the others (loopback when
    all processes run on one machine); ``timeout_s``: the bound of every cross-process wait
    (None: ``OPENHLO_COLLECTIVE_TIMEOUT_S``, else 300 s).
    """
    process_index: int
    num_processes: int
    store: KeyValueStore
    hostname: str = "127.0.0.1"
    timeout_s: Optional[float] = None

    def __post_init__(self):
        if not isinstance(self.num_processes, int) or self.num_processes < 1:
            raise ArgumentError(f"num_processes must be a positive integer, got "
                                f"{self.num_processes!r}")
        if not isinstance(self.process_index, int) \
                or not 0 <= self.process_index < self.num_processes:
            raise ArgumentError(f"process_index must be in 0..{self.num_processes - 1}, got "
                                f"{self.process_index!r}")
        if not isinstance(self.store, KeyValueStore):
            raise ArgumentError(f"store must be a pjrt.distributed.store.KeyValueStore, got "
                                f"{type(self.store).__name__}")


def from_environment() -> Optional[DistributedOptions]:
    """The options a launcher set in this process's environment, or None."""
    address = os.environ.get(STORE_ENV)
    if not address:
        return None
    host, _, port = address.rpartition(":")
    try:
        return DistributedOptions(process_index=int(os.environ[PROCESS_INDEX_ENV]),
                                  num_processes=int(os.environ[NUM_PROCESSES_ENV]),
                                  store=TcpStore(host, int(port)))
    except (KeyError, ValueError) as exc:
        raise ArgumentError(f"{STORE_ENV}={address!r} needs {PROCESS_INDEX_ENV} and "
                            f"{NUM_PROCESSES_ENV} set to integers ({exc})") from None


def exchange_topology(options: DistributedOptions, platform: str, num_local_devices: int,
                      timeout_s: float) -> list[int]:
    """Every process's device count, in process order: each process publishes its own under
    ``<platform>/local_topology/<i>``; process 0 reads them all and publishes the global
    topology, which the others wait for. Raises DeadlineExceededError naming the key of a
    process that did not publish within ``timeout_s``."""
    store = PrefixStore(options.store, f"{platform}/")
    store.set(f"local_topology/{options.process_index}",
              json.dumps({"num_devices": num_local_devices}).encode())
    if options.process_index == 0:
        counts = [json.loads(store.get(f"local_topology/{i}", timeout_s))["num_devices"]
                  for i in range(options.num_processes)]
        store.set("global_topology", json.dumps(counts).encode())
        return counts
    return json.loads(store.get("global_topology", timeout_s))
