// Which low-precision instruction sets this CPU has, read once with cpuid, so kernels built
// for every x86-64 machine (the fast paths carry their own target attributes) pick their
// fast path at run time and fall back to portable loops elsewhere.
#pragma once

namespace openhlo::cpu {

struct LowPrecisionIsa {
  bool avx512 = false;  // AVX-512 F and BW: the weight-only decoders
  bool vnni = false;    // AVX-512 VNNI (vpdpbusd): the int8 GEMM
  bool bf16 = false;    // AVX-512 BF16 (vdpbf16ps): the bf16 GEMM
  // AMX tiles with their bf16 and int8 products, and Linux's permission for this process to
  // use the tile registers: the bf16 and int8 GEMMs on tiles (lowp_amx.cc), before the above.
  bool amx = false;
};

// What cpuid reports (asking Linux for the AMX permission the first time).
LowPrecisionIsa detected_isa();

// How much of detected_isa() the kernels may use: all of it, all but AMX (the AVX-512
// kernels), or nothing (the portable loops).
enum class IsaLimit { kDetected, kNoAmx, kPortable };

// What the kernels use: detected_isa() within the limit, which is kPortable when the
// environment variable OPENHLO_CPU_PORTABLE_LOWP=1 is set at load, else what
// limit_lowp_isa set last (kDetected at first).
LowPrecisionIsa active_isa();
// Test hook: run the kernels within `limit`.
void limit_lowp_isa(IsaLimit limit);

}  // namespace openhlo::cpu
