"""FSDP through SPMD: ``SpmdFullyShardedDataParallel`` in the style of PyTorch/XLA's FSDPv2.

    mesh = xs.Mesh(np.arange(8), (8,), ("fsdp",))
    model = SpmdFullyShardedDataParallel(model, mesh)           # parameters now sharded
    step = model.train_step(loss_fn, torch.optim.AdamW, lr=1e-3)  # loss_fn(module, *batch)
    for x, y in data:
        loss = step(x, y)                                       # batch split on dim 0
    y = model(x)                                                # forward, global result
    state = model.state_dict()                                  # whole tensors, on request

Each parameter is split on ``shard_axis`` along its largest dimension the axis size divides
(the first such when sizes tie); parameters with no such dimension, or fewer than
``min_numel_to_shard`` elements, stay replicated (``replicated_parameters`` says why). The
batch is split on dimension 0 over the same axis.

Where things live: the parameters, and the optimizer state of a train step, are held as the
runtime's per-device buffers (one shard per device) between steps, not as host tensors:
the wrapped module's parameters are replaced by meta tensors, and whole tensors exist only
when asked for (``state_dict``, ``named_parameters``, ``optimizer_state_dict``).
``memory_per_device()`` sums the bytes of the buffers each device holds.

The train step is one compiled program: forward, backward and the optimizer update
(fsdp_optim.py), traced with ``make_fx`` (plain autograd, so ``torch.utils.checkpoint``
inside the module works) and lowered by the torch.compile backend's rules. Its parameter
and state arguments are donated and its results come back with the arguments' shardings,
so the new buffers replace the old ones in place of them.

Where the all-gathers go: every sharded parameter is read through a parametrization that
applies ``openhlo::sharding_constraint`` (lowering/constraint.py) to make it whole at the
place the module reads the attribute; the constraint's backward puts the gradient back in
the parameter's layout. The partitioner builds a reshard where the constrained value is
defined, so each gather sits just before its use (layer by layer, not hoisted to the top of
the step), and a gradient, a sum over the batch split on the same axis, is reduce-scattered
(the train step compiles with ``spmd_reduce_scatter``). Every read is its own constraint,
so a block under ``torch.utils.checkpoint`` reads, and gathers, its parameters again in
backward (rematerialized) instead of keeping the forward's whole copy alive.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import parametrize
from torch.utils import _pytree as pytree

from pjrt.global_arrays import assemble_global, split_global

from frameworks.torch import sharding as xs
from frameworks.torch.fsdp_optim import FsdpError, UpdateRule, update_rule
from frameworks.torch.lowering import lower_nodes
from frameworks.torch.lowering.constraint import sharding_constraint, spell_dims
from frameworks.torch.lowering.dtypes import from_numpy, to_numpy
from frameworks.torch.lowering.graph import tensor_type

__all__ = ["FsdpError", "SpmdFullyShardedDataParallel", "shard_dims"]


def shard_dims(shape: Sequence[int], axis: str, axis_size: int,
               min_numel: int = 0) -> tuple[tuple | None, str]:
    """``(dims, "")`` splitting a tensor of ``shape`` on ``axis`` along its largest dimension
    that ``axis_size`` divides, or ``(None, why)`` when it stays replicated."""
    numel = int(np.prod(shape)) if len(shape) else 1
    if not shape:
        return None, "a scalar"
    if numel < min_numel:
        return None, f"{numel} elements, fewer than min_numel_to_shard={min_numel}"
    divisible = [d for d in range(len(shape)) if shape[d] % axis_size == 0]
    if not divisible:
        return None, f"no dimension of {tuple(shape)} is divisible by {axis_size}"
    d = max(divisible, key=lambda i: (shape[i], -i))
    return tuple((axis,) if i == d else () for i in range(len(shape))), ""


class _Gather(torch.nn.Module):
    """The parametrization a sharded parameter is read through (see the module docstring)."""

    def __init__(self, dims: tuple):
        super().__init__()
        self.whole = spell_dims(((),) * len(dims))
        self.dims = spell_dims(dims)

    def forward(self, shard):
        return sharding_constraint(shard, self.whole, self.dims)


class _Call(torch.nn.Module):
    """``fn(module, *args)`` as a module, for ``functional_call``."""

    def __init__(self, module: torch.nn.Module, fn: Callable):
        super().__init__()
        self.module = module
        self.fn = fn

    def forward(self, *args):
        return self.fn(self.module, *args)


class _Program:
    """A traced function compiled for the mesh: ``run(arguments)`` takes, per argument, a
    list of per-device buffers or a global numpy array (cut here), and returns per-device
    result buffers."""

    def __init__(self, fn: Callable, examples: list, arg_dims: list, result_dims, mesh,
                 name: str):
        import pjrt
        gm = make_fx(fn, decomposition_table=_decompositions(), tracing_mode="fake")(examples)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        output = next(n for n in gm.graph.nodes if n.op == "output")
        outputs = pytree.tree_leaves(output.args[0])
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        module = lower_nodes(nodes, placeholders,
                             [tensor_type(n.meta["val"], _static) for n in placeholders],
                             outputs, {}, _static, name=name)
        shardings = [None if d is None else xs.Sharding(mesh, d) for d in arg_dims]
        results = None if result_dims is None else [
            None if d is None else xs.Sharding(mesh, d) for d in result_dims]
        xs.annotate(module, name, shardings, mesh, results)
        self.global_module = module  # the annotated program before partitioning
        n = mesh.size()
        self.executable = xs.client(n).compile(module, pjrt.CompileOptions(
            num_partitions=n, env_option_overrides={"spmd_reduce_scatter": True}))
        xs._compiled.append((name, self.executable))
        self.param_tiles, self.result_tiles = self.executable.executable.shardings
        self.result_types = self.executable.result_types

    def run(self, arguments: list, donate: Sequence[int] = ()) -> list:
        count = len(self.executable.device_assignment[0])
        per_device = [[] for _ in range(count)]
        for value, tiles in zip(arguments, self.param_tiles):
            pieces = value if isinstance(value, list) else split_global(value, tiles, count)
            for d in range(count):
                per_device[d].append(pieces[d])
        outputs = self.executable.execute_sharded(per_device, donate=donate)
        # result k of every device, as a list over devices
        return [list(buffers) for buffers in zip(*outputs)]

    def whole(self, k: int, buffers: list) -> torch.Tensor:
        """Result ``k`` as a global tensor."""
        pieces = [b.to_numpy() for b in buffers]
        return from_numpy(np.array(assemble_global(pieces, self.result_tiles[k],
                                                   self.result_types[k].shape)))


def _decompositions() -> dict:
    from frameworks.torch.backend import decompositions
    return decompositions()


def _static(x):
    return x  # sizes are plain ints: programs are traced for one input signature


class SpmdFullyShardedDataParallel(torch.nn.Module):
    """``module`` with its parameters sharded over ``mesh``'s ``shard_axis`` (the global mesh
    when ``mesh`` is None); see the module docstring."""

    def __init__(self, module: torch.nn.Module, mesh: xs.Mesh | None = None,
                 shard_axis: str = "fsdp", min_numel_to_shard: int = 0):
        super().__init__()
        mesh = mesh if mesh is not None else xs.get_global_mesh()
        if mesh is None:
            raise FsdpError("SpmdFullyShardedDataParallel needs a mesh: pass mesh= or call "
                            "sharding.set_global_mesh first")
        if shard_axis not in mesh.axis_names:
            raise FsdpError(f"SpmdFullyShardedDataParallel: the mesh {mesh.axis_names} has no "
                            f"axis {shard_axis!r} to shard on (shard_axis=)")
        names = [n for n, _ in module.named_parameters(remove_duplicate=False)]
        if len(names) != len(set(id(p) for p in module.parameters())):
            raise FsdpError("SpmdFullyShardedDataParallel: tied (shared) parameters are not "
                            "supported yet")
        client = xs.client(mesh.size())
        if len(client.addressable_devices()) != mesh.size():
            raise FsdpError("SpmdFullyShardedDataParallel runs in one process (its mesh's "
                            "devices must all be this process's)")
        self.mesh, self.shard_axis = mesh, shard_axis
        self._client = client
        # partition k runs on the k-th device of the assignment: its shards live there
        self._devices = [client.lookup_device(i) for i in
                         client.default_device_assignment(1, mesh.size())[0]]
        self._spmd_mesh = mesh.spmd_mesh()
        axis_size = mesh.shape()[shard_axis]
        self.param_dims: dict = {}  # name -> dims (None: replicated)
        self.replicated_parameters: dict = {}  # name -> why it is not sharded
        self._shards: dict = {}  # name -> per-device buffers
        for name, p in module.named_parameters():
            dims, why = shard_dims(tuple(p.shape), shard_axis, axis_size, min_numel_to_shard)
            self.param_dims[name] = dims
            if dims is None:
                self.replicated_parameters[name] = why
            self._shards[name] = self._put(to_numpy(p.detach()), dims)
        _to_meta(module)
        self.module = module
        self._forward_programs: dict = {}  # input signature -> (_Program, output treespec)
        self._steps: list = []  # the TrainSteps made, whose optimizer state is held

    # -- placement ---------------------------------------------------------------------
    def _tiles(self, dims: tuple | None, rank: int):
        from stablehlo.ir.sharding import TensorSharding
        return TensorSharding("mesh", dims if dims is not None else ((),) * rank) \
            .tile_assignment(self._spmd_mesh)

    def _put(self, array: np.ndarray, dims: tuple | None) -> list:
        pieces = split_global(array, self._tiles(dims, array.ndim), len(self._devices))
        return [self._client.buffer_from_numpy(piece, device)
                for piece, device in zip(pieces, self._devices)]

    def _whole(self, buffers: list, dims: tuple | None, shape) -> torch.Tensor:
        tiles = self._tiles(dims, len(shape))
        local = buffers[0].shape
        return from_numpy(np.array(assemble_global([b.to_numpy() for b in buffers], tiles,
                                                   local)))

    def _batch_dims(self, args: Sequence[torch.Tensor], what: str) -> list:
        axis_size = self.mesh.shape()[self.shard_axis]
        dims = []
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise FsdpError(f"{what}: argument {i} is a {type(a).__name__}; only tensors "
                                f"are supported")
            if a.dim() == 0:
                dims.append(None)
                continue
            if a.shape[0] % axis_size:
                raise FsdpError(f"{what}: argument {i} of shape {tuple(a.shape)}: its batch "
                                f"dimension {a.shape[0]} is not divisible by the "
                                f"{self.shard_axis!r} axis ({axis_size} devices)")
            dims.append(((self.shard_axis,),) + ((),) * (a.dim() - 1))
        return dims

    # -- what is held ------------------------------------------------------------------
    def memory_per_device(self) -> dict:
        """``{device id: bytes}`` of the parameter and optimizer-state buffers each device
        holds (the runtime's buffer sizes)."""
        held = {d.id: 0 for d in self._devices}
        for buffers in [*self._shards.values(), *self._optimizer_buffers()]:
            for b in buffers:
                held[b.device.id] += b.nbytes
        return held

    def _optimizer_buffers(self) -> list:
        return [buffers for s in self._steps for state in s.state.values()
                for buffers in state]

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """Whole copies of the parameters (gathered from the devices now): reading them is
        fine, changing them changes nothing (use ``load_state_dict``)."""
        for name, buffers in self._shards.items():
            meta = self.module.get_parameter(name)
            whole = self._whole(buffers, self.param_dims[name], meta.shape)
            yield prefix + name, torch.nn.Parameter(whole, requires_grad=meta.requires_grad)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters():
            yield p

    def state_dict(self, *args, **kwargs) -> dict:
        """The wrapped module's state dict (same names), parameters gathered whole."""
        out = {name: p.detach() for name, p in self.named_parameters()}
        out.update({name: b.detach().clone() for name, b in self.module.named_buffers()})
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False):
        """Set parameters (and buffers) from whole tensors; they are sharded again."""
        missing = [n for n in self._shards if n not in state_dict]
        unexpected = [n for n in state_dict if n not in self._shards
                      and n not in dict(self.module.named_buffers())]
        if strict and (missing or unexpected):
            raise FsdpError(f"load_state_dict: missing {missing}, unexpected {unexpected}")
        for name, value in state_dict.items():
            if name in self._shards:
                meta = self.module.get_parameter(name)
                if tuple(value.shape) != tuple(meta.shape):
                    raise FsdpError(f"load_state_dict: {name} has shape {tuple(value.shape)}, "
                                    f"the parameter {tuple(meta.shape)}")
                self._shards[name] = self._put(to_numpy(value.detach().to(meta.dtype)),
                                               self.param_dims[name])
            elif name in dict(self.module.named_buffers()):
                self.module.get_buffer(name).copy_(value)
        return torch.nn.modules.module._IncompatibleKeys(missing, unexpected)

    # -- tracing -----------------------------------------------------------------------
    def _traced_module(self) -> torch.nn.Module:
        """A copy of the (meta) module whose sharded parameters are read through ``_Gather``;
        returns it and the functional_call key of each parameter."""
        traced = copy.deepcopy(self.module)
        keys = {}
        for name, dims in self.param_dims.items():
            owner, _, leaf = name.rpartition(".")
            if dims is None:
                keys[name] = name
                continue
            parametrize.register_parametrization(traced.get_submodule(owner), leaf,
                                                 _Gather(dims), unsafe=True)
            keys[name] = f"{owner + '.' if owner else ''}parametrizations.{leaf}.original"
        return traced, keys

    def _example(self, name: str) -> torch.Tensor:
        meta = self.module.get_parameter(name)
        return torch.empty(meta.shape, dtype=meta.dtype)

    def forward(self, *args):
        """The module's forward on global inputs (batch split over the shard axis); global
        outputs."""
        signature = tuple((tuple(a.shape), a.dtype) for a in args)
        names = list(self._shards)
        buffers = dict(self.module.named_buffers())
        if signature not in self._forward_programs:
            traced, keys = self._traced_module()
            call = _Call(traced, lambda m, *xs_: m(*xs_))

            def fn(leaves):
                params = leaves[:len(names)]
                state = {f"module.{keys[n]}": p for n, p in zip(names, params)}
                state.update({f"module.{n}": b for n, b in
                              zip(buffers, leaves[len(names):len(names) + len(buffers)])})
                with torch.no_grad():
                    out = torch.func.functional_call(call, state,
                                                     tuple(leaves[len(names) + len(buffers):]))
                flat, spec[0] = pytree.tree_flatten(out)
                return flat

            spec = [None]

            examples = [self._example(n) for n in names] + list(buffers.values()) + list(args)
            dims = [self.param_dims[n] for n in names] + [None] * len(buffers) + \
                self._batch_dims(args, "forward")
            program = _Program(fn, examples, dims, None, self.mesh, "fsdp_forward")
            self._forward_programs[signature] = (program, spec[0])
        program, out_spec = self._forward_programs[signature]
        outs = program.run([self._shards[n] for n in names] +
                           [to_numpy(b) for b in buffers.values()] +
                           [to_numpy(a) for a in args])
        results = [program.whole(k, b) for k, b in enumerate(outs)]
        return pytree.tree_unflatten(results, out_spec)

    def train_step(self, loss_fn: Callable, optimizer_class, **options) -> "TrainStep":
        """A compiled training step: ``step(*batch)`` computes ``loss_fn(module, *batch)``,
        its gradients and ``optimizer_class``'s update (torch.optim.SGD, Adam, AdamW with
        ``options`` as they take them) on the sharded parameters and optimizer state, and
        returns the loss (a 0-d tensor)."""
        step = TrainStep(self, loss_fn, update_rule(optimizer_class, options))
        self._steps.append(step)
        return step

    def optimizer_state_dict(self, step: "TrainStep") -> dict:
        """``{name: {state name: whole tensor}}`` of ``step``'s optimizer state."""
        out = {}
        for name, states in step.state.items():
            meta = self.module.get_parameter(name)
            out[name] = {s: self._whole(b, self.param_dims[name], meta.shape)
                         for s, b in zip(step.rule.state_names, states)}
        return out


