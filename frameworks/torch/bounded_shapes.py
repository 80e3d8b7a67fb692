"""Bounded dynamic sizes in the torch backend: buckets for dynamic dims, upper bounds for
data-dependent sizes, and the check that padding cannot change a result.

    import frameworks.torch as oht
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)    # or torch.compile(dynamic=True)
    with oht.buckets([16, 64]):                         # default: powers of two
        compiled(x)                                     # one program per bucket

Note [Buckets]
    A dim Dynamo made dynamic (``mark_dynamic``, ``dynamic=True``, or automatically after a
    size changed) is a backed size symbol ``s0``. Instead of a program per value (runner.py,
    Note [Specializing symbolic sizes]), a graph whose every lowered op is padding-safe
    (``padding_hazard``) gets one program per bucket: the smallest power of two (or
    configured size) at or above the value, capped at the range's declared upper bound.
    Inputs are zero-padded to the bucket, the program runs at the bucket's size, and each
    result is sliced back to the real size; each program also takes the real sizes, so
    that reductions and softmax over a padded dim mask the padding (data_dependent.py's
    ``mask_padding``). A graph with a hazard (a variance or batch-norm statistics over the
    dynamic dim, a matmul contracting it, the size used as a value, a sort along it) is
    compiled exactly, as before, and the backend logs why once per graph.

Note [Padding safety]
    Padding is safe when no element of a result's valid region reads a padded element:
    elementwise ops, layout ops that keep the dim whole and in place, matmuls that do not
    contract it, reductions, softmax and norms over other dims, convolutions over it as the
    batch dim, and the reductions ``MASKABLE`` names over it (masked). Everything else is a
    hazard, named. A data-dependent size (bounded by data_dependent.py) is padded the same
    way; its real size, which masking needs, is computed in the program that makes it, so a
    masked reduction in a later program is a hazard there (the runner runs it eagerly).

The counters (bucketed calls, bucket hits, padded element share) join ``metrics_report``.
"""
from __future__ import annotations

import contextlib
import logging
import operator
import os
from dataclasses import dataclass

import numpy as np
import sympy
import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from stablehlo.errors import OpenHLOError

from frameworks.torch.lowering.data_dependent import MASKABLE, reduced_dims

logger = logging.getLogger("openhlo.torch")
aten = torch.ops.aten


class BucketError(OpenHLOError):
    """A bucket policy that is not ``"pow2"``, ``"off"`` or a list of positive sizes."""


# ---- the bucket policy -------------------------------------------------------------------

_policy_override: list = []  # the innermost ``buckets(...)`` policy, if any


def _parse_policy(policy):
    if policy is None or policy == "off":
        return None
    if policy == "pow2":
        return "pow2"
    if isinstance(policy, str):
        try:
            policy = [int(p) for p in policy.split(",") if p.strip()]
        except ValueError:
            raise BucketError(f"OPENHLO_TORCH_BUCKETS={policy!r}: expected 'pow2', 'off' or "
                              f"a comma-separated list of sizes") from None
    sizes = sorted(set(int(p) for p in policy))
    if not sizes or sizes[0] < 1:
        raise BucketError(f"bucket sizes {policy!r}: expected positive sizes")
    return tuple(sizes)


def current_policy():
    """``None`` (compile every size exactly), ``"pow2"`` or a tuple of sizes: the innermost
    ``buckets(...)``, else ``OPENHLO_TORCH_BUCKETS``, else ``"pow2"``."""
    if _policy_override:
        return _policy_override[-1]
    return _parse_policy(os.environ.get("OPENHLO_TORCH_BUCKETS", "pow2"))


@contextlib.contextmanager
def buckets(policy):
    """Within the block, dynamic dims are padded to ``policy``'s buckets: ``"pow2"``, a list
    of sizes, or ``"off"`` (a program per size)."""
    _policy_override.append(_parse_policy(policy))
    try:
        yield
    finally:
        _policy_override.pop()


