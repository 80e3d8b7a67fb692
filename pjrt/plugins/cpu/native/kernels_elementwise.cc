// Native kernels of the StableHLO arithmetic, bitwise, compare, select and clamp ops.
//
// Semantics are the reference interpreter's (stablehlo/interpreter/elementwise.py), which
// follows XLA where the spec is open:
// * integers wrap around (computed in unsigned arithmetic: signed overflow is UB in C++);
// * integer x / 0 is -1 (all bits set) and x % 0 is x; INT_MIN / -1 is INT_MIN and
//   INT_MIN % -1 is 0; power with a negative exponent is 0 except for bases 1 and -1;
// * shift amounts are read as unsigned; amounts >= the bit width give 0, or the sign fill
//   for shift_right_arithmetic (which reads unsigned operands as signed too);
// * maximum/minimum propagate NaN (the lhs NaN when both are) and order -0 below +0;
// * bool add/multiply/maximum/minimum are or/and/or/and; abs(INT_MIN) is INT_MIN; sign
//   returns NaN and signed zeros unchanged.
// f32/f64 +, -, *, /, fmod are IEEE-exact natively; power and the transcendental ops compute
// f32 in double and round once, as the interpreter does (kMath). f16/bf16: see the header.
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <limits>

#include "_generated/kernel_attrs.h"
#include "_generated/mathlib.h"
#include "kernels_elementwise.h"

namespace openhlo::cpu::elementwise {
namespace {

// Unsigned type at least as wide as int, so that arithmetic on it never promotes to int
// (uint16 * uint16 would, and overflow).
template <typename T>
using Wide = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

// ---------------------------------------------------------------------------
// Binary arithmetic

struct Add {
  static constexpr unsigned kKinds = kBools | kInts | kFloats;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a | b; }
  template <class T> static T on_int(T a, T b) { return static_cast<T>(Wide<T>(a) + Wide<T>(b)); }
  template <class C> static C on_float(C a, C b) { return a + b; }
};

struct Subtract {
  static constexpr unsigned kKinds = kInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) { return static_cast<T>(Wide<T>(a) - Wide<T>(b)); }
  template <class C> static C on_float(C a, C b) { return a - b; }
};

struct Multiply {
  static constexpr unsigned kKinds = kBools | kInts | kFloats;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a & b; }
  template <class T> static T on_int(T a, T b) { return static_cast<T>(Wide<T>(a) * Wide<T>(b)); }
  template <class C> static C on_float(C a, C b) { return a * b; }
};

// INT_MIN / -1 and INT_MIN % -1 overflow (UB) in C++; they are the only such case.
template <class T>
bool is_min_over_minus_one(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    return a == std::numeric_limits<T>::min() && b == T(-1);
  } else {
    return false;
  }
}

struct Divide {
  static constexpr unsigned kKinds = kInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) {
    if (b == 0) return static_cast<T>(~T(0));
    if (is_min_over_minus_one(a, b)) return a;
    return static_cast<T>(a / b);
  }
  template <class C> static C on_float(C a, C b) { return a / b; }
};

struct Remainder {
  static constexpr unsigned kKinds = kInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) {
    if (b == 0) return a;
    if (is_min_over_minus_one(a, b)) return 0;
    return static_cast<T>(a % b);  // truncated: the sign of the dividend, like fmod
  }
  template <class C> static C on_float(C a, C b) { return std::fmod(a, b); }
};

struct Power {
  static constexpr unsigned kKinds = kInts | kFloats;
  static constexpr bool kMath = true;
  static constexpr int64_t kChunk = kMathChunk;
  template <class T> static T on_int(T base, T exponent) {
    if constexpr (std::is_signed_v<T>) {
      // 1 / base^n truncates to 0 unless |base| == 1.
      if (exponent < 0) {
        if (base == 1) return 1;
        if (base == T(-1)) return (exponent & 1) != 0 ? T(-1) : T(1);
        return 0;
      }
    }
    // Square-and-multiply modulo 2^64, which wraps correctly to every narrower width.
    uint64_t result = 1;
    uint64_t square = static_cast<uint64_t>(base);
    for (auto e = static_cast<std::make_unsigned_t<T>>(exponent); e != 0; e >>= 1) {
      if ((e & 1) != 0) result *= square;
      square *= square;
    }
    return static_cast<T>(result);
  }
  template <class C> static C on_float(C a, C b) { return mathlib::ohm_pow(a, b); }
};

