"""Global arrays <-> the pieces each device holds, by tile assignment: what ``execute_global``
does to feed a partitioned program global arguments and to put its results back together.

Pure numpy on a ``TileAssignment`` (stablehlo/ir/sharding.py), the form of a sharding that a
compiled program's ``entry_shardings`` gives; no compiler work.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.sharding import ShardingError, TileAssignment


def global_shape(local_shape, tiles: TileAssignment) -> tuple:
    """The shape of the global value whose pieces, laid out by ``tiles``, have
    ``local_shape``."""
    if tiles.replicated:
        return tuple(local_shape)
    return tuple(n * t for n, t in zip(local_shape, tiles.tile_dims))


def split_global(array, tiles: TileAssignment, num_devices: int) -> list:
    """The piece of ``array`` each logical device 0..num_devices-1 holds."""
    array = np.asarray(array)
    if tiles.replicated:
        return [array] * num_devices
    if tiles.devices.size != num_devices:
        raise ShardingError(f"a tile assignment over {tiles.devices.size} devices used on "
                            f"{num_devices}")
    return [np.ascontiguousarray(array[_tile_slices(tiles, array.shape, d)])
            for d in range(num_devices)]


def assemble_global(pieces, tiles: TileAssignment, local_shape) -> np.ndarray:
    """The global array whose pieces (by logical device) are ``pieces``, each of
    ``local_shape``."""
    if tiles.replicated:
        return np.asarray(pieces[0])
    shape = global_shape(local_shape, tiles)
    out = np.empty(shape, dtype=np.asarray(pieces[0]).dtype)
    for device, piece in enumerate(pieces):
        out[_tile_slices(tiles, shape, device)] = piece
    return out


def _tile_slices(tiles: TileAssignment, shape, device: int) -> tuple:
    where = np.argwhere(tiles.devices == device)
    if len(where) != 1:
        raise ShardingError(f"device {device} appears {len(where)} times in the tile "
                            f"assignment {tiles.devices.tolist()}")
    index = where[0][:len(shape)]
    slices = []
    for extent, count, i in zip(shape, tiles.tile_dims, index):
        if extent % count:
            raise ShardingError(f"a dimension of size {extent} cannot be cut into {count} "
                                f"tiles")
        step = extent // count
        slices.append(slice(int(i) * step, (int(i) + 1) * step))
    return tuple(slices)