def bucket(size: int, policy, upper) -> int:
    """The size ``size`` is padded to under ``policy``, never above the declared ``upper``
    (an int, or None when unbounded); ``size`` itself where no bucket holds it."""
    if policy == "pow2":
        chosen = 1 << max(size - 1, 0).bit_length()
    else:
        chosen = next((b for b in policy if b >= size), upper if upper is not None else size)
    return max(size, min(chosen, upper)) if upper is not None else chosen


def declared_upper(symbol: sympy.Symbol, shape_env) -> int | None:
    """The upper end of ``symbol``'s range in Dynamo's ShapeEnv, None if unbounded."""
    if shape_env is None:
        return None
    upper = shape_env.var_to_range.get(symbol).upper if symbol in shape_env.var_to_range \
        else None
    # an unbounded range ends at torch's own infinity, which is no sympy Integer
    return int(upper) if upper is not None and upper.is_Integer else None


# ---- which dims are padded ---------------------------------------------------------------

@dataclass
class Padding:
    """The padded size symbols of one plan: each bound to the size it is compiled at."""
    bounds: dict       # sympy Symbol -> int
    # the bucketed dynamic dims' symbols: their real sizes are program inputs, for masking
    # (a data-dependent size's count is computed in the program itself)
    bucketed: tuple


def symbol_of(size) -> sympy.Expr | None:
    """The sympy expression of a SymInt (None for a plain int)."""
    return sympy.sympify(size.node.expr) if isinstance(size, torch.SymInt) else None


def unbacked_bounds(graph: torch.fx.Graph, concrete) -> dict:
    """Each data-dependent size that an op of data_dependent.py makes -> its upper bound:
    the element count it selects from (Note [Bounded data-dependent sizes]). The ShapeEnv's
    range is not used: for a broadcasting masked_select it is the first input's count."""
    bounds = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _PRODUCERS:
            continue
        vals = node.meta.get("val")
        for val in vals if isinstance(vals, (tuple, list)) else [vals]:
            for size in val.shape if isinstance(val, torch.Tensor) else ():
                expr = symbol_of(size)
                if expr is not None and expr.is_Symbol and free_unbacked_symbols(size):
                    bounds.setdefault(expr, _selected_from(node, concrete))
    return bounds


def _selected_from(node: torch.fx.Node, concrete) -> int:
    """How many elements a data-dependent op chooses among: its result's size bound."""
    def shape(n):
        return tuple(int(concrete(d)) for d in n.meta["val"].shape)
    if node.target == aten.masked_select.default:
        return int(np.prod(torch.broadcast_shapes(shape(node.args[0]), shape(node.args[1]))))
    if node.target == aten.index.Tensor:
        return max(int(np.prod(shape(i))) for i in node.args[1] if i is not None)
    return int(np.prod(shape(node.args[0])))


class _Mixed(Exception):
    """A dim whose size is an expression of a padded symbol, not the symbol itself."""


def padded_dims(val, symbols) -> dict:
    """dim -> padded symbol, for each dim of the FakeTensor ``val`` sized by one."""
    found = {}
    if not isinstance(val, torch.Tensor):
        return found
    for d, size in enumerate(val.shape):
        expr = symbol_of(size)
        if expr is None or not expr.free_symbols & symbols:
            continue
        if expr not in symbols:
            raise _Mixed(f"its dim {d} has size {expr}, computed from a padded size")
        found[d] = expr
    return found


# layout ops: safe when every padded symbol stays a whole dim of the result
_LAYOUT = {aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default,
           aten.permute.default, aten.t.default, aten.transpose.int, aten.unsqueeze.default,
           aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.expand.default,
           aten.lift_fresh_copy.default, aten.copy.default, aten.embedding.default,
           aten.full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
           aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
           aten.new_empty.default, aten.arange.default, aten.arange.start,
           aten.arange.start_step, aten.scalar_tensor.default}
