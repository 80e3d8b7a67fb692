// The AMX microkernels of the int8 and bf16 GEMMs (lowp_gemm.cc), in a file of their own
// compiled for AMX (lowp_amx.cc), called only where detected_isa().amx says the CPU has AMX
// and Linux lets this process use it.
//
// Each computes a 32 x 32 block of C: tile[r * 32 + c] = sum over k < `k` of A[r, k] * B[k, c],
// A being 32 rows `lda` elements apart, B one packed panel of lowp_gemm.cc ([depth / g][32
// columns][g k], g = 4 bytes / element size); k rounded up to 64 bytes of elements fits in
// both, and A and B are zero past k. int8: A is stored as a + 128 (unsigned), as the
// VNNI kernel's, and the sums wrap as int32 (tdpbusd does not saturate).
//
// The block functions expect the tile configuration that configure_tiles() loads: a caller
// loads it once before a run of blocks on its thread (a pool task's) and calls
// release_tiles() after them, running no other tile code in between (another library's
// would leave its own configuration behind).
#pragma once

#include <cstdint>

namespace openhlo::cpu::lowp::amx {

constexpr int64_t kRows = 32;  // rows of C per call (two tiles of 16)

void configure_tiles();
void release_tiles();

void block_s8(const uint8_t* a, int64_t lda, int64_t k, const int8_t* panel, int32_t* tile);
void block_bf16(const uint16_t* a, int64_t lda, int64_t k, const uint16_t* panel, float* tile);

}  // namespace openhlo::cpu::lowp::amx
