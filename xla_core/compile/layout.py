"""How a partitioned program's arguments and results are pieces of global values: what a
runtime needs to feed it global arrays and to put its results back together.

The runtime reaches SPMD layouts only through here (``xla_core.spmd`` stays the compiler's
business): ``entry_shardings`` reads the entry function's per-argument and per-result tile
assignments (replicated for single-device programs), ``global_shape`` gives the global shape
of a piece, and ``split_global`` / ``assemble_global`` cut a global array into the pieces
each device holds and glue them back.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Module
from xla_core.spmd.layout import assemble, split
from xla_core.spmd.sharding import entry_shardings as _entry_shardings


def entry_shardings(module: Module, entry: str) -> tuple:
    """``(parameter tiles, result tiles)`` of ``@entry``: one ``TileAssignment`` per
    argument and result, read from the function's sharding attributes."""
    return _entry_shardings(module, entry)


def global_shape(local_shape, tiles) -> tuple:
    """The shape of the global value whose pieces, laid out by ``tiles``, have
    ``local_shape``."""
    if tiles.replicated:
        return tuple(local_shape)
    return tuple(n * t for n, t in zip(local_shape, tiles.tile_dims))


def split_global(array, tiles, num_devices: int) -> list:
    """The piece of ``array`` each device 0..num_devices-1 holds."""
    return split(np.asarray(array), tiles, num_devices)


def assemble_global(pieces, tiles, local_shape) -> np.ndarray:
    """The global array whose pieces (by device) are ``pieces``, each of ``local_shape``."""
    return assemble(pieces, tiles, global_shape(local_shape, tiles))
