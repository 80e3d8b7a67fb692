"""The C++ renderer: how the scalar-op protocol (scalar.py) is spelled in C++.

Generated C++ includes no standard header (each costs compile time: <cmath> and <memory>
alone were ~300 ms): fixed-width integer types come from the backend's prelude, memory and
the exactly rounded math functions from compiler builtins, the other float functions from
our math library (cpp_mathlib.py, ``ohm_*``), which the backend prepends for the names a
kernel collected in ``math``.
"""
from __future__ import annotations

import numpy as np

from xla_core.codegen import cpp_mathlib
from xla_core.codegen.scalar import ScalarRenderer


class CppRenderer(ScalarRenderer):
    TYPES = {"f32": "float", "f64": "double", "bf16": "ohm_bf16", "i1": "bool", "i8": "int8_t",
             "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "ui8": "uint8_t",
             "ui16": "uint16_t", "ui32": "uint32_t", "ui64": "uint64_t"}
    FLOATS = frozenset({"f32", "f64", "bf16"})
    NARROW = {"bf16": "f32"}
    # ``ohm_bf16``: bf16 storage, a scalar type (an enum: loads and stores of it vectorize,
    # where those of a struct would not), widened to float and rounded back to nearest even
    # as the native kernels round (native/float16.h); what ``extremum`` calls:
    # NaN-propagating max/min (the backend's prelude includes them).
    HELPERS = (
        "enum class ohm_bf16 : unsigned short {};\n"
        "static constexpr float ohm_bf16_to_f32(ohm_bf16 x) "
        "{ return __builtin_bit_cast(float, (unsigned)x << 16); }\n"
        "static constexpr ohm_bf16 ohm_f32_to_bf16(float f) {\n"
        "  unsigned u = __builtin_bit_cast(unsigned, f);\n"
        "  return (ohm_bf16)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u\n"
        "                    : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
        "}\n"
        "template <class T> static inline T ohm_max(T a, T b) "
        "{ return a != a ? a : (b != b ? b : (a > b ? a : b)); }\n"
        "template <class T> static inline T ohm_min(T a, T b) "
        "{ return a != a ? a : (b != b ? b : (a < b ? a : b)); }\n")

    def literal(self, value, elem: str) -> str:
        if elem in self.NARROW:
            return self.narrow(self.literal(value, self.NARROW[elem]), elem)
        if elem in self.FLOATS:
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
            v = int(value)
            return f"({self.TYPES[elem]}){v}ULL" if v >= 0 else f"(int64_t)({v + 1}LL - 1)"
        return f"({self.TYPES[elem]}){int(value)}"

    def call(self, function: str, elem: str, args: list[str], math: set) -> str:
        # Ours where we have one (vectorizable, the native kernels' too); the compiler's
        # builtins are exactly rounded, so every tier computes them alike.
        if function in cpp_mathlib.NAMES:
            math.add(function)
            return f"ohm_{function}({', '.join(args)})"
        suffix = "f" if elem == "f32" else ""
        return f"__builtin_{function}{suffix}({', '.join(args)})"

    def extremum(self, which: str, ctype: str, a: str, b: str) -> str:
        return f"ohm_{which}<{ctype}>({a}, {b})"

    def widen(self, arg: str, elem: str) -> str:
        return f"ohm_{elem}_to_{self.NARROW[elem]}({arg})"

    def narrow(self, expr: str, elem: str) -> str:
        return f"ohm_{self.NARROW[elem]}_to_{elem}({expr})"

    # -- memory, for the templates that keep temporaries (while_loop.py) ------------------
    def alloc(self, name: str, ctype: str, n: int) -> str:
        return f"{ctype}* {name} = ({ctype}*)__builtin_malloc(sizeof({ctype}) * {n});"

    def free(self, name: str) -> str:
        return f"__builtin_free({name});"

    def copy(self, dst: str, src: str, ctype: str, n: int, overlap: bool = False) -> str:
        fn = "__builtin_memmove" if overlap else "__builtin_memcpy"
        return f"{fn}({dst}, {src}, sizeof({ctype}) * {n});"


CPP = CppRenderer()
