"""Runs an ATen FX graph (AOTAutograd level) on an OpenHLO backend, op by op where needed.

``GraphRunner(gm)`` is the boxed callable the torch.compile backend returns. On a call it
looks up a ``Plan`` for the inputs' shapes, dtypes and symbolic-size values; a miss builds
one and logs what changed since the previous inputs (Note [Specializing symbolic sizes]).

A plan splits the graph into runs of nodes with a lowering rule (each compiled into one
StableHLO program) separated by nodes without one, which run in eager PyTorch on CPU
(Note [Eager fallback]). Every fallback is logged once per plan, naming the op and why.
Inputs reach compiled segments as numpy views, kept between calls for parameters
(Note [Parameter views]).

Note [Specializing symbolic sizes]
    Dynamo turns a dim dynamic after its size changes once, so graphs arrive with SymInt
    placeholders and FakeTensors of symbolic shapes. A plan binds each size symbol to the
    value the real inputs give it and evaluates every symbolic size in the graph with those
    bindings, so the StableHLO it builds has static shapes; new sizes give a new plan.
    Where padding is safe, a size is bound to its bucket instead and the plan is cached
    under the bucket, and data-dependent sizes are bound to their upper bound; such a
    plan pads inputs and slices results at every segment (bounded_shapes.py).

Note [Parameter views]
    Segments take numpy views of their torch inputs (no copy either way). Building a view
    costs about a microsecond per tensor, which adds up over a model's weights, so a plan
    keeps the views of its parameters (and the graph's constant tensors) between calls. A
    view shares its tensor's memory, so in-place updates (an optimizer step) show through;
    it is rebuilt when the input is another tensor, its memory moved (``.data =``), or its
    version changed (``set_`` and other in-place ops). Activations are not kept: they change
    every call, and keeping them would hold the caller's last inputs alive.

Note [Eager fallback]
    The simplest partition that is always correct: walk the nodes in graph order, grow the
    current segment while nodes lower, close it at a node that does not. A rule that raises
    at lowering time (an argument combination it does not handle) moves its node to the
    eager side and the plan is rebuilt, so the graph still runs.
"""
from __future__ import annotations

import logging
import operator
from typing import Sequence

import numpy as np
import sympy
import torch
from torch.fx.node import map_aggregate

import pjrt
from pjrt import counters
from stablehlo.ir.types import TensorType

from frameworks.torch import bounded_shapes as _bounded
from frameworks.torch import placement as _placement
from frameworks.torch import sharding as _sharding
from frameworks.torch.lowering import (LoweringFailed, Unsupported, can_lower, lower_nodes,
                                       op_name)
from frameworks.torch.lowering.dtypes import from_numpy, to_numpy
from frameworks.torch.lowering.graph import tensor_type
from frameworks.torch.output_layout import OutputLayouts, row_major_strides
from frameworks.torch.permuted_layouts import dense_order, from_physical, to_physical_numpy

logger = logging.getLogger("openhlo.torch")

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _signature(args: Sequence) -> tuple:
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)


def describe_changes(old: tuple, new: tuple) -> str:
    """What differs between two input signatures, e.g. ``input 0 shape (4, 8) -> (6, 8)``."""
    changes = []
    for i, (o, n) in enumerate(zip(old, new)):
        if o == n:
            continue
        if isinstance(o, tuple) and isinstance(n, tuple):
            if o[0] != n[0]:
                changes.append(f"input {i} shape {o[0]} -> {n[0]}")
            if o[1] != n[1]:
                changes.append(f"input {i} dtype {o[1]} -> {n[1]}")
        else:
            changes.append(f"input {i} value {o} -> {n}")
    if len(old) != len(new):
        changes.append(f"{len(old)} -> {len(new)} inputs")
    return ", ".join(changes)


