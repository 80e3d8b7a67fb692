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
* tanh: x + x^3 P(x^2) for |x| < 0.55 (P fitted, below), else 1 - 2 / (e^{2|x|} + 1) with the
  sign of x (2|x| clamped to 19, where tanh is 1 in float: one scaling by 2^n, no overflow);
  1.4 ULP at most. logistic = 1 / (1 + e), e = exp(-|x|), times e for x < 0 (no overflow).
* sin, cos, tan: x = (n + f) pi/2 reduced exactly for every finite float (Payne-Hanek: the
  24-bit significand times 96 bits of 2/pi picked by the exponent, in 64-bit integers; no
  cancellation left, since those bits reach 2^-70 past the quadrant), then Taylor
  polynomials of r = f pi/2 in double, rounded once: the float64 result rounded once on
  every input tried (0.5 ULP). The tables are one per word (the loads vectorize as
  gathers).
* Polynomials are evaluated with explicit fused multiply-adds (``_horner``): half the
  instructions, and the same bits on every tier since the contraction is spelled out.
* erf: a Taylor series for |x| < 1; above, erfc(x) = exp(-x^2) h(1/x) / x with h a
  Chebyshev-fitted polynomial (fitted once to mpmath values of x e^{x^2} erfc(x) on
  [1, 4]; beyond, erf rounds to +-1), exp(-x^2) taken with the
  rounding error of x^2 (fma) folded in.

These are the float versions. double uses the C library throughout (scalar, within an ULP):
f64 programs are reference computations where a few ULP per op add up (the conformance
suites allow 3). pow, atan2, cbrt, rsqrt and erfc take the C library's double function for
float too, rounded once (as the reference interpreter does; erfc keeps its relative accuracy
in the far tail, where 1 - erf(x) would cancel to nothing).

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
                  em1_terms=8, log_terms=4, erf_terms=12, erf_hi="4.f", tanh_small="0.55f",
                  tanh_hi="19.f"),
}

# h(t) = x e^{x^2} erfc(x), t = 1/x, as a polynomial in u = (t - center) / half_width.
_ERFC_FIT = {
    "float": (0.625, 0.375, [
        "0x1.f545fcp-2", "-0x1.078df8p-4", "-0x1.7e0b1ep-13", "0x1.f1f02p-9", "-0x1.9445dap-10",
        "0x1.8e303p-12", "-0x1.05ac3cp-15", "-0x1.5b941ep-15", "0x1.67f8c6p-16"]),
}


# tanh(x) = x + x^3 P(x^2) for |x| < 0.55, P fitted once (least squares in relative error on
# Chebyshev nodes, reweighted towards the largest errors; numpy float64): 1e-9 relative.
_TANH_SMALL = ["-0x1.55554ap-2", "0x1.110d26p-3", "-0x1.b92856p-5", "0x1.593becp-6",
               "-0x1.9b2a76p-8"]


def _pi_bits(bits: int) -> int:
    """floor(pi * 2^bits), from Machin's formula in integer arithmetic (guard bits added)."""
    scale = 1 << (bits + 32)

    def arctan_inv(k: int) -> int:  # arctan(1/k) * scale
        total, term, n, sign = 0, scale // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n += 2
            sign = -sign
        return total
    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> 32