// The sign bit read from the bits: std::signbit on double stops GCC from vectorizing.
template <class C>
bool sign_bit(C x) {
  return bits_as<std::conditional_t<sizeof(C) == 4, int32_t, int64_t>>(x) < 0;
}

// IEEE maximum/minimum: NaN wins (the lhs one first), -0 < +0. Written as a chain of
// selects, which GCC vectorizes also when clamp nests them.
struct Maximum {
  static constexpr unsigned kKinds = kBools | kInts | kFloats;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a | b; }
  template <class T> static T on_int(T a, T b) { return a > b ? a : b; }
  template <class C> static C on_float(C a, C b) {
    C result = a > b ? a : b;
    result = a == b ? (sign_bit(a) ? b : a) : result;
    return a != a ? a : result;
  }
};

struct Minimum {
  static constexpr unsigned kKinds = kBools | kInts | kFloats;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a & b; }
  template <class T> static T on_int(T a, T b) { return a < b ? a : b; }
  template <class C> static C on_float(C a, C b) {
    C result = a < b ? a : b;
    result = a == b ? (sign_bit(a) ? a : b) : result;
    return a != a ? a : result;
  }
};

// ---------------------------------------------------------------------------
// Bitwise and logical

struct And {
  static constexpr unsigned kKinds = kBools | kInts;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a & b; }
  template <class T> static T on_int(T a, T b) { return static_cast<T>(a & b); }
};

struct Or {
  static constexpr unsigned kKinds = kBools | kInts;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a | b; }
  template <class T> static T on_int(T a, T b) { return static_cast<T>(a | b); }
};

struct Xor {
  static constexpr unsigned kKinds = kBools | kInts;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a, uint8_t b) { return a ^ b; }
  template <class T> static T on_int(T a, T b) { return static_cast<T>(a ^ b); }
};

template <class T>
constexpr unsigned kBitWidth = sizeof(T) * 8;

struct ShiftLeft {
  static constexpr unsigned kKinds = kInts;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) {
    const auto amount = static_cast<std::make_unsigned_t<T>>(b);
    if (amount >= kBitWidth<T>) return 0;
    return static_cast<T>(static_cast<Wide<T>>(static_cast<std::make_unsigned_t<T>>(a)) << amount);
  }
};

struct ShiftRightLogical {
  static constexpr unsigned kKinds = kInts;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) {
    using U = std::make_unsigned_t<T>;
    const auto amount = static_cast<U>(b);
    if (amount >= kBitWidth<T>) return 0;
    return static_cast<T>(static_cast<U>(a) >> amount);
  }
};

struct ShiftRightArithmetic {
  static constexpr unsigned kKinds = kInts;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a, T b) {
    using U = std::make_unsigned_t<T>;
    const U amount = std::min<U>(static_cast<U>(b), static_cast<U>(kBitWidth<T> - 1));
    return static_cast<T>(static_cast<std::make_signed_t<T>>(a) >> amount);
  }
};

// ---------------------------------------------------------------------------
// Unary integer and sign ops (the float math is in kernels_elementwise_math.cc)

struct Negate {
  static constexpr unsigned kKinds = kInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a) { return static_cast<T>(Wide<T>(0) - Wide<T>(a)); }
  template <class C> static C on_float(C a) { return -a; }
};

// abs and sign take signed integers only (the verifier rejects unsigned ones).
struct Abs {
  static constexpr unsigned kKinds = kSignedInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a) { return a < 0 ? Negate::on_int(a) : a; }  // INT_MIN too
  template <class C> static C on_float(C a) { return std::fabs(a); }
};

struct Sign {
  static constexpr unsigned kKinds = kSignedInts | kFloats;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a) { return static_cast<T>((a > 0) - (a < 0)); }
  template <class C> static C on_float(C a) {
    if (std::isnan(a) || a == 0) return a;
    return a < 0 ? C(-1) : C(1);
  }
};

struct Not {
  static constexpr unsigned kKinds = kBools | kInts;
  static constexpr bool kMath = false;
  static uint8_t on_bool(uint8_t a) { return a ^ 1; }
  template <class T> static T on_int(T a) { return static_cast<T>(~a); }
};