def recompile_cause(old_key: tuple, new_key: tuple) -> str:
    """The metrics' name for what made a graph specialize again (keys are ``(input
    signature, shardings, placement, auto-sharding)``): ``torch: new input shapes``,
    ``... dtypes``, ``... values``."""
    kinds = []
    (old, old_shardings, old_placement, old_auto) = old_key
    (new, new_shardings, new_placement, new_auto) = new_key
    pairs = [(o, n) for o, n in zip(old, new) if o != n]
    if len(old) != len(new):
        kinds.append("count")
    if any(isinstance(o, tuple) and isinstance(n, tuple) and o[0] != n[0] for o, n in pairs):
        kinds.append("shapes")
    if any(isinstance(o, tuple) and isinstance(n, tuple) and o[1] != n[1] for o, n in pairs):
        kinds.append("dtypes")
    if any(not (isinstance(o, tuple) and isinstance(n, tuple)) for o, n in pairs):
        kinds.append("values")
    if old_shardings != new_shardings:
        kinds.append("shardings")
    if old_placement != new_placement:
        kinds.append("placement")
    if old_auto != new_auto:
        kinds.append("auto-sharding")
    return "torch: new input " + " and ".join(kinds)


class Bindings:
    """Values of a graph's size symbols for one set of real inputs; ``bounds`` (symbol ->
    size) overrides them with the sizes a padded plan is compiled at (bounded_shapes.py)."""

    def __init__(self, placeholders: Sequence[torch.fx.Node], args: Sequence,
                 bounds: dict | None = None):
        self.symbols: dict = {}
        tensors = []
        for node, arg in zip(placeholders, args):
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                tensors.append((val, arg))
                for dim, size in zip(val.shape, arg.shape):
                    self._bind(dim, size)
            else:
                self._bind(val, arg)
        # symbols only an input's strides or offset name (a view input of a dynamic graph):
        # output layouts need them (output_layout.py); where a size names one too, it wins
        for val, arg in tensors:
            for sym, value in zip((*val.stride(), val.storage_offset()),
                                  (*arg.stride(), arg.storage_offset())):
                self._bind(sym, value, keep=True)
        self.symbols.update((s, sympy.Integer(n)) for s, n in (bounds or {}).items())

    def _bind(self, sym, value, keep: bool = False) -> None:
        """``sym`` = ``value`` if ``sym`` is a bare symbol (not when bound already, if
        ``keep``)."""
        if isinstance(sym, _SYMBOLIC) and sympy.sympify(sym.node.expr).is_Symbol:
            expr = sympy.sympify(sym.node.expr)
            if not (keep and expr in self.symbols):
                self.symbols[expr] = sympy.sympify(value)

    def __call__(self, x):
        """``x`` with its symbolic value evaluated (plain values pass through)."""
        if not isinstance(x, _SYMBOLIC):
            return x
        value = sympy.sympify(x.node.expr).xreplace(self.symbols)
        if value.free_symbols:  # data-dependent (unbacked) sizes are known only at run time
            raise Unsupported(f"size {x} depends on {sorted(map(str, value.free_symbols))}, "
                              f"which no input determines")
        kind = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(x)]
        return kind(value)


class _Segment:
    """One compiled run of nodes: its tensor inputs and outputs (FX nodes), its program;
    in a padded plan, its inputs' padded shapes, the data-dependent size symbols whose
    counts its program returns after the outputs, and the bucketed size symbols whose real
    values it takes after the inputs. ``input_orders``: per input, None or the order of dims
    its program takes it in; ``output_layouts``: per output, None or the (size, stride) its
    program's array, returned in that layout's order, gets (Note [Permuted layouts]);
    ``output_strides``: per output, None or the numpy strides that make its array, as
    ``from_numpy`` converts it, a tensor already in its traced layout (row-major)."""

    def __init__(self, inputs, outputs, executable, input_shapes=(), counts=(), sizes=(),
                 input_orders=None, output_layouts=None, output_strides=None):
        self.inputs, self.outputs, self.executable = inputs, outputs, executable
        self.input_shapes, self.counts = list(input_shapes), list(counts)
        self.sizes = list(sizes)
        self.input_orders = input_orders or [None] * len(inputs)
        self.output_layouts = output_layouts or [None] * len(outputs)
        self.output_strides = output_strides or [None] * len(outputs)