_POSITIONAL = {aten.slice.Tensor, aten.arange.default, aten.arange.start,
               aten.arange.start_step}
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
# op -> the argument holding the dim it works along (a padded one is a hazard, except for
# a prefix scan, where padding comes after every valid element)
_ALONG = {aten.cat.default: 1, aten.index_select.default: 1, aten.gather.default: 1,
          aten.flip.default: 1, aten.sort.default: 1, aten.topk.default: 2,
          aten.split_with_sizes.default: 2, aten.split.Tensor: 2, aten.unbind.int: 1,
          aten.select.int: 1, aten.slice.Tensor: 1, aten.roll.default: 2,
          aten.cumsum.default: 1, aten.cumprod.default: 1}
_PRODUCERS = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default,
              aten.index.Tensor}
_SCANS = {aten.cumsum.default, aten.cumprod.default}
_REDUCING = {aten.var.correction, aten.std.correction, aten.prod.dim_int, aten.argmax.default,
             aten.argmin.default, aten.max.dim, aten.min.dim, aten.logsumexp.default,
             aten.var_mean.correction, aten.native_layer_norm.default, *MASKABLE}


def padding_hazard(node: torch.fx.Node, padding: Padding, concrete) -> str | None:
    """Why padding ``padding``'s dims could change ``node``'s valid results, or None if it
    cannot (Note [Padding safety])."""
    symbols = set(padding.bounds)
    if isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return None  # size arithmetic: the runner evaluates it with the real sizes
    try:
        out = padded_dims(node.meta.get("val"), symbols)
        ins = {a: padded_dims(a.meta.get("val"), symbols) for a in node.all_input_nodes}
    except _Mixed as exc:
        return str(exc)
    uses_size = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.SymInt)
                 and symbol_of(a.meta["val"]).free_symbols & symbols]
    if not out and not any(ins.values()) and not uses_size:
        return None
    target = node.target
    if target is operator.getitem:
        return None
    # a padded size may give a shape (in a list argument), a slice's end or an arange's end
    # (checked below, or harmless: the positions below the real size are the same)
    as_value = [a for a in uses_size if a in [*node.args, *node.kwargs.values()]]
    if uses_size and (target not in _LAYOUT | _RESHAPES | {aten.slice.Tensor} or (
            as_value and target not in _POSITIONAL)):
        return f"it uses the padded size {symbol_of(uses_size[0].meta['val'])} as a value"
    if not isinstance(target, torch._ops.OpOverload):
        return None  # Python size arithmetic: evaluated on the host with the real sizes
    if torch.Tag.pointwise in target.tags:
        return None
    if target in _PRODUCERS and not any(ins.values()):
        return None  # it makes the padded dim (data_dependent.py)
    first = node.args[0].meta.get("val") if node.args and isinstance(
        node.args[0], torch.fx.Node) else None
    first_dims = ins.get(node.args[0], {}) if first is not None else {}
    if target in _RESHAPES:
        return _reshape_hazard(first, node.meta["val"], first_dims, out, concrete)
    if target in _LAYOUT:
        lost = set().union(*map(dict.values, ins.values())) - set(out.values())
        return f"it drops the padded dim of size {sorted(lost)[0]}" if lost else None
    if target == aten.cat.default:  # its inputs come as a list: any of them counts
        first, first_dims = node.args[0][0].meta["val"], {
            d: symbol for dims in ins.values() for d, symbol in dims.items()}
    if target in _ALONG:
        return _along_hazard(node, first, first_dims, concrete)
    if target in _REDUCING:
        dims = reduced_dims(node, first.dim()) if target in MASKABLE else \
            _reducing_dims(node, first.dim())
        hit = [first_dims[d] for d in dims if d in first_dims]
        if hit and target not in MASKABLE:
            return f"it reduces over the padded dim of size {hit[0]}"
        return None
    return _special_hazard(node, ins, first_dims)


