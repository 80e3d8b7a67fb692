"""The Python API that frontends use to build StableHLO modules.

    b = Builder()
    with b.function("main", [tensor((3, 4), F32), tensor((4,), F32)]) as (f, (x, y)):
        yb = b.broadcast_in_dim(y, (3, 4), dims=[1])
        z = b.add(x, yb)
        s = b.reduce(z, b.constant(np.float32(0)), dims=[1], body="stablehlo.add")
        b.return_(s)
    module = b.module

Every typed method builds one op at the current insertion point and returns
its result ``Value`` (or a list of Values for multi-result ops). Result types
come from the op's type inference: the ``infer`` half of the ``Rule`` that the
verifier uses (stablehlo/ir/ops/*_rules.py), so builder and verifier share one
copy of every shape rule. Each op is verified as soon as it is built, so a bad
call fails at the line that made it, with the op's message.

Regions are given as Python callables that receive the block arguments as
Values and return the value(s) to yield (a ``stablehlo.return`` is appended),
or, for reductions, as the name of a binary op such as ``"stablehlo.add"``.

Each op records where it was built: the caller's frame, or inside ``with b.at(location)``
the given location (a compiler pass building ops for a program's op passes that op's).

The elementwise, collective and other less common ops live in the mixins of
builder_ops.py; ``b.op(name, ...)`` builds any op generically.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Optional, Sequence, Union

import numpy as np

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import (
    ArrayAttr, Attribute, BoolAttr, DenseElementsAttr, DictAttr, EnumAttr, IntegerAttr,
    StringAttr, StructAttr, SymbolRefAttr, TypeAttr, dense, i64_array, i64_attr,
)
from stablehlo.ir.core import Block, Func, Location, Module, Operation, Region, Value, make_func
from stablehlo.ir.ops import OPS
from stablehlo.ir.types import (  # noqa: F401  (re-exported for callers)
    BF16, F16, F32, F64, I1, I8, I16, I32, I64, UI8, UI16, UI32, UI64, FunctionType,
    TensorType, Type, numpy_dtype, tensor,
)
from stablehlo.builder_ops import CollectiveOps, ElementwiseOps, LinalgOps, MiscOps

Values = Union[Value, Sequence[Value]]
RegionBody = Union[Callable, str]


def _as_list(values: Values) -> list:
    return [values] if isinstance(values, Value) else list(values)


def _scalar(t: Type) -> TensorType:
    return TensorType((), t.element_type if isinstance(t, TensorType) else t)


_THIS_FILE = os.path.dirname(os.path.abspath(__file__))


def _caller_location() -> Optional[Location]:
    """The first stack frame outside the builder files: where the user built the op."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not (os.path.dirname(os.path.abspath(path)) == _THIS_FILE
                and os.path.basename(path).startswith("builder")):
            return Location(path, frame.f_lineno, 1)
        frame = frame.f_back
    return None