struct Popcnt {
  static constexpr unsigned kKinds = kInts;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a) {
    return static_cast<T>(__builtin_popcountll(static_cast<std::make_unsigned_t<T>>(a)));
  }
};

struct CountLeadingZeros {
  static constexpr unsigned kKinds = kInts;
  static constexpr bool kMath = false;
  template <class T> static T on_int(T a) {
    const uint64_t bits = static_cast<std::make_unsigned_t<T>>(a);
    if (bits == 0) return static_cast<T>(kBitWidth<T>);
    return static_cast<T>(__builtin_clzll(bits) - (64 - kBitWidth<T>));
  }
};

OPENHLO_KERNEL(stablehlo_add, "stablehlo.add", make_binary<Add>);
OPENHLO_KERNEL(stablehlo_subtract, "stablehlo.subtract", make_binary<Subtract>);
OPENHLO_KERNEL(stablehlo_multiply, "stablehlo.multiply", make_binary<Multiply>);
OPENHLO_KERNEL(stablehlo_divide, "stablehlo.divide", make_binary<Divide>);
OPENHLO_KERNEL(stablehlo_remainder, "stablehlo.remainder", make_binary<Remainder>);
OPENHLO_KERNEL(stablehlo_power, "stablehlo.power", make_binary<Power>);
OPENHLO_KERNEL(stablehlo_maximum, "stablehlo.maximum", make_binary<Maximum>);
OPENHLO_KERNEL(stablehlo_minimum, "stablehlo.minimum", make_binary<Minimum>);
OPENHLO_KERNEL(stablehlo_and, "stablehlo.and", make_binary<And>);
OPENHLO_KERNEL(stablehlo_or, "stablehlo.or", make_binary<Or>);
OPENHLO_KERNEL(stablehlo_xor, "stablehlo.xor", make_binary<Xor>);
OPENHLO_KERNEL(stablehlo_shift_left, "stablehlo.shift_left", make_binary<ShiftLeft>);
OPENHLO_KERNEL(stablehlo_shift_right_logical, "stablehlo.shift_right_logical",
               make_binary<ShiftRightLogical>);
OPENHLO_KERNEL(stablehlo_shift_right_arithmetic, "stablehlo.shift_right_arithmetic",
               make_binary<ShiftRightArithmetic>);
OPENHLO_KERNEL(stablehlo_negate, "stablehlo.negate", make_unary<Negate>);
OPENHLO_KERNEL(stablehlo_abs, "stablehlo.abs", make_unary<Abs>);
OPENHLO_KERNEL(stablehlo_sign, "stablehlo.sign", make_unary<Sign>);
OPENHLO_KERNEL(stablehlo_not, "stablehlo.not", make_unary<Not>);
OPENHLO_KERNEL(stablehlo_popcnt, "stablehlo.popcnt", make_unary<Popcnt>);
OPENHLO_KERNEL(stablehlo_count_leading_zeros, "stablehlo.count_leading_zeros",
               make_unary<CountLeadingZeros>);

// ---------------------------------------------------------------------------
// compare

// key(a) cmp key(b) for every element.
template <typename In, typename KeyFn, typename Cmp>
Step compare_keys(const TensorSpec& result, KeyFn key, Cmp cmp) {
  return binary_step<In, bool>(result, [key, cmp](In a, In b) { return cmp(key(a), key(b)); });
}

template <typename In, typename KeyFn>
Step compare_step(const OpSpec& spec, const std::string& direction, KeyFn key) {
  const TensorSpec& result = spec.results[0];
  if (direction == "EQ") return compare_keys<In>(result, key, std::equal_to<>());
  if (direction == "NE") return compare_keys<In>(result, key, std::not_equal_to<>());
  if (direction == "LT") return compare_keys<In>(result, key, std::less<>());
  if (direction == "LE") return compare_keys<In>(result, key, std::less_equal<>());
  if (direction == "GT") return compare_keys<In>(result, key, std::greater<>());
  if (direction == "GE") return compare_keys<In>(result, key, std::greater_equal<>());
  throw Unsupported(spec.name + ": unknown comparison_direction " + direction);
}

// IEEE totalOrder as a signed integer key of the float's width:
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. Negative floats order reversed, so their
// magnitude bits are complemented (~m == -m - 1).
template <typename Bits>
std::make_signed_t<Bits> total_order_key(Bits bits) {
  using S = std::make_signed_t<Bits>;
  const auto magnitude = static_cast<S>(bits & (std::numeric_limits<S>::max()));
  return static_cast<S>(bits) < 0 ? static_cast<S>(~magnitude) : magnitude;
}