def _two_over_pi_windows() -> list[tuple[int, int, int]]:
    """Row i (i = biased exponent of |x| - 126, for |x| >= 0.5): the 96 bits of 2/pi that
    x = m 2^e (m the 24-bit significand, e = biased exponent - 150) needs, as three 32-bit
    words, most significant first: bits e-1 .. e+94 after the binary point, so that
    m * window * 2^-94 = x * 2/pi modulo 4 (the bits before contribute multiples of 4, those
    after less than 2^-70)."""
    pi = _pi_bits(400)
    rows = []
    for e in range(-24, 105):  # |x| in [0.5, 1) .. the largest finite float
        window = ((2 << (400 + e + 94)) // pi) % (1 << 96)  # floor(2^(e+94) * 2/pi) mod 2^96
        rows.append(((window >> 64) & 0xffffffff, (window >> 32) & 0xffffffff,
                     window & 0xffffffff))
    return rows


def _lit(value: float, s: str) -> str:
    return float(value).hex() + s


def _horner(var: str, coefs: list[str], fma: str) -> str:
    """coefs[0] + var*(coefs[1] + var*(...)), each step one fused multiply-add (``fma``: the
    builtin for the type): half the instructions, one rounding per step. Explicit, so every
    tier computes the same bits (the flags forbid the compiler's own contraction)."""
    text = coefs[-1]
    for c in reversed(coefs[:-1]):
        text = f"__builtin_{fma}({var}, {text}, {c})"
    return text


def _functions(T: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    p = _T[T]
    s, B = p["s"], p["bits"]
    fma = "fma" + s
    em1 = [_lit(1 / math.factorial(k), s) for k in range(2, p["em1_terms"] + 1)]
    logc = [_lit(2 / (2 * k + 1), s) for k in range(1, p["log_terms"] + 1)]
    erfc0 = [_lit((-1) ** k * 2 / math.sqrt(math.pi) / (math.factorial(k) * (2 * k + 1)), s)
             for k in range(p["erf_terms"])]
    center, width, fit = _ERFC_FIT[T]
    fit = [c + s for c in fit]
    def reduce(x: str, lo: str, hi: str) -> str:
        """x = n ln2 + r: ``n`` (integer), ``nf`` (n as a float), ``r``, for x clamped to [lo, hi]."""
        return (f"  {T} xc = {x} < {lo} ? {lo} : ({x} > {hi} ? {hi} : {x});\n"
                f"  {T} t = xc * {p['log2e']} + {p['magic']};\n"
                f"  {B} n = __builtin_bit_cast({B}, t) - {p['magic_bits']};\n"
                f"  {T} nf = t - {p['magic']};\n"
                f"  {T} r = (xc - nf * {p['ln2hi']}) - nf * {p['ln2lo']};\n")
    pow2 = f"__builtin_bit_cast({T}, ({B})(({{e}}) + {p['bias']}) << {p['mshift']})"
    return {
        "expm1_poly": (f"static inline {T} ohm_expm1_poly({T} r) {{ return r + r*r*({_horner('r', em1, fma)}); }}\n", ()),
        "exp": (f"static inline {T} ohm_exp({T} x) {{\n"
                + reduce("x", p['exp_lo'], p['exp_hi']) +
                f"  {B} n1 = n >> 1, n2 = n - n1;\n"
                f"  {T} y = (1{s and '.f'}{'' if s else '.'} + ohm_expm1_poly(r)) * {pow2.format(e='n1')} * {pow2.format(e='n2')};\n"
                f"  return x != x ? x : y;\n}}\n", ("expm1_poly",)),
        "expm1": (f"static inline {T} ohm_expm1({T} x) {{\n"
                  + reduce("x", p['em1_lo'], p['exp_hi']) +
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
                f"  {T} l = 2 * sv + sv * z * ({_horner('z', logc, fma)});\n"
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
                 f"  {T} a = __builtin_fabs{s}(x), z = x * x;\n"
                 f"  {T} small = a + a * z * ({_horner('z', [c + s for c in _TANH_SMALL], fma)});\n"
                 + reduce("2 * a", "0.f", p['tanh_hi']) +
                 f"  {T} e = (({T})1 + ohm_expm1_poly(r)) * {pow2.format(e='n')};\n"
                 f"  {T} big = ({T})1 - ({T})2 / (e + ({T})1);\n"
                 f"  return x != x ? x : __builtin_copysign{s}(a < {p['tanh_small']} ? small : big, x);"
                 f"\n}}\n", ("expm1_poly",)),
        "logistic": (f"static inline {T} ohm_logistic({T} x) {{\n"
                     f"  {T} e = ohm_exp(-__builtin_fabs{s}(x)), y = ({T})1 / (({T})1 + e);\n"
                     f"  return x < 0 ? e * y : y;\n}}\n",
                     ("exp",)),
        "erf": (f"static inline {T} ohm_erf({T} x) {{\n"
                f"  {T} a = __builtin_fabs{s}(x), x2 = x * x;\n"
                f"  {T} small = x * ({_horner('x2', erfc0, fma)});\n"
                f"  {T} lo = __builtin_fma{s}(a, a, -x2);\n"
                f"  {T} u = (({T})1 / a - {_lit(center, s)}) * {_lit(1 / width, s)};\n"
                f"  {T} erfc = ohm_exp(-x2) * (({T})1 - lo) * ({_horner('u', fit, fma)}) / a;\n"
                f"  {T} big = a < {p['erf_hi']} ? ({T})1 - erfc : ({T})1;\n"
                f"  return x != x ? x : (a < 1 ? small : __builtin_copysign{s}(big, x));\n}}\n", ("exp",)),
    }


def _trig_functions() -> dict[str, tuple[str, tuple[str, ...]]]:
    """float sin, cos, tan: the argument reduced to r in [-pi/4, pi/4] and its quadrant q
    exactly (Payne-Hanek: 96 bits of 2/pi from a table row picked by the exponent, integer
    products; |x| < 0.5 is its own r), then Taylor polynomials in double, rounded once."""
    windows = _two_over_pi_windows()
    # One table per word: indexed by the row alone, the loads vectorize (gathers); three
    # words of one row at row * 3 + k do not.
    tables = "".join(f"static const uint32_t ohm_two_over_pi_{k}[{len(windows)}] = "
                     f"{{{', '.join(f'{w[k]:#x}u' for w in windows)}}};\n" for k in range(3))
    sin_c = [_lit((-1) ** k / math.factorial(2 * k + 1), "") for k in range(1, 7)]
    cos_c = [_lit((-1) ** k / math.factorial(2 * k), "") for k in range(2, 8)]
    reduce = (
        tables + "static inline double ohm_trig_reduce(float x, int32_t& q) {\n"
        "  uint32_t ix = __builtin_bit_cast(uint32_t, x) & 0x7fffffffu;\n"
        "  int32_t row = (int32_t)(ix >> 23) - 126;\n"
        "  row = row < 0 ? 0 : (row > 128 ? 128 : row);\n"
        "  uint64_t m = (ix & 0x7fffffu) | 0x800000u;\n"
        "  uint64_t hi = m * ohm_two_over_pi_0[row], mid = m * ohm_two_over_pi_1[row],"
        " lo = m * ohm_two_over_pi_2[row];\n"
        "  uint64_t t = (hi << 32) + mid + (lo >> 32);\n"  # x 2/pi mod 4, 62 fraction bits
        "  uint64_t n = (t + (1ull << 61)) >> 62;\n"
        "  int64_t f = (int64_t)(t - (n << 62));\n"
        "  bool small = ix < 0x3f000000u;\n"
        # a mask, not a select: g++ 12 vectorizes no select between a 32-bit value and
        # one narrowed from 64 bits under a 32-bit condition
        "  q = (int32_t)n & -(int32_t)!small;\n"
        "  return small ? (double)__builtin_fabsf(x) : (double)f * 0x1.921fb54442d18p-62;\n}\n")
    sincos = (f"  double z = r * r;\n"
              f"  double s = r + r * z * ({_horner('z', sin_c, 'fma')});\n"
              f"  double c = 1. - 0.5 * z + z * z * ({_horner('z', cos_c, 'fma')});\n")
    head = "  int32_t q; double r = ohm_trig_reduce(x, q);\n"
    neg = "  bool neg = __builtin_bit_cast(uint32_t, x) >> 31;\n"
    special = "  return __builtin_isfinite(x) ? (float)y : x - x;\n}\n"
    return {
        "trig_reduce": (reduce, ()),
        "sin": ("static inline float ohm_sin(float x) {\n" + head + sincos + neg +
                "  double y = q & 1 ? c : s;\n  y = ((q & 2) != 0) != neg ? -y : y;\n" + special,
                ("trig_reduce",)),
        "cos": ("static inline float ohm_cos(float x) {\n" + head + sincos +
                "  double y = q & 1 ? s : c;\n  y = ((q + 1) & 2) ? -y : y;\n" + special,
                ("trig_reduce",)),
        "tan": ("static inline float ohm_tan(float x) {\n" + head + sincos + neg +
                "  double y = q & 1 ? -c / s : s / c;\n  y = neg ? -y : y;\n" + special,
                ("trig_reduce",)),
    }


# Functions a float argument takes through the C library's double version, rounded once.
# (sin, cos and tan too for double; float has its own, _trig_functions)
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
    defs["expm1_poly"] = defs["trig_reduce"] = ("", ())
    # The interpreter's formula, so that f64 (and the 16-bit floats, rounded once from it)
    # agree with it bit for bit.
    defs["logistic"] = ("static inline double ohm_logistic(double x) { "
                        "return 1. / (1. + __builtin_exp(-x)); }\n", ())
    return defs


_FUNCTIONS = {"float": _functions("float"), "double": _libm_functions()}
for _T in _FUNCTIONS:
    _via_double(_FUNCTIONS[_T], _T)
_FUNCTIONS["float"].update(_trig_functions())  # float's own; double keeps the C library's


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


NAMES = frozenset(_FUNCTIONS["float"]) - {"expm1_poly", "trig_reduce"}
