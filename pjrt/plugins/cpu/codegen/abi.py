"""The interface between generated kernels and the executor, defined once.

Every generated fusion kernel is ``extern "C" void name(const OhmEnv* env, const void* const*
operands, void* const* results)``. The executor (native/generated_env.h, whose struct must
match ``PRELUDE`` field for field) passes the environment: its thread pool and the BLAS GEMMs,
so generated code needs no library of its own. The prelude also defines the fixed-width
integer types without <cstdint> (every standard header costs compile time), then the C++
renderer's helpers.
"""
from __future__ import annotations

from xla_core.codegen.cpp import CPP

PRELUDE = r"""typedef __INT8_TYPE__ int8_t; typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t; typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t; typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t; typedef __UINT64_TYPE__ uint64_t;
struct OhmEnv {
  // Runs fn(ctx, begin, end) over [0, n) in blocks of at least min_chunk, on the pool.
  void (*parallel_for)(int64_t n, int64_t min_chunk, void (*fn)(void*, int64_t, int64_t),
                       void* ctx);
  // C[m,n] = op(A)[m,k] * op(B)[k,n] (row-major, on the calling thread).
  void (*sgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
  void (*dgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);
  void* (*alloc)(int64_t bytes);  // 64-byte aligned scratch
  void (*release)(void* p);
};
struct OhmArgs { const OhmEnv* env; const void* const* ins; void* const* outs; };
""" + CPP.HELPERS

KERNEL_SIGNATURE = "(const OhmEnv* env, const void* const* ins, void* const* outs)"
