"""The scalar-op protocol: the expression of one elementwise op on scalar operands.

``ScalarRenderer.expression(op, args, math)`` is the one place that says what an elementwise
op computes in a generated kernel; every kernel template (fusions and whole loops) asks it.
The semantics are the reference interpreter's and are written here once, for every C-family
target: integer arithmetic wraps (computed unsigned), float comparisons are IEEE,
maximum/minimum propagate NaN, conversions to narrower integers wrap. A target language
(cpp.py for C++; a CUDA C renderer is another subclass) supplies only the spelling: its type
names, literals, math function calls and the NaN-propagating max/min.

A narrow float type a target holds but does not compute in (``NARROW``: bf16 in C++) is
computed in its wide type: its operands are widened, and each op's result is rounded back,
which is what the interpreter (ml_dtypes) and the native kernels do, op by op.

What no target handles (float -> integer conversion, integer division, TOTALORDER
comparisons, element types the target lacks), and shifts where a renderer leaves ``SHIFTS``
off (its backend's kernels are not checked against them yet), raise NotGeneratable;
``why_not`` turns that into the reason a backend's fusion hook gives, so such an op never
joins a fusion.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from stablehlo.ir.types import TensorType


class NotGeneratable(Exception):
    """Something the generator does not handle (the reason goes to the log)."""


_ARITH = {"stablehlo.add": "+", "stablehlo.subtract": "-", "stablehlo.multiply": "*"}
_BITWISE = {"stablehlo.and": "&", "stablehlo.or": "|", "stablehlo.xor": "^"}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
# Float functions by the name the renderers know them by.
_UNARY_MATH = {
    "stablehlo.exponential": "exp", "stablehlo.exponential_minus_one": "expm1",
    "stablehlo.log": "log", "stablehlo.log_plus_one": "log1p", "stablehlo.tanh": "tanh",
    "stablehlo.logistic": "logistic", "chlo.erf": "erf", "chlo.erfc": "erfc",
    "stablehlo.sine": "sin", "stablehlo.cosine": "cos", "stablehlo.tan": "tan",
    "stablehlo.cbrt": "cbrt",
    "stablehlo.rsqrt": "rsqrt", "stablehlo.sqrt": "sqrt", "stablehlo.abs": "fabs",
    "stablehlo.floor": "floor", "stablehlo.ceil": "ceil",
    "stablehlo.round_nearest_even": "rint", "stablehlo.round_nearest_afz": "round"}
_BINARY_MATH = {"stablehlo.power": "pow", "stablehlo.atan2": "atan2",
                "stablehlo.remainder": "fmod"}
_SIGNED = frozenset({"i8", "i16", "i32", "i64"})
_SHIFTS = ("stablehlo.shift_left", "stablehlo.shift_right_logical",
           "stablehlo.shift_right_arithmetic")


class ScalarRenderer:
    """The protocol, with the semantics; subclasses spell one target language."""
    TYPES: dict[str, str] = {}          # element type name -> the target's type
    FLOATS: frozenset = frozenset()     # the float element types among TYPES
    NARROW: dict[str, str] = {}         # float types computed in a wider one: name -> its name
    SHIFTS = False                      # whether the shift ops are rendered

    # -- the target's spelling (subclasses) ---------------------------------------
    def literal(self, value, elem: str) -> str:
        """``value`` as a constant of element type ``elem``."""
        raise NotImplementedError

    def call(self, function: str, elem: str, args: list[str], math: set) -> str:
        """The float math ``function`` (a name of ``_UNARY_MATH``/``_BINARY_MATH``) of
        ``elem`` on ``args``; adds what it uses from the target's math library to ``math``."""
        raise NotImplementedError

    def extremum(self, which: str, ctype: str, a: str, b: str) -> str:
        """NaN-propagating ``which`` ("max" or "min") of ``a`` and ``b`` of type ``ctype``."""
        raise NotImplementedError

    # -- types ----------------------------------------------------------------------
    def elem(self, type) -> str:
        """The element type name of a static tensor type the target has."""
        if not isinstance(type, TensorType) or not type.is_static:
            raise NotGeneratable(f"type {type}")
        name = str(type.element_type)
        if name not in self.TYPES:
            raise NotGeneratable(f"element type {name}")
        return name

    def ctype(self, type) -> str:
        return self.TYPES[self.elem(type)]

    def integers(self) -> frozenset:
        return frozenset(self.TYPES) - self.FLOATS - {"i1"}

    def unsigned(self, elem: str) -> str:
        """The unsigned type wrapping arithmetic of ``elem`` is computed in."""
        return self.TYPES["ui64"] if elem in ("i64", "ui64") else self.TYPES["ui32"]

    # -- the semantics --------------------------------------------------------------
    def why_not(self, op: Operation) -> str | None:
        """None when ``expression`` renders the elementwise ``op``, else why not."""
        try:
            for v in (*op.operands, *op.results):
                self.elem(v.type)
            self.expression(op, [f"a{k}" for k in range(len(op.operands))], set())
        except NotGeneratable as exc:
            return str(exc)
        return None

    def expression(self, op: Operation, args: list[str], math: set) -> str:
        """The expression of elementwise ``op`` on operand expressions ``args``; adds the
        math library functions it uses to ``math``."""
        args = [self.widen(a, e) if (e := self.elem(v.type)) in self.NARROW else a
                for a, v in zip(args, op.operands)]
        result = self._expression(op, args, math)
        elem = self.elem(op.results[0].type)
        return self.narrow(result, elem) if elem in self.NARROW else result

    def widen(self, arg: str, elem: str) -> str:
        """``arg`` of the narrow type ``elem`` as its wide type."""
        return f"(({self.TYPES[self.NARROW[elem]]})({arg}))"

    def narrow(self, expr: str, elem: str) -> str:
        """``expr`` of ``elem``'s wide type rounded to the narrow ``elem``."""
        return f"(({self.TYPES[elem]})({expr}))"

    def _expression(self, op: Operation, args: list[str], math: set) -> str:
        name = op.name
        elem = self.elem(op.results[0].type)
        t = self.TYPES[self.NARROW.get(elem, elem)]  # what the op computes in
        fl = elem in self.FLOATS
        ints = self.integers()
        if name in _ARITH:
            if fl:
                return f"({args[0]} {_ARITH[name]} {args[1]})"
            if elem in ints:
                u = self.unsigned(elem)
                return f"({t})(({u}){args[0]} {_ARITH[name]} ({u}){args[1]})"
        elif name == "chlo.square" and fl:
            return f"({args[0]} * {args[0]})"
        elif name == "stablehlo.divide" and fl:
            return f"({args[0]} / {args[1]})"
        elif name == "stablehlo.negate":
            if fl:
                return f"(-{args[0]})"
            if elem in ints:
                return f"({t})(0 - ({self.unsigned(elem)}){args[0]})"
        elif name in ("stablehlo.maximum", "stablehlo.minimum") and elem != "i1":
            return self.extremum(name[10:13], t, args[0], args[1])
        elif name in _UNARY_MATH and fl:
            return self.call(_UNARY_MATH[name], self.NARROW.get(elem, elem), args, math)
        elif name in _BINARY_MATH and fl:
            return self.call(_BINARY_MATH[name], self.NARROW.get(elem, elem), args, math)
        elif name == "stablehlo.abs" and elem in ints:
            u = self.unsigned(elem)
            return f"({t})({args[0]} < 0 ? 0 - ({u}){args[0]} : ({u}){args[0]})"
        elif name == "stablehlo.sign" and elem != "i1":
            return f"({t})({args[0]} > 0 ? 1 : ({args[0]} < 0 ? -1 : {args[0]}))"
        elif name in _BITWISE and not fl:
            if elem == "i1":
                return f"({args[0]} {_BITWISE[name]} {args[1]})"
            return f"({t})({args[0]} {_BITWISE[name]} {args[1]})"
        elif name == "stablehlo.not" and not fl:
            return f"(!{args[0]})" if elem == "i1" else f"({t})(~{args[0]})"
        elif name == "stablehlo.is_finite":
            return f"({args[0]} - {args[0]} == 0)"
        elif name == "stablehlo.compare":
            return self._compare(op, args)
        elif name == "stablehlo.select":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        elif name == "stablehlo.clamp" and elem != "i1":
            inner = self.extremum("max", t, args[1], args[0])
            return self.extremum("min", t, inner, args[2])
        elif name in _SHIFTS and self.SHIFTS and elem in ints:
            return self._shift(name, elem, args)
        elif name == "stablehlo.convert":
            src = self.elem(op.operands[0].type)
            if src in self.FLOATS and not fl and elem != "i1":
                raise NotGeneratable("float to integer conversion")
            if elem == "i1":
                return f"({args[0]} != 0)"
            return f"({t})({args[0]})"
        raise NotGeneratable(f"{name} on {elem}")

    def _shift(self, name: str, elem: str, args: list[str]) -> str:
        """The interpreter's (XLA's) shifts: the amount is read as unsigned; an amount of the
        bit width or more gives 0, or the sign fill for the arithmetic right shift (which
        reads the bits as signed for unsigned types too)."""
        width = int(elem.lstrip("ui"))
        t, bits = self.TYPES[elem], self.TYPES[f"ui{width}"]
        wide = self.unsigned(elem)  # shifted in: no promotion to a signed int
        amount = f"({bits}){args[1]}"
        if name == "stablehlo.shift_right_arithmetic":
            signed = self.TYPES[f"i{width}"]
            return (f"({t})(({signed}){args[0]} >> ({amount} < {width} ? {amount} : "
                    f"{width - 1}))")
        shift = "<<" if name == "stablehlo.shift_left" else ">>"
        return f"({t})({amount} < {width} ? ({wide})({bits}){args[0]} {shift} {amount} : 0)"

    def _compare(self, op: Operation, args: list[str]) -> str:
        direction = op.attributes["comparison_direction"].value
        operand = self.elem(op.operands[0].type)
        kind = op.attributes.get("compare_type")
        if kind is not None and kind.value == "TOTALORDER":
            raise NotGeneratable("TOTALORDER comparison")
        if kind is not None and kind.value == "UNSIGNED" and operand in _SIGNED:
            raise NotGeneratable("an UNSIGNED comparison of signed integers")
        if operand == "i1" and direction not in ("EQ", "NE"):
            raise NotGeneratable("ordered comparison of booleans")
        return f"({args[0]} {_COMPARE[direction]} {args[1]})"
