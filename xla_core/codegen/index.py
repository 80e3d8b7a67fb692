"""Index expressions: C integer expressions for positions in row-major tensors.

Shared by every kernel template and every C-family target (the expressions are plain integer
arithmetic on ``int64_t`` loop variables).
"""
from __future__ import annotations


def strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def mul(index: str, k: int) -> str:
    if index == "0" or k == 0:
        return "0"
    return index if k == 1 else f"{index}*{k}"


def add(a: str, k: int) -> str:
    if k == 0:
        return a
    if a == "0":
        return str(k)
    return f"({a} + {k})" if k > 0 else f"({a} - {-k})"


def linear(indices, shape) -> str:
    terms = [mul(i, s) for i, s, n in zip(indices, strides(shape), shape) if n != 1]
    terms = [t for t in terms if t != "0"]
    return " + ".join(terms) if terms else "0"


def nonunit(shape) -> list[int]:
    return [d for d, n in enumerate(shape) if n != 1]


def reshape_groups(shape, src_shape) -> list[tuple[list, list]]:
    """The smallest runs of non-unit dimensions of a reshape's result and operand with equal
    sizes, in order: ``[(result dims, operand dims), ...]``.

    Note [reshape groups]
        A row-major reshape maps each group of result dimensions to its group of operand
        dimensions on its own, so indices are linearized and split within a group only: the
        innermost index of a kernel usually passes through unchanged ([32,256] -> [2,16,256]
        splits the 32 only), which keeps the loads contiguous and the loop vectorizable.
    """
    a, b = nonunit(shape), nonunit(src_shape)
    groups, i, j = [], 0, 0
    while i < len(a):
        dims, src_dims = [a[i]], [b[j]]
        size, src_size = shape[a[i]], src_shape[b[j]]
        while size != src_size:
            if size < src_size:
                i += 1
                dims.append(a[i])
                size *= shape[a[i]]
            else:
                j += 1
                src_dims.append(b[j])
                src_size *= src_shape[b[j]]
        groups.append((dims, src_dims))
        i, j = i + 1, j + 1
    return groups