def _reshape_hazard(first, result, first_dims, out, concrete) -> str | None:
    # a padded dim must stay a dim of its own at the same offset: the elements before it
    # (the product of the dims to its left) must be the same number in and out
    where_out = {s: d for d, s in out.items()}
    for d, symbol in first_dims.items():
        if symbol not in where_out:
            return f"it merges or splits the padded dim of size {symbol}"
        before_in = np.prod([int(concrete(s)) for s in first.shape[:d]])
        before_out = np.prod([int(concrete(s)) for s in result.shape[:where_out[symbol]]])
        if before_in != before_out:
            return f"it moves the padded dim of size {symbol} relative to the others"
    return None


def _along_hazard(node, first, first_dims, concrete) -> str | None:
    where = _ALONG[node.target]
    dim = node.args[where] if len(node.args) > where else node.kwargs.get("dim", 0)
    if node.target == aten.flip.default:
        dims = [d % first.dim() for d in dim]
    else:
        dims = [dim % max(first.dim(), 1)]
    hit = [first_dims[d] for d in dims if d in first_dims]
    if not hit or node.target in _SCANS:
        return None
    if node.target == aten.slice.Tensor and _whole_slice(node, first, dims[0], concrete):
        return None
    return f"it works along the padded dim of size {hit[0]}"


def _whole_slice(node, first, dim: int, concrete) -> bool:
    start = node.args[2] if len(node.args) > 2 else 0
    end = node.args[3] if len(node.args) > 3 else None
    step = node.args[4] if len(node.args) > 4 else 1
    if isinstance(start, torch.fx.Node) or step != 1 or (start or 0) != 0:
        return False
    if isinstance(end, torch.fx.Node):
        end = concrete(end.meta["val"])
    return end is None or end >= int(concrete(first.shape[dim]))


def _reducing_dims(node, rank: int) -> list:
    if node.target == aten.native_layer_norm.default:
        return list(range(rank - len(node.args[1]), rank))
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dim is None or dim == []:
        return list(range(rank))
    return [d % rank for d in ([dim] if isinstance(dim, int) else dim)]


def _special_hazard(node, ins, first_dims) -> str | None:
    target = node.target
    args = node.args
    if target in (aten.mm.default, aten.bmm.default, aten.addmm.default,
                  aten.baddbmm.default):
        lhs, rhs = (args[1], args[2]) if target in (aten.addmm.default,
                                                     aten.baddbmm.default) else args[:2]
        contracted = lhs.meta["val"].dim() - 1
        if contracted in ins.get(lhs, {}) or contracted - 1 in ins.get(rhs, {}):
            return "it contracts over a padded dim"
        return None
    if target == aten.convolution.default:
        if set(first_dims) <= {0} and not ins.get(args[1]):
            return None
        return "it convolves over a padded dim"
    if target == aten._native_batch_norm_legit_no_training.default:
        return "it normalizes along a padded dim" if 1 in first_dims else None
    return f"{target} has no padding rule"


# ---- per graph: which padding a call gets -------------------------------------------------

def plan_padding(graph: torch.fx.Graph, buckets: dict | None, concrete) -> Padding | None:
    """The padding of a plan: ``buckets`` for its dynamic dims (None: sizes exact) and the
    upper bounds of its data-dependent sizes; None when nothing is padded."""
    unbacked = unbacked_bounds(graph, concrete)
    if not buckets and not unbacked:
        return None
    return Padding({**(buckets or {}), **unbacked}, tuple(buckets or ()))


