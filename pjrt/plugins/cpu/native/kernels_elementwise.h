// Shared pieces of the elementwise kernels (kernels_elementwise.cc: arithmetic, bitwise,
// compare, select, clamp; kernels_elementwise_math.cc: float math, convert, bitcast_convert).
//
// * 16-bit floats: f16/bf16 values are widened exactly to double, computed there and rounded
//   once, to nearest even, back to 16 bits. That is what the reference interpreter does
//   (numerics.map_float + round_to), so results agree bit for bit, not just to a tolerance.
// * Element kinds: an op functor declares which kinds it accepts (kBools/kInts/kFloats);
//   make_unary/make_binary pick the typed loop for the operand's element type at compile
//   time and raise Unsupported for the rest (complex always: the interpreter handles it).
// * Loops: the op is a functor inlined into a plain loop over contiguous arrays; arrays of
//   at least twice the chunk size are split over the thread pool, smaller ones (the common
//   case for dispatch latency) run inline without touching the pool.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "array.h"
#include "kernel.h"
#include "thread_pool.h"

namespace openhlo::cpu::elementwise {

// ---------------------------------------------------------------------------
// 16-bit floats

template <typename To, typename From>
inline To bits_as(From from) {
  static_assert(sizeof(To) == sizeof(From), "bit casts need equal sizes");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// bf16 is the top half of an f32: round the low half to nearest even (a carry may reach
// the exponent, giving the next binade or infinity, as it should). Branch-free, so loops
// over it vectorize.
inline uint16_t float_to_bf16(float x) {
  const uint32_t bits = bits_as<uint32_t>(x);
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded >> 16);
}

// f32 -> f16 to nearest even; overflow gives infinity, NaN a quiet NaN. Branch-free.
inline uint16_t float_to_f16(float x) {
  const uint32_t bits = bits_as<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  // Normal results: rebias the exponent (127 -> 15) and round away the 13 extra bits, ties
  // to even; a carry moves into the exponent (up to infinity for [65520, 65536)).
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t normal = (magnitude - (112u << 23) + 0xfffu + odd) >> 13;
  // Below 2^-14 the result is subnormal, a multiple of 2^-24: adding 0.5 puts that grid at
  // the f32's last place, so the addition itself rounds (to nearest even).
  const uint32_t subnormal = bits_as<uint32_t>(bits_as<float>(magnitude) + 0.5f) - 0x3f000000u;
  uint32_t result = magnitude < (113u << 23) ? subnormal : normal;
  result = magnitude >= (143u << 23) ? 0x7c00u : result;  // |x| >= 2^16, inf: infinity
  result = magnitude > 0x7f800000u ? 0x7e00u : result;    // NaN
  return static_cast<uint16_t>(result | sign);
}

// Note [double rounding]
// Rounding double -> f32 -> f16/bf16 to nearest twice can go wrong: a value just above a
// 16-bit tie first rounds onto the tie, then to even. Rounding the first step *to odd*
// (truncate, then set the last bit when inexact) keeps that information, which makes the
// second rounding exact whenever f32 has at least two more significand bits than the target
// (also on the fixed grid of the f16 subnormals).
inline float double_to_float_odd(double x) {
  const float nearest = static_cast<float>(x);
  uint32_t bits = bits_as<uint32_t>(nearest);
  const double back = static_cast<double>(nearest);
  bits -= static_cast<uint32_t>(std::fabs(back) > std::fabs(x));  // toward zero (magnitude - 1)
  bits |= static_cast<uint32_t>(back != x);  // inexact (or NaN, which stays NaN)
  return bits_as<float>(bits);
}

// Branch-free (vectorizable) and correctly rounded, see Note [double rounding].
inline uint16_t double_to_bf16(double x) { return float_to_bf16(double_to_float_odd(x)); }
inline uint16_t double_to_f16(double x) { return float_to_f16(double_to_float_odd(x)); }

inline float bf16_to_float(uint16_t h) { return bits_as<float>(static_cast<uint32_t>(h) << 16); }

// Exact (every f16 is an f32) and branch-free.
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;  // at the f32 positions
  const uint32_t exp = shifted & 0x0f800000u;
  const uint32_t normal = shifted + (112u << 23);    // rebias 15 -> 127
  const uint32_t inf_nan = shifted + (224u << 23);   // exponent 31 -> 255
  // Zero and subnormals, mant * 2^-24: as the normal 2^-14 * (1 + mant / 2^10) - 2^-14.
  const float subnormal = bits_as<float>(shifted + (113u << 23)) - 0x1p-14f;
  uint32_t magnitude = exp == 0x0f800000u ? inf_nan : normal;
  magnitude = exp == 0 ? bits_as<uint32_t>(subnormal) : magnitude;
  return bits_as<float>(magnitude | sign);
}

