"""Global arrays cut into the pieces a tile assignment gives each device, and glued back
(what execute_global does around a partitioned program); pieces checked against slices
written out by hand."""
import numpy as np
import pytest

from stablehlo.ir.sharding import REPLICATED, ShardingError, TileAssignment

from pjrt.global_arrays import assemble_global, global_shape, split_global


def test_halves_by_device_and_back():
    tiles = TileAssignment(False, np.array([1, 0]))  # device 1 holds the first half
    x = np.arange(8, dtype=np.float32)
    assert global_shape((4,), tiles) == (8,)
    pieces = split_global(x, tiles, 2)
    np.testing.assert_array_equal(pieces[0], x[4:])
    np.testing.assert_array_equal(pieces[1], x[:4])
    np.testing.assert_array_equal(assemble_global(pieces, tiles, (4,)), x)


def test_a_2d_grid_with_replicas_on_the_last_tile_dimension():
    # Rows split in two, columns whole, each row block held by two devices.
    tiles = TileAssignment(False, np.array([[[0, 1]], [[2, 3]]]), True)
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    assert global_shape((2, 3), tiles) == (4, 3)
    pieces = split_global(x, tiles, 4)
    for device, want in enumerate([x[:2], x[:2], x[2:], x[2:]]):
        np.testing.assert_array_equal(pieces[device], want)
        assert pieces[device].flags.c_contiguous
    np.testing.assert_array_equal(assemble_global(pieces, tiles, (2, 3)), x)


def test_replicated_values_are_whole_on_every_device():
    x = np.arange(6.0).reshape(2, 3)
    assert global_shape((2, 3), REPLICATED) == (2, 3)
    pieces = split_global(x, REPLICATED, 3)
    assert len(pieces) == 3 and all(p is pieces[0] for p in pieces)
    np.testing.assert_array_equal(assemble_global(pieces, REPLICATED, (2, 3)), x)


def test_tile_assignments_that_do_not_fit_are_refused():
    tiles = TileAssignment(False, np.array([0, 1]))
    with pytest.raises(ShardingError, match="over 2 devices used on 3"):
        split_global(np.zeros(4), tiles, 3)
    with pytest.raises(ShardingError, match="size 5 cannot be cut into 2 tiles"):
        split_global(np.zeros(5), tiles, 2)
    with pytest.raises(ShardingError, match=r"device 0 appears 2 times in the tile "
                                            r"assignment \[0, 0\]"):
        split_global(np.zeros(4), TileAssignment(False, np.array([0, 0])), 2)
