"""GSPMD-spelled programs (``mhlo.sharding`` strings) on a mesh of named axes.

A GSPMD tile assignment names no mesh: it lays device ids over the tiles of one value, e.g.
``{devices=[2,1,4]<=[8] last_tile_dim_replicate}`` (dimension 0 cut in 2, each tile held by 4
devices) or ``{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}``. JAX without Shardy
(and PyTorch/XLA) emit these for named meshes, always as a transposed iota of the device ids:
the ids ``0..N-1`` reshaped, transposed and reshaped into the tile shape (plus one trailing
dimension per subgroup of ``last_tile_dims``: devices holding copies for ``replicated``, the
devices a ``manual`` (shard_map) axis spans).

Each dimension of such a layout is then a run of *factors*: pieces of the id space where the
id steps by a fixed stride (``<=[2,4]T(1,0)``'s dimension 0 steps by 1 over 4 ids, dimension 1
by 4 over 2). The mesh of a program is the coarsest one whose axes line up with every factor
of every sharding in it (axis boundaries at each factor's stride and extent), so that each
sharding is a ``TensorSharding`` over whole axes: ``@mesh <["gspmd"=8]>`` for a 1-D program,
``<["gspmd_0"=2, "gspmd_1"=4]>`` for one on a (2, 4) mesh. Layouts that are no transposed
iota (explicit device lists in another order), and shardings of one program that cut the ids
in incompatible ways (no common mesh), are refused naming the field.

``rewrite_manual_regions`` turns GSPMD's shard_map form (``custom_call
@SPMDFullToShardShape`` ... ``@SPMDShardToFullShape``, the values in between sharded with a
``manual`` subgroup) into the ``sdy.manual_computation`` the partitioner runs, fully or
partially manual alike.
"""
from __future__ import annotations

from stablehlo.errors import ParseError
from stablehlo.ir.attributes import StringAttr
from stablehlo.ir.core import Block, Func, Operation, Region
from stablehlo.ir.ops.control_flow import custom_call_target
from stablehlo.ir.sharding import (GspmdSharding, GspmdShardingAttr, ManualAxesAttr, Mesh,
                                   ShardingError, ShardingPerValueAttr, TensorSharding)
from stablehlo.text.parse_sharding import read_gspmd_sharding
from stablehlo.text.print_sharding import print_axis_set

import numpy as np

from xla_core.ir_utils import replace_uses
from xla_core.spmd.sharding import SpmdUnsupportedError

GSPMD_AXIS = "gspmd"
CONSTRAINT_TARGET = "Sharding"
FULL_TO_SHARD = "SPMDFullToShardShape"
SHARD_TO_FULL = "SPMDShardToFullShape"
MANUAL_COMPUTATION = "sdy.manual_computation"


def read(attr, where: str) -> GspmdSharding:
    """The model of an ``mhlo.sharding`` attribute (parsed, or built as a plain string)."""
    if isinstance(attr, GspmdShardingAttr):
        return attr.sharding
    text = attr.value if isinstance(attr, StringAttr) else str(attr)
    try:
        return read_gspmd_sharding(text.strip().strip('"'))
    except ParseError as exc:
        raise ShardingError(f"{where}: cannot read mhlo.sharding {text!r}: {exc.reason}") \
            from None


def _refuse(where: str, sharding: GspmdSharding, what: str) -> SpmdUnsupportedError:
    return SpmdUnsupportedError(f"{where}: mhlo.sharding \"{sharding}\": {what}")


# ---- the factors of a tile layout --------------------------------------------------------

def _primes(n: int) -> list:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def layout_factors(devices: np.ndarray):
    """Per dimension of ``devices`` (a tile layout of the ids ``0..N-1``), its factors
    ``(size, stride)`` major to minor, each a maximal run of ids stepping by ``stride``;
    None when the layout is no transposed iota."""
    per_dim = [_primes(s) for s in devices.shape]
    fine_shape = [p for primes in per_dim for p in primes]
    fine = devices.reshape(fine_shape)
    origin = (0,) * len(fine_shape)
    if int(fine[origin]) != 0:
        return None
    strides = []
    for j in range(len(fine_shape)):
        step = list(origin)
        step[j] = 1
        strides.append(int(fine[tuple(step)]))
    order = sorted(range(len(fine_shape)), key=lambda j: -strides[j])
    iota = np.arange(devices.size).reshape([fine_shape[j] for j in order])
    if not np.array_equal(fine.transpose(order), iota):
        return None
    out, j = [], 0
    for primes in per_dim:
        factors = []
        for p in primes:
            size, stride = p, strides[j]
            j += 1
            if factors and factors[-1][1] == stride * size:  # continues the one above it
                factors[-1] = (factors[-1][0] * size, stride)
            else:
                factors.append((size, stride))
        out.append(factors)
    return out