template <typename T>
auto float_bits(T x) {
  if constexpr (is_narrow_float_v<T>) {
    return x.bits;
  } else if constexpr (std::is_same_v<T, float>) {
    return bits_as<uint32_t>(x);
  } else {
    return bits_as<uint64_t>(x);
  }
}

Step make_compare(const OpSpec& spec) {
  require_elementwise(spec, 2);
  const DType dtype = spec.operands[0].dtype;
  require(spec.operands[1].dtype == dtype && spec.results[0].dtype == DType::PRED,
          spec.name + ": unexpected element types");
  if (is_complex(dtype)) throw unsupported_type(spec, dtype);
  const CompareAttrs a = CompareAttrs::decode(spec);
  const std::string& direction = a.comparison_direction;
  const std::string& compare_type = a.compare_type;
  // The verifier only admits the compare_type of the element kind (SIGNED for signed
  // integers, UNSIGNED for unsigned and i1, FLOAT or TOTALORDER for floats) or none.
  const auto require_type = [&](std::initializer_list<const char*> allowed) {
    if (compare_type.empty() || compare_type == "NOTYPE") return;
    for (const char* name : allowed) {
      if (compare_type == name) return;
    }
    throw Unsupported(spec.name + ": compare_type " + compare_type + " on " + dtype_name(dtype));
  };
  return dispatch_numeric(dtype, [&](auto tag) -> Step {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      require_type({"UNSIGNED"});
      return compare_step<I1>(spec, direction, [](I1 x) { return x; });
    } else if constexpr (std::is_integral_v<T>) {
      require_type({std::is_signed_v<T> ? "SIGNED" : "UNSIGNED"});
      return compare_step<T>(spec, direction, [](T x) { return x; });
    } else {
      require_type({"FLOAT", "TOTALORDER"});
      if (compare_type == "TOTALORDER") {
        return compare_step<T>(spec, direction, [](T x) { return total_order_key(float_bits(x)); });
      }
      if constexpr (is_narrow_float_v<T>) {
        return compare_step<T>(spec, direction, [](T x) { return to_float(x); });
      } else {
        return compare_step<T>(spec, direction, [](T x) { return x; });
      }
    }
  });
}

OPENHLO_KERNEL(stablehlo_compare, "stablehlo.compare", make_compare);

// ---------------------------------------------------------------------------
// select

// Both loads are unconditional and the predicate is read as bytes: `p[i] != 0` then
// vectorizes as a mask and blend (a bool load or a branch would not).
template <typename T>
void select_loop(const uint8_t* __restrict p, const T* __restrict on_true,
                 const T* __restrict on_false, T* __restrict y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const T t = on_true[i];
    const T f = on_false[i];
    y[i] = p[i] != 0 ? t : f;
  }
}

// Pure data movement, so every element type works (complex included).
Step make_select(const OpSpec& spec) {
  require(spec.operands.size() == 3 && spec.results.size() == 1,
          spec.name + ": unexpected operand or result count");
  const TensorSpec& pred = spec.operands[0];
  const TensorSpec& result = spec.results[0];
  require(pred.dtype == DType::PRED, spec.name + ": predicate must be i1");
  for (size_t i = 1; i < 3; ++i) {
    require(spec.operands[i].dtype == result.dtype && spec.operands[i].shape == result.shape,
            spec.name + ": branch types differ from the result");
  }
  const DType dtype = result.dtype;
  const Shape shape = result.shape;
  if (pred.shape.empty() && !shape.empty()) {
    // A scalar predicate picks a whole operand.
    return [dtype, shape](ExecContext&, const Array* operands, Array* results) {
      const Array& chosen = operands[operands[0].data<bool>()[0] ? 1 : 2];
      results[0] = allocate(dtype, shape);
      std::memcpy(results[0].raw(), chosen.raw(), results[0].nbytes());
    };
  }
  require(pred.shape == shape, spec.name + ": predicate shape differs from the result");
  const int64_t n = num_elements(shape);
  return dispatch_bytes(dtype, [&](auto tag) -> Step {
    using T = typename decltype(tag)::type;
    return [dtype, shape, n](ExecContext&, const Array* operands, Array* results) {
      results[0] = allocate(dtype, shape);
      const uint8_t* p = operands[0].data<uint8_t>();
      const T* on_true = operands[1].data<T>();
      const T* on_false = operands[2].data<T>();
      T* y = results[0].data<T>();
      run_range(n, kCheapChunk, [=](int64_t begin, int64_t end) {
        select_loop(p, on_true, on_false, y, begin, end);
      });
    };
  });
}