class _HostViews:
    """numpy views of the tensors a plan gets each call, kept for its stable inputs
    (Note [Parameter views])."""

    def __init__(self, stable):
        self.stable = set(stable)
        self.kept: dict = {}  # node -> (tensor, data_ptr, version, view)

    def view(self, node: torch.fx.Node, t: torch.Tensor, order: tuple | None = None):
        """``t`` as its segment takes it: row-major, or with its dims in ``order``."""
        if node not in self.stable:
            return to_numpy(t) if order is None else to_physical_numpy(t, order)
        kept = self.kept.get(node)
        if kept is not None and kept[0] is t and kept[1] == t.data_ptr() \
                and kept[2] == t._version:
            return kept[3]
        view = to_numpy(t) if order is None else to_physical_numpy(t, order)
        self.kept[node] = (t, t.data_ptr(), t._version, view)
        return view


class Plan:
    """A graph specialized to one input signature: compiled segments and eager nodes."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence, client, name: str,
                 shardings: tuple | None = None, placement: _placement.Placement | None = None,
                 auto: _sharding.AutoSpmd | None = None,
                 buckets: dict | None = None):
        self.graph = gm.graph
        self.placement = placement
        self.auto = auto  # use_spmd(auto=True): every segment is auto-sharded
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # placeholder -> its Sharding (sharding.py): segments taking one run partitioned
        self.shardings = {n: s for n, s in zip(self.placeholders, shardings or ())
                          if s is not None}
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        self.layouts = OutputLayouts(self.output)  # Note [Output layouts]
        self.concrete = Bindings(self.placeholders, args, buckets)
        # sizes compiled at a bucket or an upper bound (bounded_shapes.py)
        self.padding = padding = _bounded.plan_padding(gm.graph, buckets, self.concrete)
        if padding is not None:
            self.concrete = Bindings(self.placeholders, args, padding.bounds)
        self.known = self._symbolic_values()
        # sizes evaluated at the bounds for lowering, but at the real sizes on the host
        self.padded_known = [n for n in self.known if padding is not None and set(
            sympy.sympify(n.meta["val"].node.expr).free_symbols) & set(padding.bounds)]
        # tensors the graph holds as attributes: inputs of the segments that use them
        self.constants = {n: _fetch_attr(gm, n.target) for n in gm.graph.nodes
                          if n.op == "get_attr"}
        self.eager: dict = {}  # node -> why it runs in eager PyTorch
        while True:
            before = len(self.eager)
            try:
                self.steps = [self._compile(step, client, name) for step in self._partition()]
                break
            except LoweringFailed as exc:
                self.eager.setdefault(exc.node, exc.reason)
                if len(self.eager) == before:  # no node moved: retrying cannot help
                    raise
        for node, reason in self.eager.items():
            logger.warning("openhlo: %s (node %s) runs in eager PyTorch: %s",
                           op_name(node), node.name, reason)
        self.base_env = {**self.known, **self.constants}
        self.views = _HostViews([*self.constants, *(
            n for n, a in zip(self.placeholders, args) if isinstance(a, torch.nn.Parameter))])

    def _symbolic_values(self) -> dict:
        """Size inputs and nodes computing sizes (``sym_size``, SymInt arithmetic), evaluated
        now."""
        known = {}
        for node in self.graph.nodes:
            if node.op in ("placeholder", "call_function") and isinstance(
                    node.meta.get("val"), _SYMBOLIC):
                try:
                    known[node] = self.concrete(node.meta["val"])
                except Unsupported:
                    continue  # computed at run time by the eager side
        return known

    def _lowerable(self, node: torch.fx.Node) -> bool:
        if node in self.eager:
            return False
        if node.target is operator.getitem:
            return self._lowerable(node.args[0])
        reason = can_lower(node)
        if reason is None and self.padding is not None:
            hazard = _bounded.padding_hazard(node, self.padding, self.concrete)
            reason = hazard and f"padding its bounded size could change it: {hazard}"
        if reason is not None:
            self.eager[node] = reason
            return False
        return True

    def _partition(self) -> list:
        """Runs of lowerable nodes (lists) and eager nodes, in graph order."""
        steps, run = [], []
        for node in self.graph.nodes:
            if node.op != "call_function" or node in self.known:
                continue
            if self._lowerable(node):
                run.append(node)
                continue
            if run:
                steps.append(run)
                run = []
            steps.append(node)
        if run:
            steps.append(run)
        return steps

    def _compile(self, step, client, name: str):
        if isinstance(step, torch.fx.Node):
            return step
        members = set(step)
        inputs: dict = {}
        for node in step:
            for used in node.all_input_nodes:
                if used in members or used in self.known:
                    continue
                if not isinstance(self._meta(used), torch.Tensor):
                    raise LoweringFailed(node, f"its argument {used.name} is a Python value "
                                               f"known only at run time")
                inputs[used] = None
        outputs = [n for n in step if any(u not in members for u in n.users)]
        for node in outputs:
            if not isinstance(node.meta.get("val"), torch.Tensor):
                raise LoweringFailed(node, "its result, not one tensor, is used outside "
                                           "compiled code")
        types = [tensor_type(self._meta(n), self.concrete) for n in inputs]
        sizes = self.padding.bucketed if self.padding is not None else ()
        runtime_sizes = {} if self.padding is not None else None
        sharded = [self.shardings.get(n) for n in inputs]
        # Note [Permuted layouts]; shardings and padding speak of the logical dims
        plain = self.padding is None and not any(sharded) and self.auto is None \
            and self.placement is None
        input_orders = [_dense_order_of(self._meta(n)) if plain else None for n in inputs]
        output_orders = [_dense_order_of(n.meta["val"]) if plain else None for n in outputs]
        types = [t if order is None else TensorType(tuple(t.shape[d] for d in order),
                                                    t.element_type)
                 for t, order in zip(types, input_orders)]
        module = lower_nodes(step, list(inputs), types, outputs, self.known, self.concrete,
                             name=name, runtime_sizes=runtime_sizes, size_inputs=sizes,
                             input_orders=input_orders, output_orders=output_orders)
        counts = [s for s in runtime_sizes or () if s not in sizes]
        try:
            if not outputs and not counts:
                executable = None
            elif any(sharded) or self.auto is not None:
                executable = _sharding.ShardedProgram(module, name, sharded,
                                                      self._mesh(sharded), self.placement,
                                                      self.auto)
            elif self.placement is not None:
                executable = self.placement.compile(module)
            else:
                executable = client.compile(module)
        except _sharding.ShardingError:  # the user's shardings, not a backend bug
            raise
        except Exception as exc:  # a backend bug must not take the model down: run eagerly
            reason = f"its compiled segment failed to compile: {type(exc).__name__}: {exc}"
            self.eager.update((node, reason) for node in step)
            raise LoweringFailed(step[0], reason) from exc
        output_layouts = [None if order is None else (tuple(n.meta["val"].shape),
                                                      tuple(n.meta["val"].stride()))
                          for n, order in zip(outputs, output_orders)]
        output_strides = [self._numpy_strides(n) if order is None and self.padding is None
                          else None for n, order in zip(outputs, output_orders)]
        return _Segment(list(inputs), outputs, executable, [t.shape for t in types],
                        counts, sizes, input_orders, output_layouts, output_strides)

    def _numpy_strides(self, node: torch.fx.Node) -> tuple | None:
        """The strides of a numpy array that ``from_numpy`` makes a tensor in the traced
        layout of ``node``, a graph output traced row-major (a bfloat16 one is a view)."""
        val = node.meta["val"]
        if not self.layouts.row_major(node) or val.dtype == torch.bfloat16:
            return None
        return tuple(s * val.element_size() for s in row_major_strides(tuple(val.shape)))

    def _mesh(self, sharded: list) -> _sharding.Mesh:
        """The mesh a partitioned segment runs on: the auto-sharding one (marked inputs must
        be on it too), else the marked inputs'."""
        marked = next((s.mesh for s in sharded if s is not None), None)
        if self.auto is None:
            return marked
        if marked is not None and marked != self.auto.mesh:
            raise _sharding.ShardingError(f"inputs marked on {marked}, but auto-sharding "
                                          f"runs on {self.auto.mesh} (use_spmd's mesh)")
        return self.auto.mesh

    def _meta(self, node: torch.fx.Node):
        return self.constants[node] if node in self.constants else node.meta["val"]

    def run(self, args: Sequence):
        if self.padding is not None:
            return self._run_padded(args)
        env = dict(self.base_env)
        env.update(zip(self.placeholders, args))
        view = self.views.view
        as_is = set()  # outputs already in their traced layout, no views
        for step in self.steps:
            if isinstance(step, _Segment):
                if step.executable is None:
                    continue
                results = step.executable(*[view(n, env[n], order) for n, order
                                            in zip(step.inputs, step.input_orders)])
                tensors = []
                for node, result, layout, strides in zip(step.outputs, results,
                                                         step.output_layouts,
                                                         step.output_strides):
                    result = np.asarray(result)
                    if layout is not None:
                        tensors.append(from_physical(from_numpy(result), *layout))
                        as_is.add(node)
                    else:
                        tensors.append(from_numpy(result))
                        if result.strides == strides:
                            as_is.add(node)
                if isinstance(step.executable, _sharding.ShardedProgram):
                    step.executable.record_results(tensors)
                env.update(zip(step.outputs, tensors))
            else:
                args_, kwargs = map_aggregate(
                    (step.args, step.kwargs),
                    lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
                env[step] = self._run_eager(step, args_, kwargs)
        # the plan's sizes are the real ones, but not the strides of the inputs it was built for
        return self.layouts.returned(env, Bindings(self.placeholders, args)
                                     if self.layouts.symbolic else self.concrete, as_is)

    def _run_padded(self, args: Sequence):
        """``run`` for a padded plan: segments get their inputs padded to the bounds, and
        their results sliced to the real sizes (the inputs', and the counts the programs
        return for data-dependent sizes); host-side sizes are the real ones."""
        real = Bindings(self.placeholders, args)
        env = dict(self.base_env)
        env.update(zip(self.placeholders, args))
        self._real_sizes(env, real)
        for step in self.steps:
            if isinstance(step, _Segment):
                if step.executable is None:
                    continue
                inputs = [_bounded.pad_to(env[n], shape)
                          for n, shape in zip(step.inputs, step.input_shapes)]
                results = step.executable(*[self.views.view(n, t) if t is env[n]
                                            else to_numpy(t)
                                            for n, t in zip(step.inputs, inputs)],
                                          *[np.array(int(real.symbols[s]), np.int64)
                                            for s in step.sizes])
                tensors = list(map(from_numpy, results))
                if isinstance(step.executable, _sharding.ShardedProgram):
                    step.executable.record_results(tensors[:len(step.outputs)])
                for symbol, count in zip(step.counts, tensors[len(step.outputs):]):
                    real.symbols[symbol] = sympy.Integer(int(count))
                for node, t in zip(step.outputs, tensors):
                    shape = tuple(int(real(d)) for d in node.meta["val"].shape)
                    env[node] = _bounded.narrow_to(t, shape)
            else:
                args_, kwargs = map_aggregate(
                    (step.args, step.kwargs),
                    lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
                env[step] = self._run_eager(step, args_, kwargs)
                self._bind_from(step, env[step], real)
            self._real_sizes(env, real)
        return self.layouts.returned(env, real)

    def _real_sizes(self, env: dict, real: Bindings) -> None:
        """Host-side size values of the padded sizes, once their real values are known."""
        for node in self.padded_known:
            try:
                env[node] = real(node.meta["val"])
            except Unsupported:
                continue  # a data-dependent size not computed yet

    def _bind_from(self, node: torch.fx.Node, result, real: Bindings) -> None:
        """Data-dependent sizes an eager op's result shows."""
        vals, results = node.meta.get("val"), result
        if not isinstance(vals, (tuple, list)):
            vals, results = [vals], [result]
        for val, t in zip(vals, results):
            if isinstance(val, torch.Tensor) and isinstance(t, torch.Tensor):
                for size, n in zip(val.shape, t.shape):
                    real._bind(size, n)

    @staticmethod
    def _run_eager(node: torch.fx.Node, args, kwargs):
        """One op in eager PyTorch, counted and traced as a fallback (taking an item of an
        eager op's tuple result is not one)."""
        if node.target is operator.getitem:
            return node.target(*args, **kwargs)
        name = op_name(node)
        counters.count_fallback(name)
        with pjrt.trace_span(name, "fallback", node=node.name):
            return node.target(*args, **kwargs)


def _dense_order_of(val) -> tuple | None:
    """Note [Permuted layouts]: the order of dims a tensor traced as ``val`` is dense in,
    when that is not row-major."""
    if not isinstance(val, torch.Tensor):
        return None
    return dense_order(tuple(val.shape), tuple(val.stride()), val.storage_offset())


def _fetch_attr(gm: torch.fx.GraphModule, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class GraphRunner:
    """A boxed callable running ``gm`` through OpenHLO; plans cached per input signature."""

    def __init__(self, gm: torch.fx.GraphModule, client, name: str = "main"):
        # An instance attribute: AOTAutograd wraps the backward compiler's result with
        # functools.wraps, which copies __dict__ but not class attributes.
        self._boxed_call = True
        self.gm = gm
        self.client = client
        self.name = name
        self.plans: dict = {}
        self._last: tuple | None = None
        self._last_signature: tuple | None = None  # the real one, for the log
        self.bucketing = _bounded.Bucketing(gm, name, lambda n: can_lower(n) is None)

    def __call__(self, args: list) -> list:
        args = list(args)
        shardings = _sharding.shardings_of(args)  # None unless mark_sharding was used
        placement = _placement.current()  # None unless inside placement.on_devices
        auto = _sharding.auto_spmd()  # None unless use_spmd(auto=True) / OPENHLO_AUTO_SPMD
        signature = _signature(args)
        buckets, bucketed, elements = None, signature, None
        if shardings is None and placement is None and auto is None:
            buckets, bucketed, elements = self.bucketing.for_call(
                args, signature, lambda bounds: Bindings(self.bucketing.placeholders, args,
                                                         bounds))
        key = (bucketed, shardings, placement, auto)
        plan = self.plans.get(key)
        if elements is not None:
            _bounded.STATS.record(plan is not None, *elements)
        if plan is None:
            if self._last is not None:
                changes = [describe_changes(self._last_signature, signature),
                           _sharding.describe_changes(self._last[1], shardings),
                           f"placement {self._last[2]} -> {placement}"
                           if self._last[2] != placement else "",
                           f"auto-sharding {self._last[3] or 'off'} -> {auto or 'off'}"
                           if self._last[3] != auto else ""]
                logger.info("openhlo: recompiling %s: %s", self.name,
                            ", ".join(filter(None, changes)))
                counters.count_recompilation(recompile_cause(self._last, key))
            plan = Plan(self.gm, args, self.client, self.name, shardings, placement, auto,
                        buckets)
            self.plans[key] = plan
        self._last = key
        self._last_signature = signature
        return list(plan.run(args))