def _tiled_factors(sharding: GspmdSharding, rank: int, where: str):
    """``(tile dim factors, subgroup factors by kind)`` of a tiled sharding of a value of
    ``rank``, checked."""
    devices = sharding.tiles.devices
    kinds = sharding.last_tile_dims
    if devices.ndim != rank + len(kinds):
        raise ShardingError(
            f"{where}: mhlo.sharding \"{sharding}\" has {devices.ndim} tile dimension(s) for a "
            f"value of rank {rank}" + (f" and {len(kinds)} subgroup(s) ({', '.join(kinds)})"
                                       if kinds else ""))
    for kind in kinds:
        if kind not in ("replicated", "manual"):
            raise _refuse(where, sharding, f"last_tile_dims kind '{kind}' is not supported "
                                           f"(only replicated and manual subgroups)")
    factors = layout_factors(devices)
    if factors is None:
        raise _refuse(where, sharding, "the device list is no transposed iota of the device ids "
                                       "(a mesh with its own device order), which is not "
                                       "supported")
    subgroups = {}
    for kind, dim in zip(kinds, factors[rank:]):
        subgroups.setdefault(kind, []).extend(dim)
    return factors[:rank], subgroups


def _checked_kind(sharding: GspmdSharding, where: str) -> None:
    if sharding.kind == "maximal":
        raise _refuse(where, sharding, f"'maximal' (the whole value on device "
                                       f"{sharding.device} only) is not supported: the "
                                       f"partitioner places every value on all devices")
    if sharding.kind == "unknown":
        raise _refuse(where, sharding, "'unknown' shardings are not supported")
    if sharding.kind == "tuple":
        raise _refuse(where, sharding, "a tuple sharding on a value that is no tuple")


# ---- the mesh ----------------------------------------------------------------------------