inline double to_double(f16_t x) { return f16_to_float(x.bits); }
inline double to_double(bf16_t x) { return bf16_to_float(x.bits); }
inline float to_float(f16_t x) { return f16_to_float(x.bits); }
inline float to_float(bf16_t x) { return bf16_to_float(x.bits); }

// The 16-bit float type N rounded from a double.
template <typename N>
inline N narrow_from_double(double x) {
  if constexpr (std::is_same_v<N, f16_t>) {
    return f16_t{double_to_f16(x)};
  } else {
    return bf16_t{double_to_bf16(x)};
  }
}

template <typename T>
inline constexpr bool is_narrow_float_v = std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;

// ---------------------------------------------------------------------------
// Element kinds and dispatch

enum KindMask : unsigned {
  kBools = 1,
  kSignedInts = 2,
  kUnsignedInts = 4,
  kInts = kSignedInts | kUnsignedInts,
  kFloats = 8,
};

// i1 elements as loops read them: bytes holding 0 or 1. GCC does not vectorize loops over
// bool values (it must keep them 0/1), but does over bytes combined with | & ^.
using I1 = uint8_t;

// Whether KindMask `kinds` admits the integer type T.
template <typename T>
constexpr bool accepts_int(unsigned kinds) {
  return (kinds & (std::is_signed_v<T> ? kSignedInts : kUnsignedInts)) != 0;
}

inline bool is_complex(DType dtype) { return dtype == DType::C64 || dtype == DType::C128; }

// Like dispatch_real, plus f16_t/bf16_t for the 16-bit floats (complex still throws).
template <typename Fn>
auto dispatch_numeric(DType dtype, Fn&& fn) {
  if (dtype == DType::F16) return fn(TypeTag<f16_t>{});
  if (dtype == DType::BF16) return fn(TypeTag<bf16_t>{});
  return dispatch_real(dtype, std::forward<Fn>(fn));
}

inline Unsupported unsupported_type(const OpSpec& spec, DType dtype) {
  return Unsupported(spec.name + ": no native kernel for element type " + dtype_name(dtype));
}

// One result and `arity` operands; every operand and the result have the result's shape.
inline void require_elementwise(const OpSpec& spec, size_t arity) {
  require(spec.operands.size() == arity && spec.results.size() == 1,
          spec.name + ": unexpected operand or result count");
  for (const TensorSpec& operand : spec.operands) {
    require(operand.shape == spec.results[0].shape, spec.name + ": operand shapes differ");
  }
}

// ---------------------------------------------------------------------------
// Loops

// Chunk sizes (elements) for parallel_for: cheap ops (a few cycles per element) need big
// chunks to pay for waking a thread; libm calls cost ~10-50 ns each, so smaller ones do.
constexpr int64_t kCheapChunk = int64_t{1} << 15;
constexpr int64_t kMathChunk = int64_t{1} << 12;

// body(begin, end) over [0, n): inline below two chunks, else on the pool.
template <typename Body>
inline void run_range(int64_t n, int64_t chunk, const Body& body) {
  if (n < 2 * chunk) {
    body(int64_t{0}, n);
  } else {
    parallel_for(n, chunk, body);
  }
}

// The loops get their arrays as restrict parameters, not as a closure's captures: a
// byte-sized store could alias a captured pointer, and GCC then gives up vectorizing every
// 8-bit loop.
template <typename In, typename Out, typename F>
inline void map_unary(const In* __restrict x, Out* __restrict y, int64_t begin, int64_t end,
                      F f) {
  for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
}

