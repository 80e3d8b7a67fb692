"""The text of a sharding model (stablehlo/ir/sharding.py), as Shardy and XLA write it.

A parsed sharding attribute prints the text it was written in; these functions spell the
shardings that passes build, and the parser reads back what they write.
"""
from __future__ import annotations

from stablehlo.ir.sharding import GspmdSharding, Mesh, SubAxis, TensorSharding


def print_axis(axis) -> str:
    """``"x"`` or a sub-axis ``"x":(1)2``."""
    if isinstance(axis, SubAxis):
        return f'"{axis.name}":({axis.pre_size}){axis.size}'
    return f'"{axis}"'


def print_axis_set(axes) -> str:
    return "{" + ", ".join(print_axis(a) for a in axes) + "}"


def print_mesh_body(mesh: Mesh) -> str:
    """``<["x"=4, "y"=2]>`` or ``<["x"=2], device_ids=[1, 0]>``."""
    text = "[" + ", ".join(f'"{n}"={s}' for n, s in mesh.axes) + "]"
    if mesh.device_ids is not None:
        text += ", device_ids=[" + ", ".join(map(str, mesh.device_ids)) + "]"
    return f"<{text}>"


def print_sharding_body(sharding: TensorSharding) -> str:
    """``<@mesh, [{"x"}, {}], replicated={"y"}>``, the per-value form."""
    dims = ", ".join(print_axis_set(axes) for axes in sharding.dims)
    if sharding.inline_mesh is not None:
        mesh = "mesh" + print_mesh_body(sharding.inline_mesh)
    else:
        mesh = f"@{sharding.mesh_name}"
    text = f"{mesh}, [{dims}]"
    if sharding.replicated:
        text += ", replicated=" + print_axis_set(sharding.replicated)
    if sharding.unreduced:
        text += ", unreduced=" + print_axis_set(sharding.unreduced)
    return f"<{text}>"


def print_sharding(sharding: TensorSharding) -> str:
    """``#sdy.sharding<@mesh, [{"x"}, {}]>``."""
    return "#sdy.sharding" + print_sharding_body(sharding)


def print_gspmd_sharding(sharding: GspmdSharding) -> str:
    """The ``mhlo.sharding`` string: ``{replicated}``, ``{devices=[2,1]0,1}``, ..."""
    if sharding.kind == "tuple":
        return "{" + ", ".join(print_gspmd_sharding(e) for e in sharding.elements) + "}"
    if sharding.kind == "maximal":
        return f"{{maximal device={sharding.device}}}"
    if sharding.kind != "tiled":
        return "{" + sharding.kind + "}"
    devices = sharding.tiles.devices
    text = "devices=[" + ",".join(map(str, devices.shape)) + "]"
    text += ",".join(map(str, devices.ravel().tolist()))
    if sharding.last_tile_dims == ("replicated",):
        text += " last_tile_dim_replicate"
    elif sharding.last_tile_dims:
        text += " last_tile_dims={" + ", ".join(sharding.last_tile_dims) + "}"
    return "{" + text + "}"
