// Which low-precision instruction sets this CPU has, read once with cpuid, so kernels built
// for every x86-64 machine (the fast paths carry their own target attributes) pick their
// fast path at run time and fall back to portable loops elsewhere.
#pragma once

namespace openhlo::cpu {

struct LowPrecisionIsa {
  bool avx512 = false;  // AVX-512 F and BW: the weight-only decoders
  bool vnni = false;    // AVX-512 VNNI (vpdpbusd): the int8 GEMM
  bool bf16 = false;    // AVX-512 BF16 (vdpbf16ps): the bf16 GEMM
};

// What cpuid reports.
LowPrecisionIsa detected_isa();
// What the kernels use: detected_isa(), or nothing when the portable loops are forced (the
// environment variable OPENHLO_CPU_PORTABLE_LOWP=1 at load, or force_portable_lowp).
LowPrecisionIsa active_isa();
// Test hook: force (true) or stop forcing (false) the portable loops.
void force_portable_lowp(bool on);

}  // namespace openhlo::cpu
