"""PyTorch processes started by ``torchrun`` as one multi-process OpenHLO client.

``torchrun --nproc-per-node P script.py`` gives each process ``MASTER_ADDR``, ``MASTER_PORT``,
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``. With those set, the client that runs sharded
programs (sharding.py) spans every process: process ``RANK`` joins it with N local virtual
devices (N = the mesh size / ``WORLD_SIZE``, one process per host as PyTorch/XLA does it),
the processes meet through torch.distributed's store, and the collectives between them go
over gloo (pjrt/plugins/cpu/README.md, Many processes).

The store: the default process group's when ``torch.distributed.init_process_group`` was
called first, else the one ``env://`` rendezvous gives (torchrun's agent store, or a
TCPStore that rank 0 serves). ``TorchStore`` adapts either to pjrt's ``KeyValueStore``.
"""
from __future__ import annotations

import functools
import ipaddress
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Callable, Optional

import torch.distributed as dist

from pjrt.distributed.launch import drain_lines, free_loopback_port
from pjrt.distributed.options import DistributedOptions
from pjrt.distributed.store import KeyValueStore, PrefixStore
from pjrt.errors import ArgumentError, DeadlineExceededError
from stablehlo.ir.sharding import ShardingError

# The variables torchrun sets that a process needs to join (LOCAL_RANK is not needed: the
# virtual devices of a process are its own).
TORCHRUN_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
# The address this process's gloo connections listen on; default: loopback when
# MASTER_ADDR is a loopback address, else this host's name.
HOSTNAME_ENV = "OPENHLO_DISTRIBUTED_HOSTNAME"
# Our keys in torch's store, apart from torch's own.
KEY_PREFIX = "openhlo/"
# Polling interval bounds of a blocking get (seconds): short first, for the rendezvous
# keys that are usually there already.
_POLL_FIRST_S, _POLL_MAX_S = 0.001, 0.05
# Seconds torchrun gets to stop its workers and exit on SIGTERM before it is killed (it
# gives its workers 30 s).
TORCHRUN_STOP_GRACE_S = 40.0


class TorchStore(KeyValueStore):
    """A pjrt ``KeyValueStore`` over a ``torch.distributed.Store`` (TCPStore, PrefixStore...).

    A blocking get polls ``check`` instead of calling torch's blocking ``get``: a TCPStore
    client holds its connection for the whole of a blocking call, so one thread's wait would
    stall the other threads' sets on the same client (the native process groups call the
    store from their own threads)."""

    def __init__(self, store: dist.Store):
        self.store = store

    def set(self, key: str, value: bytes) -> None:
        self.store.set(key, bytes(value))

    def get(self, key: str, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        pause = _POLL_FIRST_S
        while not self.store.check([key]):
            if time.monotonic() >= deadline:
                raise DeadlineExceededError(f"torch.distributed store: key {key!r} was not set "
                                            f"within {timeout_s:g} s")
            time.sleep(pause)
            pause = min(pause * 2, _POLL_MAX_S)
        return bytes(self.store.get(key))

    def try_get(self, key: str) -> Optional[bytes]:
        return bytes(self.store.get(key)) if self.store.check([key]) else None


def launched_by_torchrun() -> bool:
    """Whether this process has the variables torchrun sets."""
    return all(os.environ.get(name) for name in TORCHRUN_ENV)


def _int_env(name: str) -> int:
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise ArgumentError(f"{name}={value!r} (set by torchrun) is not an integer") from None


def _torch_store() -> dist.Store:
    if dist.is_initialized():
        return dist.distributed_c10d._get_default_store()
    store, _, _ = next(dist.rendezvous("env://", timeout=timedelta(seconds=300)))
    return store


def _hostname() -> str:
    chosen = os.environ.get(HOSTNAME_ENV)
    if chosen:
        return chosen
    master = os.environ["MASTER_ADDR"]
    try:
        loopback = master == "localhost" or ipaddress.ip_address(master).is_loopback
    except ValueError:  # a host name
        loopback = False
    return "127.0.0.1" if loopback else socket.getfqdn()


def options() -> Optional[DistributedOptions]:
    """This process's place in the torchrun job, or None when torchrun did not start it."""
    if not launched_by_torchrun():
        return None
    rank, world = _int_env("RANK"), _int_env("WORLD_SIZE")
    return DistributedOptions(process_index=rank, num_processes=world,
                              store=PrefixStore(TorchStore(_torch_store()), KEY_PREFIX),
                              hostname=_hostname())


def num_processes() -> int:
    """``WORLD_SIZE`` under torchrun, else 1."""
    return _int_env("WORLD_SIZE") if launched_by_torchrun() else 1


def process_index() -> int:
    """``RANK`` under torchrun, else 0."""
    return _int_env("RANK") if launched_by_torchrun() else 0


def process_of_device(device: int, num_devices: int) -> int:
    """The process holding device ``device`` of ``client(num_devices)``: device ids follow
    process order, ``num_devices / WORLD_SIZE`` each."""
    return device // (num_devices // num_processes())


@functools.cache
def client(num_devices: int):
    """The cpu client of ``num_devices`` devices in all: a multi-process client under
    torchrun (``num_devices / WORLD_SIZE`` in this process), else a one-process one."""
    import pjrt
    joined = options()
    if joined is None:
        return pjrt.make_client("cpu", num_devices=num_devices)
    if num_devices % joined.num_processes:
        raise ShardingError(f"a mesh of {num_devices} device(s) cannot be spread over "
                            f"{joined.num_processes} torchrun processes (WORLD_SIZE): each "
                            f"process holds the same number of devices")
    return pjrt.make_client("cpu", num_devices=num_devices // joined.num_processes,
                            distributed=joined)


def torchrun(args: list, nproc_per_node: int, timeout_s: float,
             env: Optional[dict] = None,
             on_stderr_line: Optional[Callable[[str], None]] = None
             ) -> subprocess.CompletedProcess:
    """Run ``torchrun --nproc-per-node N ARGS`` on the loopback address and wait; its output is
    captured (``on_stderr_line`` sees each line of its stderr, the workers' included, as it
    comes). Raises DeadlineExceededError after ``timeout_s``, once torchrun has stopped its
    workers (SIGTERM: torchrun stops them before it exits; each worker runs in a session of
    its own, so torchrun is the one that can)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
               str(nproc_per_node), "--master-addr", "127.0.0.1", "--master-port",
               str(free_loopback_port()), *args]
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    captured = ["", ""]
    readers = [threading.Thread(target=drain_lines, args=(stream, captured, slot, relay),
                                daemon=True)
               for slot, (stream, relay) in enumerate(((child.stdout, None),
                                                       (child.stderr, on_stderr_line)))]
    for reader in readers:
        reader.start()
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(child)
        raise DeadlineExceededError(f"torchrun {' '.join(args)} still ran after {timeout_s:g} s: "
                                    f"stopped") from None
    finally:
        _stop(child)  # interrupted while waiting: stop it all the same
    for reader in readers:  # a worker torchrun left behind may hold the pipes open
        reader.join(timeout=TORCHRUN_STOP_GRACE_S)
    return subprocess.CompletedProcess(command, child.returncode, *captured)


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=TORCHRUN_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
