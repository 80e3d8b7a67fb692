"""The C++ target's float math for generated kernels (double: the C library).

The C library's exp/log/tanh are calls the compiler cannot vectorize; these are branch-free
inline functions (range reduction + polynomial, selects for the special cases) that it turns
into AVX2/AVX-512 code. Accuracy is a few ULP over the whole range, denormals, infinities and
NaN included (tests/test_fusion_codegen_math.py checks them against numpy/scipy):

* exp, expm1: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), a Taylor polynomial
  for e^r - 1, and 2^n applied in two halves so results in the denormal range round once
  more at most; expm1 keeps the small-x accuracy by never forming 1 + tiny.
* log, log1p: x = 2^k m with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s = (m-1)/(m+1);
  denormal inputs are scaled by 2^23 (2^54) first; log1p corrects the rounding of 1 + x.
* tanh = -expm1(-2|x|) / (expm1(-2|x|) + 2) with the sign of x (no cancellation near 0, no
  overflow for large |x|); logistic = 1 / (1 + e), e = exp(-|x|), times e for x < 0 (no overflow).
* erf: a Taylor series for |x| < 1; above, erfc(x) = exp(-x^2) h(1/x) / x with h a
  Chebyshev-fitted polynomial (fitted once to mpmath values of x e^{x^2} erfc(x) on
  [1, 4]; beyond, erf rounds to +-1), exp(-x^2) taken with the
  rounding error of x^2 (fma) folded in.

These are the float versions. double uses the C library throughout (scalar, within an ULP):
f64 programs are reference computations where a few ULP per op add up (the conformance
suites allow 3). sin, cos, tan, pow, atan2, cbrt, rsqrt and erfc take the C library's double
function for float too, rounded once (as the reference interpreter does; erfc keeps its
relative accuracy in the far tail, where 1 - erf(x) would cancel to nothing).

One definition per target language (Note [one math for both tiers]): the C++ renderer
(cpp.py) calls these ``ohm_*`` functions, and the cpu backend's native kernels, which run a
program op by op until its generated kernels are compiled, include these same functions from
``pjrt/plugins/cpu/native/_generated/mathlib.h`` (written by ``python -m
pjrt.plugins.cpu.codegen.mathlib``; its tests/test_tier_bits.py checks that it is current);
both are compiled with -ffp-contract=off, so an op gives the same bits on either tier.
"""
from __future__ import annotations

import math

_T = {
    "float": dict(s="f", bits="int32_t", ubits="uint32_t", magic="0x1.8p23f", magic_bits="0x4b400000",
                  log2e="1.44269504088896341f", ln2hi="0x1.62e4p-1f", ln2lo="1.428606765330187045e-06f",
                  bias="127", mshift="23", exp_lo="-104.f", exp_hi="89.f", em1_lo="-30.f",
                  big_n="60", tiny="0x1p-126f", tiny_scale="0x1p23f", tiny_k="23",
                  sqrt_half="0x3f3504f3", one="0x3f800000", mmask="0x007fffff",
                  em1_terms=8, log_terms=4, erf_terms=12, erf_hi="4.f"),
}

# h(t) = x e^{x^2} erfc(x), t = 1/x, as a polynomial in u = (t - center) / half_width.
_ERFC_FIT = {
    "float": (0.625, 0.375, [
        "0x1.f545fcp-2", "-0x1.078df8p-4", "-0x1.7e0b1ep-13", "0x1.f1f02p-9", "-0x1.9445dap-10",
        "0x1.8e303p-12", "-0x1.05ac3cp-15", "-0x1.5b941ep-15", "0x1.67f8c6p-16"]),
}


def _lit(value: float, s: str) -> str:
    return float(value).hex() + s


def _horner(var: str, coefs: list[str]) -> str:
    """coefs[0] + var*(coefs[1] + var*(...))."""
    text = coefs[-1]
    for c in reversed(coefs[:-1]):
        text = f"{c} + {var}*({text})"
    return text


