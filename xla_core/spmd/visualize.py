"""Draw how a value is laid out over devices: its tiles, and the devices holding each.

``tile_grid(shape, tiles, num_devices)`` gives the grid (rows x columns of tiles, each with its
element ranges and device ids) of a rank 0-2 value; ``render_text`` draws it with box
characters, one cell per tile labelled with its devices; ``render_png`` draws it with
matplotlib, cells proportional to the tiles' extents. ``tiles`` is a ``TileAssignment`` (as
``TensorSharding.tile_assignment`` or ``value_tiles`` give it); a replicated value is one tile
held by every device.
"""
from __future__ import annotations

from dataclasses import dataclass

from xla_core.spmd.sharding import ShardingError, TileAssignment


@dataclass(frozen=True)
class Cell:
    row: int
    col: int
    rows: tuple      # (start, stop) along dim 0 (rank 2), or (0, 1)
    cols: tuple      # (start, stop) along the last dim, or (0, 1) for a scalar
    devices: tuple   # the devices holding this tile, ascending


def tile_grid(shape, tiles: TileAssignment, num_devices: int | None = None) -> list:
    """Rows of ``Cell``s: a rank-1 value is one row, a rank-2 value rows x columns."""
    shape = tuple(int(n) for n in shape)
    if len(shape) > 2:
        raise ShardingError(f"drawing a value of rank {len(shape)} (shape {list(shape)}): only "
                            f"ranks 0 to 2 can be drawn")
    grid_shape = (1,) * (2 - len(shape)) + shape
    if tiles.replicated:
        if num_devices is None:
            raise ShardingError("drawing a replicated value needs num_devices")
        return [[Cell(0, 0, (0, grid_shape[0]), (0, grid_shape[1]),
                      tuple(range(num_devices)))]]
    devices = tiles.devices
    counts = tuple(tiles.tile_dims)
    if len(counts) != len(shape):
        raise ShardingError(f"a tile assignment over {len(counts)} dimension(s) drawn for a "
                            f"value of rank {len(shape)}")
    for extent, count in zip(shape, counts):
        if extent % count:
            raise ShardingError(f"a dimension of size {extent} cannot be cut into {count} "
                                f"tiles")
    if not tiles.replicate_on_last_tile_dim:
        devices = devices.reshape(devices.shape + (1,))
    devices = devices.reshape((1,) * (2 - len(shape)) + devices.shape)
    counts = (1,) * (2 - len(shape)) + counts
    step = [n // c for n, c in zip(grid_shape, counts)]
    grid = []
    for r in range(counts[0]):
        row = []
        for c in range(counts[1]):
            held = tuple(sorted(int(d) for d in devices[r, c].ravel()))
            row.append(Cell(r, c, (r * step[0], (r + 1) * step[0]),
                            (c * step[1], (c + 1) * step[1]), held))
        grid.append(row)
    return grid


def _label(devices: tuple) -> str:
    return ",".join(str(d) for d in devices)


def render_text(shape, tiles: TileAssignment, num_devices: int | None = None,
                ranges: bool = False) -> str:
    """The tiles in a box: one cell per tile, labelled with the ids of the devices holding it
    (and, with ``ranges``, the element ranges of the tile)."""
    grid = tile_grid(shape, tiles, num_devices)
    lines_of = {}
    for row in grid:
        for cell in row:
            text = [_label(cell.devices)]
            if ranges:
                text.append(f"[{cell.rows[0]}:{cell.rows[1]}, {cell.cols[0]}:{cell.cols[1]}]"
                            if len(shape) == 2 else f"[{cell.cols[0]}:{cell.cols[1]}]")
            lines_of[cell.row, cell.col] = text
    width = max(len(t) for text in lines_of.values() for t in text) + 2
    height = max(len(text) for text in lines_of.values())
    ncols = len(grid[0])

    def border(left, mid, right):
        return left + mid.join("─" * width for _ in range(ncols)) + right

    out = [border("┌", "┬", "┐")]
    for r, row in enumerate(grid):
        out.append("│" + "│".join(" " * width for _ in row) + "│")
        for k in range(height):
            cells = []
            for cell in row:
                text = lines_of[cell.row, cell.col]
                cells.append((text[k] if k < len(text) else "").center(width))
            out.append("│" + "│".join(cells) + "│")
        out.append("│" + "│".join(" " * width for _ in row) + "│")
        out.append(border("├", "┼", "┤") if r + 1 < len(grid) else border("└", "┴", "┘"))
    return "\n".join(out)


def read_text(text: str) -> list:
    """The cell labels of a box ``render_text`` drew, row by row (blank lines dropped): what
    tests and tools compare a drawing with."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if any(cells):
            rows.append(cells)
    return rows


def render_png(shape, tiles: TileAssignment, path, num_devices: int | None = None,
               title: str | None = None) -> None:
    """Draw the tiles into a PNG at ``path`` (needs matplotlib)."""
    grid = tile_grid(shape, tiles, num_devices)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError as exc:
        raise ImportError("render_png needs matplotlib (pip install matplotlib); "
                          "render_text draws the same layout without it") from exc
    height = grid[-1][0].rows[1]
    width = grid[0][-1].cols[1]
    fig, ax = plt.subplots(figsize=(min(12, 2 + 1.2 * len(grid[0])),
                                    min(9, 1.5 + 0.9 * len(grid))))
    colors = plt.get_cmap("tab20")
    for row in grid:
        for cell in row:
            x0, x1 = cell.cols
            y0, y1 = cell.rows
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0,
                                   facecolor=colors((cell.row * len(row) + cell.col) % 20),
                                   edgecolor="black"))
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, _label(cell.devices), ha="center",
                    va="center", fontsize=9)
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_xlabel(f"dim {len(shape) - 1}" if shape else "")
    ax.set_ylabel("dim 0" if len(shape) == 2 else "")
    ax.set_title(title or f"shape {list(shape)}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["Cell", "read_text", "render_png", "render_text", "tile_grid"]
