// Native kernels of the StableHLO float math ops, convert and bitcast_convert.
//
// Semantics are the reference interpreter's (stablehlo/interpreter/elementwise_math.py,
// conversions.py):
// * the transcendental ops, atan2, rsqrt, cbrt and logistic are those of the generated
//   kernels (Note [one math for both tiers]): f64 and the 16-bit floats are evaluated in
//   double (libm) and rounded once, as the interpreter does; f32 uses the float functions of
//   codegen/mathlib.py (a few ULP from the interpreter for exp, log, tanh...); floor, ceil,
//   the roundings and sqrt are exact in f32, so f32 computes them natively (bit-identical);
// * convert: nonzero -> true; int -> int wraps; float -> int truncates toward zero,
//   saturates at the integer range and maps NaN to 0; every conversion to a float type
//   rounds once, to nearest even (int64 -> f16/bf16 too, which needs care: Note below).
// * bitcast_convert between element types of the same bit width copies the bits; the
//   width-changing forms (which add or drop a dimension) fall back to the interpreter.
#include <algorithm>
#include <limits>

#include "_generated/kernel_attrs.h"
#include "_generated/mathlib.h"
#include "kernels_elementwise.h"

namespace openhlo::cpu::elementwise {
namespace {

// ---------------------------------------------------------------------------
// Float math

// Note [one math for both tiers]
// A program runs op by op on these kernels until its generated kernels are compiled
// (tiering.py), and must give the same bits on both. So each function is defined once, in
// codegen/mathlib.py, which the generator pastes into its kernels and which writes
// _generated/mathlib.h for these: f32 calls the float version (vectorized range reduction +
// polynomial for exp/expm1/log/log1p/tanh/logistic; sin, cos, tan, cbrt, rsqrt, atan2 in
// double, rounded once), f64 and the 16-bit floats (widened exactly, rounded once) the double
// version (the C library's). Both are compiled with -ffp-contract=off.
#define OPENHLO_MATHLIB_OP(Name, function)                                     \
  struct Name {                                                               \
    static constexpr unsigned kKinds = kFloats;                               \
    static constexpr bool kMath = false;                                      \
    static constexpr int64_t kChunk = kMathChunk;                             \
    template <class C> static C on_float(C x) { return mathlib::function(x); } \
  }

OPENHLO_MATHLIB_OP(Exp, ohm_exp);
OPENHLO_MATHLIB_OP(Expm1, ohm_expm1);
OPENHLO_MATHLIB_OP(Log, ohm_log);
OPENHLO_MATHLIB_OP(Log1p, ohm_log1p);
OPENHLO_MATHLIB_OP(Logistic, ohm_logistic);
OPENHLO_MATHLIB_OP(Sin, ohm_sin);
OPENHLO_MATHLIB_OP(Cos, ohm_cos);
OPENHLO_MATHLIB_OP(Tan, ohm_tan);
OPENHLO_MATHLIB_OP(Tanh, ohm_tanh);
OPENHLO_MATHLIB_OP(Rsqrt, ohm_rsqrt);
OPENHLO_MATHLIB_OP(Cbrt, ohm_cbrt);
OPENHLO_MATHLIB_OP(Erf, ohm_erf);
OPENHLO_MATHLIB_OP(Erfc, ohm_erfc);
#undef OPENHLO_MATHLIB_OP

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
  template <class C> static C on_float(C y, C x) { return mathlib::ohm_atan2(y, x); }
};

OPENHLO_KERNEL(stablehlo_exponential, "stablehlo.exponential", make_unary<Exp>);
OPENHLO_KERNEL(stablehlo_exponential_minus_one, "stablehlo.exponential_minus_one",
               make_unary<Expm1>);
OPENHLO_KERNEL(stablehlo_log, "stablehlo.log", make_unary<Log>);
OPENHLO_KERNEL(stablehlo_log_plus_one, "stablehlo.log_plus_one", make_unary<Log1p>);
OPENHLO_KERNEL(stablehlo_logistic, "stablehlo.logistic", make_unary<Logistic>);
OPENHLO_KERNEL(stablehlo_sine, "stablehlo.sine", make_unary<Sin>);
OPENHLO_KERNEL(stablehlo_cosine, "stablehlo.cosine", make_unary<Cos>);
OPENHLO_KERNEL(stablehlo_tan, "stablehlo.tan", make_unary<Tan>);
OPENHLO_KERNEL(stablehlo_tanh, "stablehlo.tanh", make_unary<Tanh>);
OPENHLO_KERNEL(stablehlo_rsqrt, "stablehlo.rsqrt", make_unary<Rsqrt>);
OPENHLO_KERNEL(stablehlo_cbrt, "stablehlo.cbrt", make_unary<Cbrt>);
OPENHLO_KERNEL(chlo_erf, "chlo.erf", make_unary<Erf>);
OPENHLO_KERNEL(chlo_erfc, "chlo.erfc", make_unary<Erfc>);
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

// Note [4-bit integers]
// i4 and ui4 live in raw bytes (B8) with the value in the low nibble, as ml_dtypes stores
// them; the lowering names them (ConvertAttrs: four_bit_operand / four_bit_result, "i4" or
// "ui4"). A 4-bit operand converts as the int8/uint8 it holds. A 4-bit result is the
// conversion to that range: ints wrap to their low 4 bits, floats truncate toward zero and
// saturate at -8..7 (0..15 for ui4), NaN -> 0, as the interpreter does.

int four_bit_value(uint8_t byte, bool is_signed) {
  return is_signed ? ((byte & 0x0f) ^ 8) - 8 : byte & 0x0f;
}

template <typename From>
uint8_t to_four_bits(From x, bool is_signed) {
  int value;
  if constexpr (std::is_integral_v<From>) {
    value = static_cast<int>(x & 0x0f);
  } else if (is_signed) {
    value = std::clamp<int>(convert_element<int8_t>(x), -8, 7);
  } else {
    value = std::min<int>(convert_element<uint8_t>(x), 15);
  }
  return static_cast<uint8_t>(value & 0x0f);
}

Step make_four_bit_convert(const OpSpec& spec, const ConvertAttrs& a) {
  const bool four_in = !a.four_bit_operand.empty(), four_out = !a.four_bit_result.empty();
  const bool in_signed = a.four_bit_operand == "i4", out_signed = a.four_bit_result == "i4";
  require((!four_in || spec.operands[0].dtype == DType::B8) &&
              (!four_out || spec.results[0].dtype == DType::B8),
          spec.name + ": 4-bit integers are held in raw bytes");
  if (four_in && four_out) {
    return unary_step<uint8_t, uint8_t>(spec.results[0], [=](uint8_t b) {
      return to_four_bits(four_bit_value(b, in_signed), out_signed);
    });
  }
  if (four_in) {
    const DType target = spec.results[0].dtype;
    if (is_complex(target)) throw unsupported_type(spec, target);
    return dispatch_numeric(target, [&](auto to_tag) -> Step {
      using To = typename decltype(to_tag)::type;
      return unary_step<uint8_t, To>(spec.results[0], [=](uint8_t b) {
        return in_signed ? convert_element<To>(static_cast<int8_t>(four_bit_value(b, true)))
                         : convert_element<To>(static_cast<uint8_t>(four_bit_value(b, false)));
      });
    });
  }
  const DType source = spec.operands[0].dtype;
  if (is_complex(source)) throw unsupported_type(spec, source);
  return dispatch_numeric(source, [&](auto from_tag) -> Step {
    using From = std::conditional_t<std::is_same_v<typename decltype(from_tag)::type, bool>, I1,
                                    typename decltype(from_tag)::type>;
    return unary_step<From, uint8_t>(spec.results[0],
                                     [=](From x) { return to_four_bits(x, out_signed); });
  });
}

Step make_convert(const OpSpec& spec) {
  require_elementwise(spec, 1);
  const ConvertAttrs a = ConvertAttrs::decode(spec);
  if (!a.four_bit_operand.empty() || !a.four_bit_result.empty()) {
    return make_four_bit_convert(spec, a);
  }
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

// Bytes to 4-bit integers ([..., 2], the low nibble first, Note [4-bit integers]) or back.
Step make_four_bit_bitcast(const OpSpec& spec, bool unpack) {
  const TensorSpec &in = spec.operands[0], &out = spec.results[0];
  const TensorSpec& wide = unpack ? in : out;
  const TensorSpec& narrow = unpack ? out : in;
  Shape split = wide.shape;
  split.push_back(2);
  require(dtype_size(wide.dtype) == 1 && narrow.dtype == DType::B8 && narrow.shape == split,
          spec.name + ": 4-bit bitcasts pair bytes with [..., 2] nibbles");
  const int64_t bytes = num_elements(wide.shape);
  const DType dtype = out.dtype;
  const Shape shape = out.shape;
  return [=](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(dtype, shape);
    const uint8_t* x = operands[0].data<uint8_t>();
    uint8_t* y = results[0].data<uint8_t>();
    for (int64_t i = 0; i < bytes; ++i) {
      if (unpack) {
        y[2 * i] = x[i] & 0x0f;
        y[2 * i + 1] = x[i] >> 4;
      } else {
        y[i] = static_cast<uint8_t>((x[2 * i] & 0x0f) | (x[2 * i + 1] << 4));
      }
    }
  };
}

// Pure data movement, so every element type works (complex included).
Step make_bitcast_convert(const OpSpec& spec) {
  const BitcastConvertAttrs a = BitcastConvertAttrs::decode(spec);
  if (!a.four_bit_operand.empty() || !a.four_bit_result.empty()) {
    require(a.four_bit_operand.empty() || a.four_bit_result.empty(),
            spec.name + ": between two 4-bit types");
    return make_four_bit_bitcast(spec, !a.four_bit_result.empty());
  }
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
