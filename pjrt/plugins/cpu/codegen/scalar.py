"""C types, literals and the scalar expression of each elementwise op, for generated kernels.

The semantics are the reference interpreter's: integer arithmetic wraps (computed unsigned),
float comparisons are IEEE, maximum/minimum propagate NaN, conversions to narrower integers
wrap. What is not handled here (float -> integer conversion, integer division, shifts, 16-bit
floats, complex numbers, TOTALORDER comparisons) raises NotGeneratable, and the fusion runs op
by op instead.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.types import TensorType


class NotGeneratable(Exception):
    """Something the generator does not handle (the reason goes to the log)."""


CTYPES = {"f32": "float", "f64": "double", "i1": "bool", "i8": "int8_t", "i16": "int16_t",
          "i32": "int32_t", "i64": "int64_t", "ui8": "uint8_t", "ui16": "uint16_t",
          "ui32": "uint32_t", "ui64": "uint64_t"}
FLOATS = frozenset({"f32", "f64"})
_INTEGERS = frozenset(CTYPES) - FLOATS - {"i1"}

_ARITH = {"stablehlo.add": "+", "stablehlo.subtract": "-", "stablehlo.multiply": "*"}
_BITWISE = {"stablehlo.and": "&", "stablehlo.or": "|", "stablehlo.xor": "^"}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
# Float functions: ours (mathlib.py, shared with the native kernels) and compiler builtins
# (exact in every float type, so the native kernels compute them the same way).
_OURS = {"stablehlo.exponential": "exp", "stablehlo.exponential_minus_one": "expm1",
         "stablehlo.log": "log", "stablehlo.log_plus_one": "log1p", "stablehlo.tanh": "tanh",
         "stablehlo.logistic": "logistic", "chlo.erf": "erf", "stablehlo.sine": "sin",
         "stablehlo.cosine": "cos", "stablehlo.tan": "tan", "stablehlo.cbrt": "cbrt",
         "stablehlo.rsqrt": "rsqrt"}
_OURS2 = {"stablehlo.power": "pow", "stablehlo.atan2": "atan2"}
_BUILTIN = {"stablehlo.sqrt": "sqrt", "stablehlo.abs": "fabs", "stablehlo.floor": "floor",
            "stablehlo.ceil": "ceil", "stablehlo.round_nearest_even": "rint",
            "stablehlo.round_nearest_afz": "round"}
_BUILTIN2 = {"stablehlo.remainder": "fmod"}


def elem_name(type) -> str:
    if not isinstance(type, TensorType) or not type.is_static:
        raise NotGeneratable(f"type {type}")
    name = str(type.element_type)
    if name not in CTYPES:
        raise NotGeneratable(f"element type {name}")
    return name


def ctype(type) -> str:
    return CTYPES[elem_name(type)]


def literal(value, elem: str) -> str:
    if elem in FLOATS:
        v = float(value)
        s = "f" if elem == "f32" else ""
        if np.isnan(v):
            return f"__builtin_nan{s}(\"\")"
        if np.isinf(v):
            return ("-" if v < 0 else "") + f"__builtin_inf{s}()"
        return v.hex() + s
    if elem == "i1":
        return "true" if bool(value) else "false"
    if elem in ("i64", "ui64"):
        return f"({CTYPES[elem]}){int(value)}ULL" if int(value) >= 0 else f"(int64_t)({int(value) + 1}LL - 1)"
    return f"({CTYPES[elem]}){int(value)}"


def _unsigned(elem: str) -> str:
    return "uint64_t" if elem in ("i64", "ui64") else "uint32_t"


def expression(op, args: list[str], math: set) -> str:
    """The C expression of elementwise ``op`` on operand expressions ``args``; adds the
    mathlib functions it uses to ``math``."""
    name = op.name
    elem = elem_name(op.results[0].type)
    t = CTYPES[elem]
    fl = elem in FLOATS
    sfx = "f" if elem == "f32" else ""
    if name in _ARITH:
        if fl:
            return f"({args[0]} {_ARITH[name]} {args[1]})"
        if elem in _INTEGERS:
            u = _unsigned(elem)
            return f"({t})(({u}){args[0]} {_ARITH[name]} ({u}){args[1]})"
    elif name == "chlo.square" and fl:
        return f"({args[0]} * {args[0]})"
    elif name == "stablehlo.divide" and fl:
        return f"({args[0]} / {args[1]})"
    elif name == "stablehlo.negate":
        if fl:
            return f"(-{args[0]})"
        if elem in _INTEGERS:
            return f"({t})(0 - ({_unsigned(elem)}){args[0]})"
    elif name in ("stablehlo.maximum", "stablehlo.minimum") and elem != "i1":
        return f"ohm_{name[10:13]}<{t}>({args[0]}, {args[1]})"
    elif name in _OURS and fl:
        math.add(_OURS[name])
        return f"ohm_{_OURS[name]}({args[0]})"
    elif name in _OURS2 and fl:
        math.add(_OURS2[name])
        return f"ohm_{_OURS2[name]}({args[0]}, {args[1]})"
    elif name in _BUILTIN and fl:
        return f"__builtin_{_BUILTIN[name]}{sfx}({args[0]})"
    elif name in _BUILTIN2 and fl:
        return f"__builtin_{_BUILTIN2[name]}{sfx}({args[0]}, {args[1]})"
    elif name == "stablehlo.abs" and elem in _INTEGERS:
        return f"({t})({args[0]} < 0 ? 0 - ({_unsigned(elem)}){args[0]} : ({_unsigned(elem)}){args[0]})"
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
        direction = op.attributes["comparison_direction"].value
        operand = elem_name(op.operands[0].type)
        kind = op.attributes.get("compare_type")
        if kind is not None and kind.value == "TOTALORDER":
            raise NotGeneratable("TOTALORDER comparison")
        if operand == "i1" and direction not in ("EQ", "NE"):
            raise NotGeneratable("ordered comparison of booleans")
        return f"({args[0]} {_COMPARE[direction]} {args[1]})"
    elif name == "stablehlo.select":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    elif name == "stablehlo.clamp" and elem != "i1":
        return f"ohm_min<{t}>(ohm_max<{t}>({args[1]}, {args[0]}), {args[2]})"
    elif name == "stablehlo.convert":
        src = elem_name(op.operands[0].type)
        if src in FLOATS and not fl:
            if elem == "i1":
                return f"({args[0]} != 0)"
            raise NotGeneratable("float to integer conversion")
        if elem == "i1":
            return f"({args[0]} != 0)"
        return f"({t})({args[0]})"
    raise NotGeneratable(f"{name} on {elem}")
