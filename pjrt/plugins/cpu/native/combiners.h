// The simple reducer regions (attrs.py:region_attrs "combiner") as typed C++ operations,
// shared by the reduction kernels and the collectives. Semantics are numpy's ufuncs, as the
// reference interpreter applies them: integers wrap, bool add/max are or and multiply/min
// are and, and float max/min let NaN win.
#pragma once

#include <string>
#include <type_traits>

#include "array.h"
#include "kernel.h"

namespace openhlo::cpu {

enum class Comb { kAdd, kMul, kMax, kMin, kAnd, kOr, kXor };

// `name` is the combiner field of the op's attribute record ("" when there is none).
inline Comb parse_combiner(const std::string& name) {
  if (name == "stablehlo.add") return Comb::kAdd;
  if (name == "stablehlo.multiply") return Comb::kMul;
  if (name == "stablehlo.maximum") return Comb::kMax;
  if (name == "stablehlo.minimum") return Comb::kMin;
  if (name == "stablehlo.and") return Comb::kAnd;
  if (name == "stablehlo.or") return Comb::kOr;
  if (name == "stablehlo.xor") return Comb::kXor;
  throw Unsupported("region is not one add/multiply/maximum/minimum/and/or/xor per operand "
                    "pair");
}

// Integer arithmetic in the unsigned type of at least int's width: wraps without UB (a
// uint16 product promoted to int could overflow).
template <typename T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <Comb C, typename T>
inline T combine(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    if constexpr (C == Comb::kAdd || C == Comb::kMax || C == Comb::kOr) return a || b;
    if constexpr (C == Comb::kMul || C == Comb::kMin || C == Comb::kAnd) return a && b;
    if constexpr (C == Comb::kXor) return a != b;
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (C == Comb::kAdd) return a + b;
    if constexpr (C == Comb::kMul) return a * b;
    // NaN wins, as with numpy's maximum/minimum.
    if constexpr (C == Comb::kMax) return (a > b || a != a) ? a : b;
    if constexpr (C == Comb::kMin) return (a < b || a != a) ? a : b;
  } else {
    using W = WrapT<T>;
    if constexpr (C == Comb::kAdd) return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
    if constexpr (C == Comb::kMul) return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    if constexpr (C == Comb::kMax) return a > b ? a : b;
    if constexpr (C == Comb::kMin) return a < b ? a : b;
    if constexpr (C == Comb::kAnd) return a & b;
    if constexpr (C == Comb::kOr) return a | b;
    if constexpr (C == Comb::kXor) return a ^ b;
  }
}

// Calls fn(TypeTag<T>, integral_constant<Comb, C>) for a supported (dtype, combiner) pair.
template <typename Fn>
auto dispatch_combiner(DType dtype, Comb comb, Fn&& fn) {
  return dispatch_real(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (comb) {
      case Comb::kAdd: return fn(tag, std::integral_constant<Comb, Comb::kAdd>{});
      case Comb::kMul: return fn(tag, std::integral_constant<Comb, Comb::kMul>{});
      case Comb::kMax: return fn(tag, std::integral_constant<Comb, Comb::kMax>{});
      case Comb::kMin: return fn(tag, std::integral_constant<Comb, Comb::kMin>{});
      default: break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      throw Unsupported(std::string("bitwise reducer on ") + dtype_name(dtype));
    } else {
      switch (comb) {
        case Comb::kAnd: return fn(tag, std::integral_constant<Comb, Comb::kAnd>{});
        case Comb::kOr: return fn(tag, std::integral_constant<Comb, Comb::kOr>{});
        default: return fn(tag, std::integral_constant<Comb, Comb::kXor>{});
      }
    }
  });
}

}  // namespace openhlo::cpu