template <typename In, typename Out, typename F>
inline void map_binary(const In* __restrict a, const In* __restrict b, Out* __restrict y,
                       int64_t begin, int64_t end, F f) {
  for (int64_t i = begin; i < end; ++i) y[i] = f(a[i], b[i]);
}

// The same loops over a result that is one of the operands (its storage taken over): each
// element is read before it is written, but the arrays alias, so no restrict.
template <typename T, typename F>
inline void map_unary_in_place(T* y, int64_t begin, int64_t end, F f) {
  for (int64_t i = begin; i < end; ++i) y[i] = f(y[i]);
}

template <typename T, typename F>
inline void map_binary_in_place(const T* a, const T* b, T* y, int64_t begin, int64_t end,
                                F f) {
  for (int64_t i = begin; i < end; ++i) y[i] = f(a[i], b[i]);
}

// The operand whose storage the result may take over (can_take_over), or -1: the steps
// below try it when the element types match, so a loop of the executor reuses a carried
// value's storage instead of allocating a new array per op and iteration.
inline int taken_operand(const Array* operands, int arity, size_t nbytes) {
  for (int k = 0; k < arity; ++k) {
    if (can_take_over(operands[k], nbytes)) return k;
  }
  return -1;
}

// A step computing results[0][i] = f(operands[0][i]).
template <typename In, typename Out, typename F>
Step unary_step(const TensorSpec& result, F f, int64_t chunk = kCheapChunk) {
  const DType dtype = result.dtype;
  const Shape shape = result.shape;
  const int64_t n = num_elements(shape);
  const size_t nbytes = num_bytes(dtype, shape);
  return [=](ExecContext&, const Array* operands, Array* results) {
    if constexpr (std::is_same_v<In, Out>) {
      if (taken_operand(operands, 1, nbytes) == 0) {
        results[0] = Array{dtype, shape, operands[0].storage};
        Out* y = results[0].data<Out>();
        run_range(n, chunk,
                  [=](int64_t begin, int64_t end) { map_unary_in_place(y, begin, end, f); });
        return;
      }
    }
    results[0] = allocate(dtype, shape);
    const In* x = operands[0].data<In>();
    Out* y = results[0].data<Out>();
    run_range(n, chunk, [=](int64_t begin, int64_t end) { map_unary(x, y, begin, end, f); });
  };
}

// A step computing results[0][i] = f(operands[0][i], operands[1][i]).
template <typename In, typename Out, typename F>
Step binary_step(const TensorSpec& result, F f, int64_t chunk = kCheapChunk) {
  const DType dtype = result.dtype;
  const Shape shape = result.shape;
  const int64_t n = num_elements(shape);
  const size_t nbytes = num_bytes(dtype, shape);
  return [=](ExecContext&, const Array* operands, Array* results) {
    const In* a = operands[0].data<In>();
    const In* b = operands[1].data<In>();
    if constexpr (std::is_same_v<In, Out>) {
      const int taken = taken_operand(operands, 2, nbytes);
      if (taken >= 0) {
        results[0] = Array{dtype, shape, operands[taken].storage};
        Out* y = results[0].data<Out>();
        run_range(n, chunk, [=](int64_t begin, int64_t end) {
          map_binary_in_place(a, b, y, begin, end, f);
        });
        return;
      }
    }
    results[0] = allocate(dtype, shape);
    Out* y = results[0].data<Out>();
    run_range(n, chunk, [=](int64_t begin, int64_t end) { map_binary(a, b, y, begin, end, f); });
  };
}

// ---------------------------------------------------------------------------
// Functor-driven factories
//
// An op functor Op provides:
//   static constexpr unsigned kKinds;   // KindMask bits it accepts
//   static constexpr bool kMath;        // f32 computed in double and rounded once (the
//                                       // interpreter's map_float), not natively
//   static I1 on_bool(I1...);           // if kBools: 0/1 bytes, bitwise ops
//   template <class T> static T on_int(T...);    // if kSignedInts/kUnsignedInts
//   template <class C> static C on_float(C...);  // if kFloats: C = float or double
// Optionally `static constexpr int64_t kChunk` (default kCheapChunk).