class Bucketing:
    """The buckets of one graph's dynamic dims for each call (Note [Buckets]), unless a
    lowered op makes padding them unsafe."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, lowerable):
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.graph = gm.graph
        self.name = name
        self.lowerable = lowerable  # node -> whether it would be lowered (can_lower)
        self.exact: str | None = None  # why the dynamic dims are compiled per size
        self.checked = False
        # (input index, dim or None for a size input, symbol, declared upper bound) for
        # each dynamic size, found once: a call of a static graph then costs nothing here
        self.dynamic = []
        for i, node in enumerate(self.placeholders):
            val = node.meta.get("val")
            sizes = enumerate(val.shape) if isinstance(val, torch.Tensor) else [(None, val)]
            for dim, size in sizes:
                expr = symbol_of(size)
                if expr is not None and expr.is_Symbol:
                    self.dynamic.append((i, dim, expr,
                                         declared_upper(expr, size.node.shape_env)))

    def for_call(self, args, signature: tuple, bindings):
        """``(bucket sizes {symbol: size} or None, the signature a plan is cached under,
        (input elements valid, sent) or None)`` for ``args``; ``bindings(bounds)`` gives
        the Bindings of ``args`` with ``bounds`` applied."""
        if not self.dynamic or self.exact is not None:
            return None, signature, None
        policy = current_policy()
        if policy is None:
            return None, signature, None
        bounds = {}
        for i, dim, expr, upper in self.dynamic:
            value = args[i] if dim is None else args[i].shape[dim]
            bounds.setdefault(expr, bucket(int(value), policy, upper))
        if not self.checked:
            self.checked = True
            self.exact = self._hazard(bounds, bindings(bounds))
            if self.exact is not None:
                STATS.exact_graphs[self.name] = self.exact
                logger.info("openhlo: %s compiles each size of its dynamic dims exactly: %s",
                            self.name, self.exact)
                return None, signature, None
        signature, *elements = self._bucketed(args, signature, bounds)
        return bounds, signature, elements

    def _hazard(self, bounds: dict, concrete) -> str | None:
        padding = Padding(bounds, tuple(bounds))
        for node in self.graph.nodes:
            if node.op != "call_function" or not self.lowerable(node):
                continue
            reason = padding_hazard(node, padding, concrete)
            if reason is not None:
                return f"{node.target} (node {node.name}): {reason}"
        return None

    def _bucketed(self, args, signature: tuple, bounds: dict):
        """The signature with bucket sizes, and the input elements valid and sent."""
        signature = list(signature)
        shapes = {}
        for i, dim, expr, _ in self.dynamic:
            if dim is None:
                signature[i] = bounds[expr]
            else:
                shapes.setdefault(i, list(args[i].shape))[dim] = bounds[expr]
        valid = padded = 0
        for i, shape in shapes.items():
            signature[i] = (tuple(shape), args[i].dtype)
            valid += args[i].numel()
            padded += int(np.prod(shape))
        return tuple(signature), valid, padded


# ---- at run time ---------------------------------------------------------------------------

def pad_to(t: torch.Tensor, shape: tuple) -> torch.Tensor:
    """``t`` zero-padded at the end of each dim to ``shape``."""
    if tuple(t.shape) == shape:
        return t
    out = t.new_zeros(shape)
    out[tuple(slice(0, n) for n in t.shape)] = t
    return out


def narrow_to(t: torch.Tensor, shape: tuple) -> torch.Tensor:
    """The leading ``shape`` part of the padded ``t`` (a view)."""
    if tuple(t.shape) == shape:
        return t
    return t[tuple(slice(0, n) for n in shape)]


class BucketStats:
    """Counts of bucketed calls for ``metrics_report``: calls, calls that found their
    bucket compiled, and input elements sent vs valid (the padding overhead)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.hits = 0
        self.valid_elements = 0
        self.padded_elements = 0
        self.exact_graphs: dict = {}  # graph name -> why it is compiled per size

    def record(self, hit: bool, valid: int, padded: int) -> None:
        self.calls += 1
        self.hits += hit
        self.valid_elements += valid
        self.padded_elements += padded

    def report(self) -> str:
        if not self.calls and not self.exact_graphs:
            return ""
        overhead = (self.padded_elements / self.valid_elements - 1) * 100 \
            if self.valid_elements else 0.0
        lines = [f"bucketed calls: {self.calls}", f"bucket hits: {self.hits}",
                 f"padding overhead: {overhead:.1f}% of input elements"]
        lines += [f"compiled per size: {name}: {why}"
                  for name, why in sorted(self.exact_graphs.items())]
        return "\n".join(lines)


STATS = BucketStats()
