// 16-bit floats of the native arrays and conversions between element types, rounding to
// nearest even (as numpy and ml_dtypes convert): for the contraction kernels, which widen
// f16/bf16 operands to f32 and round their results back.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "array.h"

namespace openhlo::cpu {


inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float f16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h & 0x7fff) << 13;
  const uint32_t exponent = u & (0x7c00u << 13);
  u += (127 - 15) << 23;
  if (exponent == (0x7c00u << 13)) {
    u += (128 - 16) << 23;  // inf, NaN
  } else if (exponent == 0) {
    u += 1 << 23;  // zero, subnormal: renormalize through a float subtraction
    u = float_to_bits(bits_to_float(u) - bits_to_float(113u << 23));
  }
  return bits_to_float(u | (static_cast<uint32_t>(h & 0x8000) << 16));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u = float_to_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t h;
  if (u >= (127u + 16) << 23) {
    h = u > (255u << 23) ? 0x7e00 : 0x7c00;  // NaN (quiet), inf, overflow
  } else if (u < (113u << 23)) {
    // Subnormal or zero: adding 0.5 puts the f16 subnormal bits at the bottom, rounded.
    h = static_cast<uint16_t>(float_to_bits(bits_to_float(u) + 0.5f) - (126u << 23));
  } else {
    const uint32_t odd = (u >> 13) & 1;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfff + odd;
    h = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}

inline float bf16_to_f32(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

template <typename D, typename S>
inline D convert(S v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else if constexpr (std::is_same_v<S, f16_t>) {
    return static_cast<D>(f16_to_f32(v.bits));
  } else if constexpr (std::is_same_v<S, bf16_t>) {
    return static_cast<D>(bf16_to_f32(v.bits));
  } else if constexpr (std::is_same_v<D, f16_t>) {
    return f16_t{f32_to_f16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, bf16_t>) {
    return bf16_t{f32_to_bf16(static_cast<float>(v))};
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace openhlo::cpu