template <typename Op, typename = void>
struct ChunkOf {
  static constexpr int64_t value = kCheapChunk;
};
template <typename Op>
struct ChunkOf<Op, std::void_t<decltype(Op::kChunk)>> {
  static constexpr int64_t value = Op::kChunk;
};

template <typename Op>
Step make_binary(const OpSpec& spec) {
  require_elementwise(spec, 2);
  const DType dtype = spec.operands[0].dtype;
  const TensorSpec& result = spec.results[0];
  require(spec.operands[1].dtype == dtype && result.dtype == dtype,
          spec.name + ": operand and result element types differ");
  if (is_complex(dtype)) throw unsupported_type(spec, dtype);
  constexpr int64_t chunk = ChunkOf<Op>::value;
  return dispatch_numeric(dtype, [&](auto tag) -> Step {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr ((Op::kKinds & kBools) != 0) {
        return binary_step<I1, I1>(result, [](I1 a, I1 b) { return Op::on_bool(a, b); }, chunk);
      }
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (accepts_int<T>(Op::kKinds)) {
        return binary_step<T, T>(result, [](T a, T b) { return Op::template on_int<T>(a, b); },
                                 chunk);
      }
    } else if constexpr ((Op::kKinds & kFloats) != 0) {
      if constexpr (is_narrow_float_v<T>) {
        return binary_step<T, T>(result, [](T a, T b) {
          return narrow_from_double<T>(Op::template on_float<double>(to_double(a), to_double(b)));
        }, chunk);
      } else if constexpr (Op::kMath && std::is_same_v<T, float>) {
        return binary_step<T, T>(result, [](T a, T b) {
          return static_cast<float>(Op::template on_float<double>(a, b));
        }, chunk);
      } else {
        return binary_step<T, T>(result, [](T a, T b) { return Op::template on_float<T>(a, b); },
                                 chunk);
      }
    }
    throw unsupported_type(spec, dtype);
  });
}

// Unary ops; the result element type is the operand's unless Op declares
// `static constexpr bool kPredResult = true` (is_finite).
template <typename Op, typename = void>
struct PredResult : std::false_type {};
template <typename Op>
struct PredResult<Op, std::void_t<decltype(Op::kPredResult)>>
    : std::bool_constant<Op::kPredResult> {};

template <typename Op>
Step make_unary(const OpSpec& spec) {
  require_elementwise(spec, 1);
  const DType dtype = spec.operands[0].dtype;
  const TensorSpec& result = spec.results[0];
  constexpr bool pred_result = PredResult<Op>::value;
  require(result.dtype == (pred_result ? DType::PRED : dtype),
          spec.name + ": unexpected result element type");
  if (is_complex(dtype)) throw unsupported_type(spec, dtype);
  constexpr int64_t chunk = ChunkOf<Op>::value;
  return dispatch_numeric(dtype, [&](auto tag) -> Step {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<pred_result, bool, T>;
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr ((Op::kKinds & kBools) != 0) {
        return unary_step<I1, I1>(result, [](I1 a) { return Op::on_bool(a); }, chunk);
      }
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (accepts_int<T>(Op::kKinds)) {
        return unary_step<T, R>(result, [](T a) { return Op::template on_int<T>(a); }, chunk);
      }
    } else if constexpr ((Op::kKinds & kFloats) != 0) {
      if constexpr (is_narrow_float_v<T> && pred_result) {
        return unary_step<T, R>(result, [](T a) {
          return Op::template on_float<double>(to_double(a));
        }, chunk);
      } else if constexpr (is_narrow_float_v<T>) {
        return unary_step<T, R>(result, [](T a) {
          return narrow_from_double<T>(Op::template on_float<double>(to_double(a)));
        }, chunk);
      } else if constexpr (Op::kMath && std::is_same_v<T, float>) {
        return unary_step<T, R>(result, [](T a) {
          return static_cast<R>(Op::template on_float<double>(a));
        }, chunk);
      } else {
        return unary_step<T, R>(result, [](T a) { return Op::template on_float<T>(a); }, chunk);
      }
    }
    throw unsupported_type(spec, dtype);
  });
}

}  // namespace openhlo::cpu::elementwise
