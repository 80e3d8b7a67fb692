"""``xla_core.spmd.visualize``: the drawn grid of tiles holds, in each cell, the devices that
the mesh coordinates say hold that tile (computed here from the mesh by hand)."""
import sys

import pytest

from xla_core.spmd.sharding import Mesh, ShardingError, TensorSharding
from xla_core.spmd.visualize import read_text as parse_boxes
from xla_core.spmd.visualize import render_png, render_text, tile_grid

MESH = Mesh((("data", 2), ("model", 4)))  # device (d, m) = 4 * d + m


def _tiles(*dims):
    return TensorSharding("mesh", tuple(tuple(a) for a in dims)).tile_assignment(MESH)


def _ids(label: str) -> list:
    return [int(d) for d in label.split(",")]


def test_transposed_2d_layout_cells_hold_the_right_devices():
    # dim 0 over "model" (4 rows), dim 1 over "data" (2 columns): tile (r, c) is on 4c + r
    got = parse_boxes(render_text((8, 6), _tiles(("model",), ("data",))))
    assert [[_ids(c) for c in row] for row in got] == \
        [[[4 * c + r] for c in range(2)] for r in range(4)]


def test_partially_replicated_cells_list_every_holder():
    # dim 1 over "model" only: column m is held by (0, m) and (1, m)
    grid = tile_grid((16, 32), _tiles((), ("model",)))
    assert len(grid) == 1 and [c.devices for c in grid[0]] == [(m, 4 + m) for m in range(4)]
    assert [c.cols for c in grid[0]] == [(8 * m, 8 * m + 8) for m in range(4)]
    got = parse_boxes(render_text((16, 32), _tiles((), ("model",))))
    assert [[_ids(c) for c in row] for row in got] == [[[m, 4 + m] for m in range(4)]]


def test_ranges_and_rank_one_and_replicated():
    got = parse_boxes(render_text((12,), _tiles(("data",)), ranges=True))
    assert got == [["0,1,2,3", "4,5,6,7"], ["[0:6]", "[6:12]"]]
    whole = parse_boxes(render_text((3, 3), _tiles((), ()), num_devices=8))
    assert whole == [[",".join(map(str, range(8)))]]
    # two axes on one dim: "data" major, "model" minor -> 8 rows in device order
    rows = parse_boxes(render_text((8, 2), _tiles(("data", "model"), ())))
    assert [row[0] for row in rows] == [str(d) for d in range(8)]


def test_refusals_name_the_problem():
    with pytest.raises(ShardingError, match="rank 3"):
        render_text((2, 2, 2), _tiles(("data",), (), ()))
    with pytest.raises(ShardingError, match="num_devices"):
        render_text((4,), _tiles(()))
    with pytest.raises(ShardingError, match="cannot be cut"):
        tile_grid((6,), _tiles(("model",)))


def test_png_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "t.png"
    render_png((16, 32), _tiles(("data",), ("model",)), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_without_matplotlib_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="needs matplotlib"):
        render_png((4,), _tiles(("data",)), tmp_path / "t.png")