class Builder(ElementwiseOps, LinalgOps, CollectiveOps, MiscOps):
    """Builds one module; ops go to the innermost open function or region."""

    def __init__(self, module: Optional[Module] = None, name: Optional[str] = None):
        self.module = module if module is not None else Module()
        if name is not None:
            self.module.op.attributes["sym_name"] = StringAttr(name)
        self._blocks: list[Block] = []
        self.record_locations = True
        # innermost last: the locations ``at`` gives the ops built inside it
        self._given_locations: list[Optional[Location]] = []

    # -- insertion --------------------------------------------------------------------

    @property
    def block(self) -> Block:
        if not self._blocks:
            raise VerificationError("no insertion point: build ops inside `with b.function(...)`")
        return self._blocks[-1]

    @contextlib.contextmanager
    def function(self, name: str, arg_types: Sequence[Type],
                 result_types: Optional[Sequence[Type]] = None, *,
                 visibility: Optional[str] = None):
        """Open a ``func.func``; yields ``(func, args)``.

        Without ``result_types`` the function's results are those passed to
        ``return_``.
        """
        ftype = FunctionType(tuple(arg_types), tuple(result_types or ()))
        op = make_func(name, ftype, visibility=visibility)
        op.location = self._location()
        self.module.body.append(op)
        body = op.regions[0].blocks[0]
        self._blocks.append(body)
        try:
            yield Func(op), list(body.arguments)
        finally:
            self._blocks.pop()
        if body.terminator is None or body.terminator.name != "func.return":
            raise VerificationError(f"function @{name} was closed without b.return_(...)")

    @contextlib.contextmanager
    def inserting_into(self, block: Block):
        """Append the ops built inside the context to ``block`` (a pass builds a rewrite
        into a scratch block, then splices it where it belongs)."""
        self._blocks.append(block)
        try:
            yield block
        finally:
            self._blocks.pop()

    def return_(self, *values: Value) -> Operation:
        """Terminate the current block: ``func.return`` in a function body,
        ``stablehlo.return`` in a region."""
        owner = self.block.parent.parent if self.block.parent else None
        if owner is not None and owner.name == "func.func":
            ftype = owner.attributes["function_type"].type
            types = tuple(v.type for v in values)
            if not ftype.results:
                owner.attributes["function_type"] = TypeAttr(FunctionType(ftype.inputs, types))
            elif types != ftype.results:
                raise VerificationError(
                    f"return_ of ({', '.join(map(str, types))}) in a function declared to "
                    f"return ({', '.join(map(str, ftype.results))})")
            return self.op("func.return", values, [])
        return self.op("stablehlo.return", values, [])

    def region(self, arg_types: Sequence[Type], body: Callable) -> Region:
        """A one-block region whose block takes ``arg_types``; ``body(*args)``
        returns the values to yield."""
        block = Block(arg_types)
        region = Region([block])
        self._blocks.append(block)
        try:
            produced = body(*block.arguments)
            if block.terminator is None or block.terminator.name != "stablehlo.return":
                self.return_(*([] if produced is None else _as_list(produced)))
        finally:
            self._blocks.pop()
        return region

    def _reducer(self, body: RegionBody, element_types: Sequence[Type]) -> Region:
        """A reduction body over 0-d tensors: a callable or a binary op name."""
        scalars = [_scalar(t) for t in element_types]
        if isinstance(body, str):
            if len(scalars) != 1:
                raise VerificationError(f"a reduction of {len(scalars)} inputs needs a callable "
                                        f"body, not '{body}'")
            name = body if "." in body else f"stablehlo.{body}"
            return self.region(scalars * 2, lambda a, b: self.op(name, [a, b]).result)
        return self.region(scalars * 2, body)

    @contextlib.contextmanager
    def at(self, location: Optional[Location]):
        """Ops built inside the block take ``location`` (None: none) instead of the caller's
        frame. A compiler pass building ops in place of a program's op gives them that op's
        location, so they keep the user's place (as XLA keeps an instruction's metadata),
        not the pass's source line."""
        self._given_locations.append(location)
        try:
            yield
        finally:
            self._given_locations.pop()

    # -- generic op -------------------------------------------------------------------

    def op(self, name: str, operands: Values = (), result_types: Optional[Sequence] = None,
           attributes: Optional[dict] = None, regions: Sequence[Region] = ()) -> Operation:
        """Build any op; without ``result_types`` they are inferred by the op's Rule."""
        location = self._location()
        operands = _as_list(operands)
        op = Operation(name, operands, (), attributes or {}, regions, location)
        opdef = OPS.lookup(name)
        if result_types is None:
            infer = getattr(opdef.verify, "infer", None) if opdef is not None else None
            if infer is None:
                raise VerificationError(f"{op.where()}: cannot infer the result types of "
                                        f"'{name}'; pass result_types")
            result_types = infer(op)
        op.results = [Value(t, op, i) for i, t in enumerate(result_types)]
        if opdef is not None and opdef.verify is not None:
            opdef.verify(op)
        self.block.append(op)
        return op

    def _build(self, name: str, operands: Values, attributes: Optional[dict] = None,
               result_types: Optional[Sequence] = None, regions: Sequence[Region] = ()):
        """Build an op and return its one result, or the list of its results."""
        op = self.op(name, operands, result_types, _drop_none(attributes), regions)
        return op.results[0] if len(op.results) == 1 else list(op.results)

    def _location(self) -> Optional[Location]:
        if self._given_locations:
            return self._given_locations[-1]
        return _caller_location() if self.record_locations else None

    # -- constants and shapes -----------------------------------------------------------

    def constant(self, value, element_type: Optional[Type] = None) -> Value:
        """A constant from a numpy array / scalar (or a DenseElementsAttr)."""
        if not isinstance(value, DenseElementsAttr):
            array = np.asarray(value)
            if element_type is None:
                value = dense(array)
            else:
                value = dense(array.astype(numpy_dtype(element_type)),
                              TensorType(array.shape, element_type))
        return self._build("stablehlo.constant", [], {"value": value})

    def iota(self, shape: Sequence[int], element_type: Type, dim: int = 0) -> Value:
        return self._build("stablehlo.iota", [], {"iota_dimension": i64_attr(dim)},
                           [TensorType(tuple(shape), element_type)])

    def broadcast_in_dim(self, x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        result = TensorType(tuple(shape), x.type.element_type)
        return self._build("stablehlo.broadcast_in_dim", [x],
                           {"broadcast_dimensions": i64_array(dims)}, [result])

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        return self._build("stablehlo.reshape", [x], None,
                           [TensorType(tuple(shape), x.type.element_type)])

    def transpose(self, x: Value, permutation: Sequence[int]) -> Value:
        return self._build("stablehlo.transpose", [x], {"permutation": i64_array(permutation)})

    def reverse(self, x: Value, dims: Sequence[int]) -> Value:
        return self._build("stablehlo.reverse", [x], {"dimensions": i64_array(dims)})

    def slice(self, x: Value, start: Sequence[int], limit: Sequence[int],
              strides: Optional[Sequence[int]] = None) -> Value:
        strides = strides if strides is not None else [1] * len(start)
        return self._build("stablehlo.slice", [x], {
            "start_indices": i64_array(start), "limit_indices": i64_array(limit),
            "strides": i64_array(strides)})

    def dynamic_slice(self, x: Value, starts: Sequence[Value], sizes: Sequence[int]) -> Value:
        return self._build("stablehlo.dynamic_slice", [x, *starts],
                           {"slice_sizes": i64_array(sizes)})

    def dynamic_update_slice(self, x: Value, update: Value, starts: Sequence[Value]) -> Value:
        return self._build("stablehlo.dynamic_update_slice", [x, update, *starts])

    def pad(self, x: Value, value: Value, low: Sequence[int], high: Sequence[int],
            interior: Optional[Sequence[int]] = None) -> Value:
        interior = interior if interior is not None else [0] * len(low)
        return self._build("stablehlo.pad", [x, value], {
            "edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high),
            "interior_padding": i64_array(interior)})

    def concatenate(self, values: Sequence[Value], dim: int) -> Value:
        return self._build("stablehlo.concatenate", values, {"dimension": i64_attr(dim)})

    def tuple(self, values: Sequence[Value]) -> Value:
        return self._build("stablehlo.tuple", values)

    def get_tuple_element(self, t: Value, index: int) -> Value:
        return self._build("stablehlo.get_tuple_element", [t], {"index": _i32(index)})

    def get_dimension_size(self, x: Value, dim: int) -> Value:
        return self._build("stablehlo.get_dimension_size", [x], {"dimension": i64_attr(dim)})

    # -- gather / scatter ---------------------------------------------------------------

    def gather(self, operand: Value, indices: Value, *, offset_dims, collapsed_slice_dims,
               start_index_map, index_vector_dim: int, slice_sizes,
               operand_batching_dims=(), start_indices_batching_dims=(),
               indices_are_sorted: bool = False) -> Value:
        dnums = StructAttr("gather", (
            ("offset_dims", tuple(offset_dims)),
            ("collapsed_slice_dims", tuple(collapsed_slice_dims)),
            ("operand_batching_dims", tuple(operand_batching_dims)),
            ("start_indices_batching_dims", tuple(start_indices_batching_dims)),
            ("start_index_map", tuple(start_index_map)),
            ("index_vector_dim", int(index_vector_dim))))
        return self._build("stablehlo.gather", [operand, indices], {
            "dimension_numbers": dnums, "slice_sizes": i64_array(slice_sizes),
            "indices_are_sorted": BoolAttr(indices_are_sorted)})

    def scatter(self, inputs: Values, indices: Value, updates: Values, *, update_window_dims,
                inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim: int,
                body: RegionBody, input_batching_dims=(), scatter_indices_batching_dims=(),
                indices_are_sorted: bool = False, unique_indices: bool = False):
        inputs, updates = _as_list(inputs), _as_list(updates)
        dnums = StructAttr("scatter", (
            ("update_window_dims", tuple(update_window_dims)),
            ("inserted_window_dims", tuple(inserted_window_dims)),
            ("input_batching_dims", tuple(input_batching_dims)),
            ("scatter_indices_batching_dims", tuple(scatter_indices_batching_dims)),
            ("scatter_dims_to_operand_dims", tuple(scatter_dims_to_operand_dims)),
            ("index_vector_dim", int(index_vector_dim))))
        region = self._reducer(body, [v.type for v in inputs])
        return self._build("stablehlo.scatter", [*inputs, indices, *updates], {
            "scatter_dimension_numbers": dnums, "indices_are_sorted": BoolAttr(indices_are_sorted),
            "unique_indices": BoolAttr(unique_indices)}, regions=[region])

    # -- reductions ---------------------------------------------------------------------

    def reduce(self, inputs: Values, inits: Values, dims: Sequence[int], body: RegionBody):
        """Reduce ``inputs`` over ``dims``; ``body`` is a callable or a binary op name."""
        inputs, inits = _as_list(inputs), _as_list(inits)
        region = self._reducer(body, [v.type for v in inits])
        return self._build("stablehlo.reduce", [*inputs, *inits],
                           {"dimensions": i64_array(dims)}, regions=[region])

    def reduce_window(self, inputs: Values, inits: Values, window_dimensions: Sequence[int],
                      body: RegionBody, *, window_strides=None, base_dilations=None,
                      window_dilations=None, padding=None):
        inputs, inits = _as_list(inputs), _as_list(inits)
        region = self._reducer(body, [v.type for v in inits])
        return self._build("stablehlo.reduce_window", [*inputs, *inits], {
            "window_dimensions": i64_array(window_dimensions),
            "window_strides": _opt(i64_array, window_strides),
            "base_dilations": _opt(i64_array, base_dilations),
            "window_dilations": _opt(i64_array, window_dilations),
            "padding": _opt(_padding_attr, padding)}, regions=[region])

    def select_and_scatter(self, operand: Value, source: Value, init: Value, *,
                           select: Callable, scatter: RegionBody, window_dimensions,
                           window_strides=None, padding=None) -> Value:
        scalar = _scalar(operand.type)
        select_region = self.region([scalar, scalar], select)
        scatter_region = self._reducer(scatter, [init.type])
        return self._build("stablehlo.select_and_scatter", [operand, source, init], {
            "window_dimensions": i64_array(window_dimensions),
            "window_strides": _opt(i64_array, window_strides),
            "padding": _opt(_padding_attr, padding)},
            regions=[select_region, scatter_region])

    def sort(self, inputs: Values, comparator: Union[Callable, str] = "LT", *,
             dimension: int = -1, is_stable: bool = False):
        """Sort along ``dimension``; a string comparator compares the first input."""
        inputs = _as_list(inputs)
        arg_types = [_scalar(v.type) for v in inputs for _ in range(2)]
        if isinstance(comparator, str):
            direction = comparator
            region = self.region(arg_types, lambda *a: self.compare(a[0], a[1], direction))
        else:
            region = self.region(arg_types, comparator)
        return self._build("stablehlo.sort", inputs, {
            "dimension": i64_attr(dimension), "is_stable": BoolAttr(is_stable)},
            regions=[region])

    # -- control flow -------------------------------------------------------------------

    def while_(self, operands: Values, cond: Callable, body: Callable):
        """Loop while ``cond(*carried)`` is true; ``body(*carried)`` returns the next values."""
        operands = _as_list(operands)
        types = [v.type for v in operands]
        regions = [self.region(types, cond), self.region(types, body)]
        op = self.op("stablehlo.while", operands, None, {}, regions)
        return list(op.results)

    def if_(self, pred: Value, true_branch: Callable, false_branch: Callable):
        regions = [self.region([], true_branch), self.region([], false_branch)]
        op = self.op("stablehlo.if", [pred], None, {}, regions)
        return op.results[0] if len(op.results) == 1 else list(op.results)

    def case(self, index: Value, branches: Sequence[Callable]):
        regions = [self.region([], branch) for branch in branches]
        op = self.op("stablehlo.case", [index], None, {}, regions)
        return op.results[0] if len(op.results) == 1 else list(op.results)

    def call(self, callee: str, args: Sequence[Value]):
        """``func.call @callee``; result types come from the callee's type."""
        try:
            ftype = self.module.lookup(callee).type
        except KeyError:
            raise VerificationError(f"call to @{callee}, which is not (yet) defined") from None
        return self._build("func.call", args, {"callee": SymbolRefAttr(callee)},
                           list(ftype.results))

    def custom_call(self, target: str, operands: Sequence[Value], result_types: Sequence[Type],
                    *, has_side_effect: bool = False, backend_config=None,
                    api_version: Optional[int] = None, called_computations=None,
                    attributes: Optional[dict] = None):
        attrs = {"call_target_name": StringAttr(target)}
        if has_side_effect:
            attrs["has_side_effect"] = BoolAttr(True)
        if backend_config is not None:
            attrs["backend_config"] = (backend_config if isinstance(backend_config, Attribute)
                                       else StringAttr(str(backend_config)))
        if api_version is not None:
            attrs["api_version"] = _i32(api_version)
        if called_computations:
            attrs["called_computations"] = ArrayAttr(tuple(SymbolRefAttr(c)
                                                           for c in called_computations))
        attrs.update(attributes or {})
        op = self.op("stablehlo.custom_call", operands, list(result_types), attrs)
        if len(op.results) == 1:
            return op.results[0]
        return list(op.results)

    def composite(self, name: str, operands: Sequence[Value], decomposition: str, *,
                  attributes: Optional[dict] = None, version: int = 0):
        ftype = self.module.lookup(decomposition).type
        attrs = {"name": StringAttr(name), "decomposition": SymbolRefAttr(decomposition),
                 "composite_attributes": DictAttr(tuple((attributes or {}).items()))
                 if attributes else None,
                 "version": _i32(version) if version else None}
        return self._build("stablehlo.composite", operands, attrs, list(ftype.results))


def _drop_none(attributes: Optional[dict]) -> dict:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _opt(fn, value):
    return None if value is None else fn(value)


def _i32(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), I32)


def _padding_attr(pairs) -> DenseElementsAttr:
    """[(low, high), ...] as the ``tensor<Nx2xi64>`` padding attribute."""
    array = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return dense(array)


__all__ = ["Builder", "tensor", "EnumAttr", "TensorType", "F32", "F64", "F16", "BF16", "I1",
           "I8", "I16", "I32", "I64", "UI8", "UI16", "UI32", "UI64"]
