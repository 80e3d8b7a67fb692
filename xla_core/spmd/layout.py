"""Global arrays <-> per-device pieces, by tile assignment: what a runtime does to feed a
partitioned program global arguments and to put its results back together."""
from __future__ import annotations

import numpy as np

from xla_core.spmd.sharding import ShardingError, TileAssignment


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


def split(array: np.ndarray, tiles: TileAssignment, num_devices: int) -> list:
    """The piece of ``array`` each logical device 0..num_devices-1 holds."""
    array = np.asarray(array)
    if tiles.replicated:
        return [array] * num_devices
    if tiles.devices.size != num_devices:
        raise ShardingError(f"a tile assignment over {tiles.devices.size} devices used on "
                            f"{num_devices}")
    return [np.ascontiguousarray(array[_tile_slices(tiles, array.shape, d)])
            for d in range(num_devices)]


def assemble(pieces, tiles: TileAssignment, shape) -> np.ndarray:
    """The global array whose pieces (by logical device) are ``pieces``."""
    if tiles.replicated:
        return np.asarray(pieces[0])
    out = np.empty(tuple(shape), dtype=np.asarray(pieces[0]).dtype)
    for device, piece in enumerate(pieces):
        out[_tile_slices(tiles, shape, device)] = piece
    return out


__all__ = ["assemble", "split"]
