"""The tensors a compiled graph returns get eager's layout: the size, strides and storage
offset of the graph's traced outputs (their FakeTensors), with the real sizes.

Note [Output layouts]
    A compiled program returns fresh contiguous arrays, a padded plan returns views of its
    padded results (bounded_shapes.py), and an eager fallback returns whatever layout its
    inputs gave it; eager PyTorch would have returned a transpose with transposed strides,
    a column of an input with the input's row stride and an offset, an ``expand`` with
    zero strides. The layout is more than cosmetic: AOTAutograd hands back an output that
    aliases an input (or another output) by rebuilding it from the real base with our
    output's metadata. It replays the traced view ops when their arguments are plain
    ints; when a view took a symbolic size (any view sized by a dynamic dim) it calls
    ``base.as_strided(out.size(), out.stride(), out.storage_offset())``, or re-applies
    ``out``'s own view function to the base when ``out`` is a view (of our padded buffer,
    say). With a contiguous ``(n, 2)`` result standing for eager's ``x.view(n, 2, 2)[:, 0]``
    (strides ``(4, 1)``), that reads the wrong elements of ``x``: wrong values, silently.
    So every returned tensor takes the traced layout (a copy where it differs), and none is
    a view of memory of ours (AOTAutograd would replay it on the wrong base).
"""
from __future__ import annotations

import torch
from torch.fx.node import map_aggregate


def _layout(val: torch.Tensor, evaluate) -> tuple:
    return (tuple(int(evaluate(d)) for d in val.shape),
            tuple(int(evaluate(s)) for s in val.stride()), int(evaluate(val.storage_offset())))


def _is_symbolic(val: torch.Tensor) -> bool:
    return any(isinstance(d, torch.SymInt)
               for d in (*val.shape, *val.stride(), val.storage_offset()))


class OutputLayouts:
    """Eager's layout of each tensor ``output``, the graph's output node, returns."""

    def __init__(self, output: torch.fx.Node):
        self.output = output
        self.traced = {}  # returned node -> its FakeTensor
        map_aggregate(output.args[0], self._note)
        self.fixed = {n: _layout(v, int) for n, v in self.traced.items() if not _is_symbolic(v)}
        self.symbolic = len(self.fixed) < len(self.traced)

    def _note(self, a) -> None:
        if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor):
            self.traced[a] = a.meta["val"]

    def row_major(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` is returned with numpy's row-major layout of a fresh array (none
        of its dims empty, offset 0), which ``from_numpy`` gives a compiled result."""
        layout = self.fixed.get(node)
        if layout is None or not all(layout[0]):
            return False
        size, stride, offset = layout
        return offset == 0 and stride == row_major_strides(size)

    def returned(self, env: dict, evaluate, as_is=frozenset()):
        """The graph's result from the values ``env`` holds, its tensors in eager's layout;
        ``evaluate`` gives a symbolic size its real value (runner.Bindings). The nodes in
        ``as_is`` hold tensors known to have their traced layout and to be no views (a
        compiled result in it): ``with_layout``'s checks would return them unchanged."""
        def give(a):
            if not isinstance(a, torch.fx.Node):
                return a
            value = env[a]
            if a in as_is or a not in self.traced or not isinstance(value, torch.Tensor):
                return value
            layout = self.fixed.get(a) or _layout(self.traced[a], evaluate)
            return with_layout(value, *layout)
        return map_aggregate(self.output.args[0], give)


def row_major_strides(size: tuple) -> tuple:
    """The strides (in elements) of a fresh row-major array of ``size``, numpy's and torch's."""
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def with_layout(t: torch.Tensor, size: tuple, stride: tuple, offset: int) -> torch.Tensor:
    """``t``'s values in a tensor of ``size``, ``stride`` and storage ``offset`` that is no
    view (``t`` itself when it is one already)."""
    if tuple(t.shape) != size:
        raise AssertionError(f"result of shape {tuple(t.shape)}, traced as {size}")
    if t.stride() == stride and t.storage_offset() == offset:
        if t._base is None:
            return t
        return t.new_empty(0).set_(t.untyped_storage(), offset, size, stride)  # same memory
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) \
        else offset
    memory = t.new_empty(extent)
    out = t.new_empty(0).set_(memory.untyped_storage(), offset, size, stride)
    if torch._debug_has_internal_overlap(out) == 0:  # 0: no two elements share memory
        out.copy_(t)
        return out
    # elements sharing memory (an expand's zero strides) hold equal values: store each
    addresses = torch.full(size, offset, dtype=torch.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        addresses += torch.arange(n).mul_(s).view([-1 if e == d else 1 for e in range(len(size))])
    memory[addresses.flatten()] = t.flatten()
    return out