def infer_mesh(shardings, fallback_size: int) -> Mesh:
    """The coarsest mesh whose axes line up with every factor of ``shardings`` (``[(sharding,
    rank, where)]``: the mhlo.sharding strings of a program); one axis of ``fallback_size``
    when none is tiled."""
    bounds: dict = {}  # id-space boundary -> where it came from
    size = None
    for sharding, rank, where in shardings:
        if sharding.kind in ("replicated", "manual"):
            continue
        _checked_kind(sharding, where)
        if sharding.tiles.devices.size == 1:
            continue
        n = int(sharding.tiles.devices.size)
        if size is not None and n != size[0]:
            raise SpmdUnsupportedError(f"mhlo.sharding annotations over different device "
                                       f"counts: {size[0]} at {size[1]}, {n} at {where}")
        size = (n, where)
        tiles, subgroups = _tiled_factors(sharding, rank, where)
        for dim in tiles + list(subgroups.values()):
            for extent, stride in dim:
                bounds.setdefault(stride, where)
                bounds.setdefault(stride * extent, where)
    if size is None:
        return Mesh(((GSPMD_AXIS, max(fallback_size, 1)),))
    bounds.setdefault(1, "")
    chain = sorted(bounds)
    for low, high in zip(chain, chain[1:]):
        if high % low:
            raise SpmdUnsupportedError(
                f"no one mesh holds the mhlo.sharding annotations at {bounds[low]} and at "
                f"{bounds[high]}: they cut the device ids into incompatible groups ({low} and "
                f"{high} consecutive ids)")
    sizes = [high // low for low, high in zip(chain, chain[1:])][::-1]
    if len(sizes) == 1:
        return Mesh(((GSPMD_AXIS, sizes[0]),))
    return Mesh(tuple((f"{GSPMD_AXIS}_{i}", s) for i, s in enumerate(sizes)))


def _axes(mesh: Mesh, factors, sharding: GspmdSharding, where: str, what: str) -> tuple:
    """The mesh axes (major to minor) covering ``factors``."""
    strides, stride = {}, 1
    for name, extent in reversed(mesh.axes):
        strides[name] = (stride, extent)
        stride *= extent
    out = []
    for extent, step in factors:
        covered = [n for n, (s, e) in strides.items() if step <= s and s * e <= step * extent]
        covered.sort(key=lambda n: -strides[n][0])
        if not covered or min(strides[n][0] for n in covered) != step \
                or max(s * e for s, e in (strides[n] for n in covered)) != step * extent:
            raise _refuse(where, sharding, f"{what} ({extent} devices {step} apart) does not "
                                           f"line up with the axes of mesh {mesh} (sub-axes "
                                           f"are not supported)")
        out.extend(covered)
    return tuple(out)


def tensor_sharding(mesh_name: str, mesh: Mesh, sharding: GspmdSharding, rank: int,
                    where: str) -> tuple:
    """``(TensorSharding, manual axes)`` of a GSPMD sharding of a value of ``rank`` on
    ``mesh`` (one with the default device order, as ``infer_mesh`` builds)."""
    if sharding.kind in ("replicated", "manual"):
        manual = mesh.names if sharding.kind == "manual" else ()
        return TensorSharding(mesh_name, ((),) * rank), manual
    _checked_kind(sharding, where)
    if mesh.device_ids is not None:
        raise _refuse(where, sharding, f"on mesh {mesh} with its own device order (not "
                                       f"supported)")
    if sharding.tiles.devices.size == 1:
        return TensorSharding(mesh_name, ((),) * rank), ()
    if sharding.tiles.devices.size != mesh.size:
        raise ShardingError(f"{where}: mhlo.sharding \"{sharding}\" spans "
                            f"{sharding.tiles.devices.size} device(s), the mesh {mesh} "
                            f"{mesh.size}")
    tiles, subgroups = _tiled_factors(sharding, rank, where)
    dims = tuple(_axes(mesh, f, sharding, where, f"tile dimension {d}")
                 for d, f in enumerate(tiles))
    manual = _axes(mesh, subgroups.get("manual", ()), sharding, where, "the manual subgroup")
    return TensorSharding(mesh_name, dims), manual


# ---- shard_map (manual regions) ----------------------------------------------------------

def rewrite_manual_regions(func: Func, mesh_name: str, mesh: Mesh) -> None:
    """Each connected region between ``@SPMDFullToShardShape``s and
    ``@SPMDShardToFullShape``s of ``func`` (inlined: its ops at top level) becomes one
    ``sdy.manual_computation``: its operands the full values, cut as their sharding says
    (the ``@Sharding`` constraint feeding each ``@SPMDFullToShardShape``), its results put
    together as the ``@SPMDShardToFullShape``s' shardings say; its manual axes the manual
    subgroup of the pieces' shardings; the pieces' ``@Sharding`` constraints dropped (the
    partitioner runs a manual body whole along the free axes)."""
    ops = func.body.operations
    group: dict = {}  # op inside a region -> its root FullToShard op (union-find)

    def root(op):
        while group[op] is not op:
            op = group[op]
        return op

    inside = set()
    for op in ops:
        target = custom_call_target(op)
        if target == FULL_TO_SHARD:
            group[op] = op
            inside.add(op)
            continue
        producers = [v.owner for v in _used_values(op)
                     if isinstance(v.owner, Operation) and v.owner in inside
                     and custom_call_target(v.owner) != SHARD_TO_FULL]
        if not producers:
            continue
        group[op] = root(producers[0])
        for other in producers[1:]:
            group[root(other)] = group[op]
        inside.add(op)
    if not inside:
        return
    regions: dict = {}
    for op in ops:
        if op in inside:
            regions.setdefault(root(op), []).append(op)
    for members in regions.values():
        _Region(func, mesh_name, mesh, members).rewrite()


def _used_values(op: Operation) -> list:
    """The values ``op`` reads, those its regions read from outside included."""
    values = list(op.operands)
    for inner in list(op.walk())[1:]:
        values.extend(inner.operands)
    return values


class _Region:
    def __init__(self, func: Func, mesh_name: str, mesh: Mesh, members: list):
        self.func = func
        self.mesh_name = mesh_name
        self.mesh = mesh
        self.members = members
        self.starts = [op for op in members if custom_call_target(op) == FULL_TO_SHARD]
        self.ends = [op for op in members if custom_call_target(op) == SHARD_TO_FULL]
        self.member_set = set(members)

    def _sharding(self, op: Operation, what: str) -> tuple:
        attr = op.attributes.get("mhlo.sharding")
        if attr is None:
            raise SpmdUnsupportedError(f"{op.where()}: {what} has no mhlo.sharding")
        rank = len(op.results[0].type.shape)
        return tensor_sharding(self.mesh_name, self.mesh, read(attr, op.where()), rank,
                               op.where())

    def _full_sharding(self, start: Operation) -> TensorSharding:
        """How the full value entering a region is cut: the sharding constraint feeding it."""
        source = start.operands[0].owner
        if not isinstance(source, Operation) or custom_call_target(source) != CONSTRAINT_TARGET:
            raise SpmdUnsupportedError(
                f"{start.where()}: the operand of @{FULL_TO_SHARD} is no @Sharding "
                f"constraint, so how the full value is cut is not said")
        return self._sharding(source, "the @Sharding constraint")[0]

    def _outside(self, value, replacements: dict) -> bool:
        """Whether the body reads ``value`` from the function around the region."""
        if value in replacements:
            return False
        owner = value.owner
        if isinstance(owner, Block):
            return owner is self.func.body
        return owner.parent is self.func.body and owner not in self.member_set

    def rewrite(self) -> None:
        first = self.starts[0]
        if not self.ends:
            raise SpmdUnsupportedError(f"{first.where()}: a manual region (shard_map) that "
                                       f"never returns to full shape (@{SHARD_TO_FULL})")
        manual = {self._sharding(op, f"@{FULL_TO_SHARD}")[1] for op in self.starts}
        manual |= {self._sharding(op.operands[0].owner, "the piece")[1] for op in self.ends
                   if custom_call_target(op.operands[0].owner) == CONSTRAINT_TARGET}
        if len(manual) != 1 or not next(iter(manual)):
            raise SpmdUnsupportedError(
                f"{first.where()}: the values of a manual region (shard_map) name different "
                f"manual axes ({'; '.join(map(print_axis_set, manual)) or 'none'})")
        manual_axes = next(iter(manual))
        ops = self.func.body.operations
        at = ops.index(self.ends[0])
        for start in self.starts:
            operand = start.operands[0]
            if isinstance(operand.owner, Operation) and operand.owner.parent is start.parent \
                    and ops.index(operand.owner) > at:
                raise SpmdUnsupportedError(
                    f"{start.where()}: a manual region whose input depends on its own output "
                    f"is not supported")
        in_shardings = [self._full_sharding(op) for op in self.starts]
        out_shardings = [self._sharding(op, f"@{SHARD_TO_FULL}")[0] for op in self.ends]
        block = Block([op.results[0].type for op in self.starts])
        replacements = {op.results[0]: arg for op, arg in zip(self.starts, block.arguments)}
        body = [op for op in self.members if op not in self.starts and op not in self.ends]
        for op in body:
            for v in _used_values(op):
                if not self._outside(v, replacements):
                    continue
                if isinstance(v.owner, Operation) and v.owner.name == "stablehlo.constant":
                    owner = v.owner
                    copy = Operation(owner.name, (), owner.result_types, dict(owner.attributes),
                                     (), owner.location)
                    block.append(copy)
                    replacements[v] = copy.results[0]
                    continue
                source = v.owner.where() if isinstance(v.owner, Operation) \
                    else f"argument {v.index} of @{self.func.name}"
                raise SpmdUnsupportedError(
                    f"{op.where()}: reads {source} from outside its manual region "
                    f"(shard_map); only constants are taken in")
        for op in body:
            block.append(op)
        terminator = Operation("sdy.return", [op.operands[0] for op in self.ends])
        block.append(terminator)
        region = Region([block])
        replace_uses(_RegionRoot(region), replacements)
        _drop_piece_constraints(region)
        axes_text = print_axis_set(manual_axes)
        computation = Operation(MANUAL_COMPUTATION, [op.operands[0] for op in self.starts],
                                [op.results[0].type for op in self.ends], {
                                    "in_shardings": ShardingPerValueAttr.of(in_shardings),
                                    "out_shardings": ShardingPerValueAttr.of(out_shardings),
                                    "manual_axes": ManualAxesAttr(
                                        f"#sdy<manual_axes{axes_text}>", manual_axes)},
                                [region], first.location)
        computation.parent = self.func.body
        ops[at] = computation
        for op in self.members:
            if op is not self.ends[0]:
                ops.remove(op)
        outs = {end.results[0]: r for end, r in zip(self.ends, computation.results)}
        replace_uses(self.func.op, outs)


class _RegionRoot:
    """``replace_uses`` walks an op; this walks a detached region's ops."""

    def __init__(self, region: Region):
        self.region = region

    def walk(self):
        return self.region.walk()


def _drop_piece_constraints(region: Region) -> None:
    """The ``@Sharding`` constraints inside a manual body: their results become their
    operands."""
    replacements = {}
    for block in region.blocks:
        for op in list(block.walk()):
            if custom_call_target(op) == CONSTRAINT_TARGET:
                replacements[op.results[0]] = op.operands[0]
    if not replacements:
        return
    replace_uses(_RegionRoot(region), replacements)
    for op in list(region.walk()):
        if custom_call_target(op) == CONSTRAINT_TARGET:
            op.parent.operations.remove(op)