OPENHLO_KERNEL(stablehlo_select, "stablehlo.select", make_select);

// ---------------------------------------------------------------------------
// clamp: minimum(maximum(operand, min), max); min and max may be scalars.

template <typename T, bool kScalarLow, bool kScalarHigh, typename F>
void clamp_loop(const T* __restrict low, const T* __restrict x, const T* __restrict high,
                T* __restrict y, int64_t begin, int64_t end, F clamp_one) {
  for (int64_t i = begin; i < end; ++i) {
    y[i] = clamp_one(low[kScalarLow ? 0 : i], x[i], high[kScalarHigh ? 0 : i]);
  }
}

template <typename T, bool kScalarLow, bool kScalarHigh, typename F>
Step clamp_step(const TensorSpec& result, F clamp_one) {
  const DType dtype = result.dtype;
  const Shape shape = result.shape;
  const int64_t n = num_elements(shape);
  return [=](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(dtype, shape);
    const T* low = operands[0].data<T>();
    const T* x = operands[1].data<T>();
    const T* high = operands[2].data<T>();
    T* y = results[0].data<T>();
    run_range(n, kCheapChunk, [=](int64_t begin, int64_t end) {
      clamp_loop<T, kScalarLow, kScalarHigh>(low, x, high, y, begin, end, clamp_one);
    });
  };
}

template <typename T, typename F>
Step clamp_for_shapes(const TensorSpec& result, bool scalar_low, bool scalar_high, F clamp_one) {
  if (scalar_low && scalar_high) return clamp_step<T, true, true>(result, clamp_one);
  if (scalar_low) return clamp_step<T, true, false>(result, clamp_one);
  if (scalar_high) return clamp_step<T, false, true>(result, clamp_one);
  return clamp_step<T, false, false>(result, clamp_one);
}

Step make_clamp(const OpSpec& spec) {
  require(spec.operands.size() == 3 && spec.results.size() == 1,
          spec.name + ": unexpected operand or result count");
  const TensorSpec& result = spec.results[0];
  const DType dtype = result.dtype;
  bool scalar[3];
  for (size_t i = 0; i < 3; ++i) {
    const TensorSpec& operand = spec.operands[i];
    require(operand.dtype == dtype, spec.name + ": operand element types differ");
    scalar[i] = operand.shape.empty() && !result.shape.empty();
    require(scalar[i] || operand.shape == result.shape, spec.name + ": operand shapes differ");
  }
  require(!scalar[1], spec.name + ": operand shape differs from the result");
  if (is_complex(dtype)) throw unsupported_type(spec, dtype);
  return dispatch_numeric(dtype, [&](auto tag) -> Step {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return clamp_for_shapes<I1>(result, scalar[0], scalar[2], [](I1 lo, I1 x, I1 hi) {
        return Minimum::on_bool(Maximum::on_bool(x, lo), hi);
      });
    } else if constexpr (std::is_integral_v<T>) {
      return clamp_for_shapes<T>(result, scalar[0], scalar[2], [](T lo, T x, T hi) {
        return Minimum::on_int(Maximum::on_int(x, lo), hi);
      });
    } else if constexpr (is_narrow_float_v<T>) {
      return clamp_for_shapes<T>(result, scalar[0], scalar[2], [](T lo, T x, T hi) {
        const double raised = Maximum::on_float(to_double(x), to_double(lo));
        return narrow_from_double<T>(Minimum::on_float(raised, to_double(hi)));
      });
    } else {
      return clamp_for_shapes<T>(result, scalar[0], scalar[2], [](T lo, T x, T hi) {
        return Minimum::on_float(Maximum::on_float(x, lo), hi);
      });
    }
  });
}

OPENHLO_KERNEL(stablehlo_clamp, "stablehlo.clamp", make_clamp);

}  // namespace
}  // namespace openhlo::cpu::elementwise