def _functions(T: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    p = _T[T]
    s, B = p["s"], p["bits"]
    em1 = [_lit(1 / math.factorial(k), s) for k in range(2, p["em1_terms"] + 1)]
    logc = [_lit(2 / (2 * k + 1), s) for k in range(1, p["log_terms"] + 1)]
    erfc0 = [_lit((-1) ** k * 2 / math.sqrt(math.pi) / (math.factorial(k) * (2 * k + 1)), s)
             for k in range(p["erf_terms"])]
    center, width, fit = _ERFC_FIT[T]
    fit = [c + s for c in fit]
    reduce = (f"  {T} xc = x < {p['exp_lo']} ? {p['exp_lo']} : (x > {p['exp_hi']} ? {p['exp_hi']} : x);\n"
              f"  {T} t = xc * {p['log2e']} + {p['magic']};\n"
              f"  {B} n = __builtin_bit_cast({B}, t) - {p['magic_bits']};\n"
              f"  {T} nf = t - {p['magic']};\n"
              f"  {T} r = (xc - nf * {p['ln2hi']}) - nf * {p['ln2lo']};\n")
    pow2 = f"__builtin_bit_cast({T}, ({B})(({{e}}) + {p['bias']}) << {p['mshift']})"
    return {
        "expm1_poly": (f"static inline {T} ohm_expm1_poly({T} r) {{ return r + r*r*({_horner('r', em1)}); }}\n", ()),
        "exp": (f"static inline {T} ohm_exp({T} x) {{\n"
                + reduce.replace("xc = x <", "xc = x <") +
                f"  {B} n1 = n >> 1, n2 = n - n1;\n"
                f"  {T} y = (1{s and '.f'}{'' if s else '.'} + ohm_expm1_poly(r)) * {pow2.format(e='n1')} * {pow2.format(e='n2')};\n"
                f"  return x != x ? x : y;\n}}\n", ("expm1_poly",)),
        "expm1": (f"static inline {T} ohm_expm1({T} x) {{\n"
                  + reduce.replace(p['exp_lo'], p['em1_lo']) +
                  f"  {T} q = ohm_expm1_poly(r);\n"
                  f"  {B} n1 = n >> 1, n2 = n - n1, ns = n > {p['big_n']} ? {p['big_n']} : n;\n"
                  f"  {T} sc = {pow2.format(e='ns')};\n"
                  f"  {T} big = (q + ({T})1) * {pow2.format(e='n1')} * {pow2.format(e='n2')};\n"
                  f"  {T} y = n > {p['big_n']} ? big : sc * q + (sc - ({T})1);\n"
                  f"  return x != x ? x : y;\n}}\n", ("expm1_poly",)),
        "log": (f"static inline {T} ohm_log({T} x) {{\n"
                f"  bool sub = x < {p['tiny']};\n"
                f"  {B} ix = __builtin_bit_cast({B}, sub ? x * {p['tiny_scale']} : x);\n"
                f"  ix += {p['one']} - {p['sqrt_half']};\n"
                f"  {B} k = (ix >> {p['mshift']}) - {p['bias']} - (sub ? {p['tiny_k']} : 0);\n"
                f"  ix = (ix & {p['mmask']}) + {p['sqrt_half']};\n"
                f"  {T} f = __builtin_bit_cast({T}, ix) - ({T})1;\n"
                f"  {T} sv = f / (({T})2 + f), z = sv * sv;\n"
                f"  {T} l = 2 * sv + sv * z * ({_horner('z', logc)});\n"
                f"  {T} kf = ({T})k;\n"
                f"  {T} y = kf * {p['ln2hi']} + (l + kf * {p['ln2lo']});\n"
                f"  return x == 0 ? -__builtin_inf{s}() : (x < 0 ? __builtin_nan{s}(\"\") : "
                f"(x == __builtin_inf{s}() || x != x ? x : y));\n}}\n", ()),
        "log1p": (f"static inline {T} ohm_log1p({T} x) {{\n"
                  f"  {T} u = x + ({T})1, d = u - ({T})1;\n"
                  f"  {T} y = ohm_log(u);\n"
                  f"  {T} c = u == ({T})1 ? x : y - (d - x) / u;\n"
                  f"  return u == ({T})1 ? x : (u == __builtin_inf{s}() || u <= 0 ? y : c);\n}}\n", ("log",)),
        "tanh": (f"static inline {T} ohm_tanh({T} x) {{\n"
                 f"  {T} e = ohm_expm1(-2 * __builtin_fabs{s}(x));\n"
                 f"  return __builtin_copysign{s}(-e / (e + 2), x);\n}}\n", ("expm1",)),
        "logistic": (f"static inline {T} ohm_logistic({T} x) {{\n"
                     f"  {T} e = ohm_exp(-__builtin_fabs{s}(x)), y = ({T})1 / (({T})1 + e);\n"
                     f"  return x < 0 ? e * y : y;\n}}\n",
                     ("exp",)),
        "erf": (f"static inline {T} ohm_erf({T} x) {{\n"
                f"  {T} a = __builtin_fabs{s}(x), x2 = x * x;\n"
                f"  {T} small = x * ({_horner('x2', erfc0)});\n"
                f"  {T} lo = __builtin_fma{s}(a, a, -x2);\n"
                f"  {T} u = (({T})1 / a - {_lit(center, s)}) * {_lit(1 / width, s)};\n"
                f"  {T} erfc = ohm_exp(-x2) * (({T})1 - lo) * ({_horner('u', fit)}) / a;\n"
                f"  {T} big = a < {p['erf_hi']} ? ({T})1 - erfc : ({T})1;\n"
                f"  return x != x ? x : (a < 1 ? small : __builtin_copysign{s}(big, x));\n}}\n", ("exp",)),
    }


# Functions a float argument takes through the C library's double version, rounded once.
_VIA_DOUBLE = {name: f"__builtin_{name}(x)" for name in ("sin", "cos", "tan", "cbrt", "erfc")}
_VIA_DOUBLE["rsqrt"] = "1. / __builtin_sqrt(x)"
_VIA_DOUBLE2 = {"pow": "__builtin_pow(x, y)", "atan2": "__builtin_atan2(x, y)"}


def _via_double(functions: dict, T: str) -> None:
    for name, expr in _VIA_DOUBLE.items():
        functions[name] = (f"static inline {T} ohm_{name}({T} a) {{ const double x = a; "
                           f"return ({T})({expr}); }}\n", ())
    for name, expr in _VIA_DOUBLE2.items():
        functions[name] = (f"static inline {T} ohm_{name}({T} a, {T} b) {{ const double x = a, "
                           f"y = b; return ({T})({expr}); }}\n", ())


def _libm_functions() -> dict[str, tuple[str, tuple[str, ...]]]:
    """double: the C library's functions (scalar, within an ULP). f64 is the precision of
    reference computations, not of fast paths, so accuracy comes first."""
    defs = {name: (f"static inline double ohm_{name}(double x) {{ return __builtin_{name}(x); }}\n",
                   ()) for name in ("exp", "expm1", "log", "log1p", "tanh", "erf")}
    defs["expm1_poly"] = ("", ())
    # The interpreter's formula, so that f64 (and the 16-bit floats, rounded once from it)
    # agree with it bit for bit.
    defs["logistic"] = ("static inline double ohm_logistic(double x) { "
                        "return 1. / (1. + __builtin_exp(-x)); }\n", ())
    return defs


_FUNCTIONS = {"float": _functions("float"), "double": _libm_functions()}
for _T in _FUNCTIONS:
    _via_double(_FUNCTIONS[_T], _T)


def source(names) -> str:
    """C++ definitions (float and double overloads) of the named functions and what they use,
    in dependency order."""
    order: list[str] = []

    def visit(name):
        if name in order:
            return
        for dep in _FUNCTIONS["float"][name][1]:
            visit(dep)
        order.append(name)

    for name in sorted(names):
        visit(name)
    return "".join(_FUNCTIONS[T][name][0] for name in order for T in ("float", "double"))


NAMES = frozenset(_FUNCTIONS["float"]) - {"expm1_poly"}