class TrainStep:
    """One FSDP training step (``SpmdFullyShardedDataParallel.train_step``)."""

    def __init__(self, fsdp: SpmdFullyShardedDataParallel, loss_fn: Callable,
                 rule: UpdateRule):
        self.fsdp, self.loss_fn, self.rule = fsdp, loss_fn, rule
        self.trainable = [n for n in fsdp._shards
                          if fsdp.module.get_parameter(n).requires_grad]
        self.lr = rule.lr  # read each step: change it for a schedule
        self.steps = 0
        self.programs: dict = {}  # batch signature -> _Program
        self.program: _Program | None = None  # the last step's
        # name -> one per-device buffer list per state tensor, zero to start
        self.state = {n: [self._zeros(n) for _ in rule.state_names] for n in self.trainable}

    def _zeros(self, name: str) -> list:
        meta = self.fsdp.module.get_parameter(name)
        return self.fsdp._put(np.zeros(meta.shape, to_numpy(torch.empty(0, dtype=meta.dtype))
                                       .dtype), self.fsdp.param_dims[name])

    def __call__(self, *batch) -> torch.Tensor:
        fsdp = self.fsdp
        signature = tuple((tuple(a.shape), a.dtype) for a in batch)
        program = self.programs.get(signature)
        if program is None:
            program = self.programs[signature] = self._compile(batch)
        self.program = program
        self.steps += 1
        self.rule.lr = self.lr
        scalars = [np.asarray(s, np.float32) for s in self.rule.scalars(self.steps)]
        names, frozen = self.trainable, [n for n in fsdp._shards if n not in self.trainable]
        states = [b for n in names for b in self.state[n]]
        arguments = ([fsdp._shards[n] for n in names] + states + [fsdp._shards[n] for n in frozen]
                     + scalars + [to_numpy(b) for b in fsdp.module.buffers()]
                     + [to_numpy(a) for a in batch])
        donated = range(len(names) + len(states))
        outs = program.run(arguments, donate=donated)
        loss = program.whole(0, outs[0])
        new = iter(outs[1:])
        for n in names:
            fsdp._shards[n] = next(new)
        for n in names:
            self.state[n] = [next(new) for _ in self.rule.state_names]
        return loss

    def _compile(self, batch) -> _Program:
        fsdp, rule = self.fsdp, self.rule
        names = self.trainable
        frozen = [n for n in fsdp._shards if n not in names]
        per = len(rule.state_names)
        scalar_count = len(rule.scalars(1))
        buffers = dict(fsdp.module.named_buffers())
        traced, keys = fsdp._traced_module()

        def fn(leaves):
            at = 0

            def take(k):
                nonlocal at
                at += k
                return leaves[at - k:at]
            params, state, fixed = take(len(names)), take(len(names) * per), take(len(frozen))
            scalars, bufs, inputs = take(scalar_count), take(len(buffers)), leaves[at:]
            leaves_with_grad = [p.detach().requires_grad_() for p in params]
            values = {f"module.{keys[n]}": p for n, p in zip(names, leaves_with_grad)}
            values.update({f"module.{keys[n]}": p for n, p in zip(frozen, fixed)})
            values.update({f"module.{n}": b for n, b in zip(buffers, bufs)})

            def loss_and_grads(module, *inputs):
                # backward runs while functional_call still has the values in place: a
                # checkpointed block reads its parameters again there
                loss = self.loss_fn(module, *inputs)
                if not (isinstance(loss, torch.Tensor) and loss.dim() == 0):
                    raise FsdpError("train_step: loss_fn must return a 0-d tensor")
                return loss, torch.autograd.grad(loss, leaves_with_grad, allow_unused=True)

            with torch.enable_grad():
                loss, grads = torch.func.functional_call(_Call(traced, loss_and_grads), values,
                                                         tuple(inputs))
            new_params, new_state = [], []
            for i, (p, g) in enumerate(zip(params, grads)):
                g = torch.zeros_like(p) if g is None else g
                p, s = rule.update(p, g, list(state[i * per:(i + 1) * per]), scalars)
                new_params.append(p)
                new_state += s
            return [loss.detach(), *new_params, *new_state]

        examples = ([fsdp._example(n) for n in names]
                    + [fsdp._example(n) for n in names for _ in range(per)]
                    + [fsdp._example(n) for n in frozen]
                    + [torch.zeros((), dtype=torch.float32) for _ in range(scalar_count)]
                    + list(buffers.values()) + list(batch))
        param_dims = [fsdp.param_dims[n] for n in names]
        dims = (param_dims + [d for d in param_dims for _ in range(per)]
                + [fsdp.param_dims[n] for n in frozen] + [None] * scalar_count
                + [None] * len(buffers) + fsdp._batch_dims(batch, "train_step"))
        results = [None] + param_dims + [d for d in param_dims for _ in range(per)]
        program = _Program(fn, examples, dims, results, fsdp.mesh, "fsdp_train_step")
        state_tiles = program.param_tiles[:len(names) * (1 + per)]
        if list(program.result_tiles[1:1 + len(state_tiles)]) != list(state_tiles):
            raise FsdpError("train_step: the compiled step returns the parameters in another "
                            "layout than it takes them (a partitioner bug)")
        return program


def _to_meta(module: torch.nn.Module) -> None:
    """Replace ``module``'s parameters by meta tensors of their shapes: the devices hold the
    values now."""
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is not None:
                sub._parameters[name] = torch.nn.Parameter(
                    torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
