// Native kernels of the StableHLO float math ops, convert and bitcast_convert.
//
// Semantics are the reference interpreter's (stablehlo/interpreter/elementwise_math.py,
// conversions.py):
// * the transcendental ops, atan2, rsqrt, cbrt and logistic are evaluated in double for
//   every float type and rounded once to it (libm, one element at a time); floor, ceil,
//   the roundings and sqrt are exact in f32, so f32 computes them natively (bit-identical);
// * convert: nonzero -> true; int -> int wraps; float -> int truncates toward zero,
//   saturates at the integer range and maps NaN to 0; every conversion to a float type
//   rounds once, to nearest even (int64 -> f16/bf16 too, which needs care: Note below).
// * bitcast_convert between element types of the same bit width copies the bits; the
//   width-changing forms (which add or drop a dimension) fall back to the interpreter.
#include <limits>

#include "kernels_elementwise.h"

namespace openhlo::cpu::elementwise {
namespace {

// ---------------------------------------------------------------------------
// Float math

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double rsqrt(double x) { return 1.0 / std::sqrt(x); }
double exp_(double x) { return std::exp(x); }
double expm1_(double x) { return std::expm1(x); }
double log_(double x) { return std::log(x); }
double log1p_(double x) { return std::log1p(x); }
double sin_(double x) { return std::sin(x); }
double cos_(double x) { return std::cos(x); }
double tan_(double x) { return std::tan(x); }
double tanh_(double x) { return std::tanh(x); }
double cbrt_(double x) { return std::cbrt(x); }

// A unary op evaluated in double and rounded once to the element type.
template <double (*kFn)(double)>
struct DoubleMath {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = true;
  static constexpr int64_t kChunk = kMathChunk;
  template <class C> static C on_float(C x) { return kFn(x); }
};

// Ops exact in every float type: native f32 agrees bit for bit with double-then-round.
struct Floor {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  template <class C> static C on_float(C x) { return std::floor(x); }
};

struct Ceil {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  template <class C> static C on_float(C x) { return std::ceil(x); }
};

struct RoundNearestEven {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  template <class C> static C on_float(C x) { return std::rint(x); }  // default mode: ties even
};

struct RoundNearestAfz {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  template <class C> static C on_float(C x) { return std::round(x); }  // ties away from zero
};

// sqrt is correctly rounded; in double then rounded to f32 it gives the same result
// (53 >= 2 * 24 + 2 bits: no double-rounding error).
struct Sqrt {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  template <class C> static C on_float(C x) { return std::sqrt(x); }
};

struct IsFinite {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = false;
  static constexpr bool kPredResult = true;
  template <class C> static bool on_float(C x) { return std::isfinite(x); }
};

struct Atan2 {
  static constexpr unsigned kKinds = kFloats;
  static constexpr bool kMath = true;
  static constexpr int64_t kChunk = kMathChunk;
  template <class C> static C on_float(C y, C x) { return std::atan2(y, x); }
};

OPENHLO_KERNEL(stablehlo_exponential, "stablehlo.exponential", make_unary<DoubleMath<exp_>>);
OPENHLO_KERNEL(stablehlo_exponential_minus_one, "stablehlo.exponential_minus_one",
               make_unary<DoubleMath<expm1_>>);
OPENHLO_KERNEL(stablehlo_log, "stablehlo.log", make_unary<DoubleMath<log_>>);
OPENHLO_KERNEL(stablehlo_log_plus_one, "stablehlo.log_plus_one", make_unary<DoubleMath<log1p_>>);
OPENHLO_KERNEL(stablehlo_logistic, "stablehlo.logistic", make_unary<DoubleMath<logistic>>);
OPENHLO_KERNEL(stablehlo_sine, "stablehlo.sine", make_unary<DoubleMath<sin_>>);
OPENHLO_KERNEL(stablehlo_cosine, "stablehlo.cosine", make_unary<DoubleMath<cos_>>);
OPENHLO_KERNEL(stablehlo_tan, "stablehlo.tan", make_unary<DoubleMath<tan_>>);
OPENHLO_KERNEL(stablehlo_tanh, "stablehlo.tanh", make_unary<DoubleMath<tanh_>>);
OPENHLO_KERNEL(stablehlo_rsqrt, "stablehlo.rsqrt", make_unary<DoubleMath<rsqrt>>);
OPENHLO_KERNEL(stablehlo_cbrt, "stablehlo.cbrt", make_unary<DoubleMath<cbrt_>>);
OPENHLO_KERNEL(stablehlo_sqrt, "stablehlo.sqrt", make_unary<Sqrt>);
OPENHLO_KERNEL(stablehlo_floor, "stablehlo.floor", make_unary<Floor>);
OPENHLO_KERNEL(stablehlo_ceil, "stablehlo.ceil", make_unary<Ceil>);
OPENHLO_KERNEL(stablehlo_round_nearest_even, "stablehlo.round_nearest_even",
               make_unary<RoundNearestEven>);
OPENHLO_KERNEL(stablehlo_round_nearest_afz, "stablehlo.round_nearest_afz",
               make_unary<RoundNearestAfz>);
OPENHLO_KERNEL(stablehlo_is_finite, "stablehlo.is_finite", make_unary<IsFinite>);
OPENHLO_KERNEL(stablehlo_atan2, "stablehlo.atan2", make_binary<Atan2>);

// ---------------------------------------------------------------------------
// convert

// Note [int64 to 16-bit floats]
// A 64-bit integer is not exact in double, so (double)v followed by rounding to f16/bf16
// could round twice. Rounding the integer itself to the target's significand width first
// (ties to even) gives a value that double holds exactly, so only one rounding counts.
template <typename N, typename I>
N int_to_narrow(I v) {
  if constexpr (sizeof(I) < 8) {
    return narrow_from_double<N>(static_cast<double>(v));  // exact in double
  } else {
    constexpr int kDigits = std::is_same_v<N, f16_t> ? 11 : 8;  // with the implicit bit
    const bool negative = std::is_signed_v<I> && v < 0;
    uint64_t magnitude = static_cast<uint64_t>(v);
    if (negative) magnitude = 0 - magnitude;
    const int width = magnitude == 0 ? 0 : 64 - __builtin_clzll(magnitude);
    double rounded = static_cast<double>(magnitude);
    if (width > kDigits) {
      const int shift = width - kDigits;
      uint64_t kept = magnitude >> shift;
      const uint64_t rest = magnitude & ((uint64_t{1} << shift) - 1);
      const uint64_t half = uint64_t{1} << (shift - 1);
      if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;
      rounded = std::ldexp(static_cast<double>(kept), shift);
    }
    return narrow_from_double<N>(negative ? -rounded : rounded);
  }
}

// Truncates toward zero, saturates at To's range, NaN -> 0 (C is float or double).
template <typename To, typename C>
To float_to_int(C x) {
  using limits = std::numeric_limits<To>;
  constexpr C kLow = static_cast<C>(limits::min());  // 0 or -2^(w-1): exact
  // max + 1 = 2^digits, a power of two and so exact (unlike max itself in f32).
  constexpr C kHighBound = C(2) * static_cast<C>(uint64_t{1} << (limits::digits - 1));
  // x truncates below the range iff x <= kLow - 1. Where kLow - 1 is not representable it
  // rounds to kLow, and no value lies strictly between the two: then that is x < kLow.
  const bool below = (x < kLow) & (x <= kLow - C(1));
  const bool above = x >= kHighBound;
  // Branch-free so the loop vectorizes; only in-range values reach the cast (it truncates;
  // others would be UB). NaN compares false everywhere and becomes 0.
  const bool in_range = !below & !above & (x == x);
  To value = static_cast<To>(in_range ? x : C(0));
  value = below ? limits::min() : value;
  return above ? limits::max() : value;
}

template <typename To, typename From>
To convert_element(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_narrow_float_v<From>) {
    // Widening is exact, so everything else is a conversion from double.
    if constexpr (std::is_same_v<To, float>) {
      return to_float(x);
    } else if constexpr (std::is_same_v<To, bool>) {
      return to_float(x) != 0;
    } else {
      return convert_element<To>(to_double(x));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != 0;
  } else if constexpr (is_narrow_float_v<To>) {
    if constexpr (std::is_integral_v<From>) {
      return int_to_narrow<To>(x);
    } else if constexpr (std::is_same_v<To, bf16_t> && std::is_same_v<From, float>) {
      return bf16_t{float_to_bf16(x)};
    } else {
      return narrow_from_double<To>(x);  // f32 -> double is exact: one rounding
    }
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_int<To>(x);
  } else {
    // int -> int wraps; int -> float and float -> float round once to nearest even.
    return static_cast<To>(x);
  }
}

Step make_convert(const OpSpec& spec) {
  require_elementwise(spec, 1);
  const DType source = spec.operands[0].dtype;
  const DType target = spec.results[0].dtype;
  if (is_complex(source)) throw unsupported_type(spec, source);
  if (is_complex(target)) throw unsupported_type(spec, target);
  return dispatch_numeric(source, [&](auto from_tag) -> Step {
    // i1 is read as its 0/1 bytes (as I1, which vectorizes), converted like ui8 values.
    using From = std::conditional_t<std::is_same_v<typename decltype(from_tag)::type, bool>, I1,
                                    typename decltype(from_tag)::type>;
    return dispatch_numeric(target, [&](auto to_tag) -> Step {
      using To = typename decltype(to_tag)::type;
      return unary_step<From, To>(spec.results[0],
                                  [](From x) { return convert_element<To>(x); });
    });
  });
}

OPENHLO_KERNEL(stablehlo_convert, "stablehlo.convert", make_convert);

// ---------------------------------------------------------------------------
// bitcast_convert

// Pure data movement, so every element type works (complex included).
Step make_bitcast_convert(const OpSpec& spec) {
  require_elementwise(spec, 1);
  const DType source = spec.operands[0].dtype;
  const DType target = spec.results[0].dtype;
  // i1 is one bit wide though stored in a byte: it only bitcasts to itself.
  const bool same_width = dtype_size(source) == dtype_size(target) &&
                          (source == DType::PRED) == (target == DType::PRED);
  require(same_width, spec.name + ": element widths differ (" + dtype_name(source) + " -> " +
                          dtype_name(target) + ")");
  const Shape shape = spec.results[0].shape;
  return [target, shape](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(target, shape);
    std::memcpy(results[0].raw(), operands[0].raw(), results[0].nbytes());
  };
}

OPENHLO_KERNEL(stablehlo_bitcast_convert, "stablehlo.bitcast_convert", make_bitcast_convert);

}  // namespace
}  // namespace openhlo::cpu::elementwise
