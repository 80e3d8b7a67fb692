// The environment generated kernels run in (pjrt/plugins/cpu/codegen/abi.py defines the same
// struct in the generated C++: keep the two field for field identical).
//
// A generated fusion kernel is `void symbol(const OhmEnv* env, const void* const* operands,
// void* const* results)`: it splits its work across the runtime's thread pool and calls the
// BLAS GEMM through `env`, so the generated library links nothing itself.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernel.h"

namespace openhlo::cpu {

struct OhmEnv {
  void (*parallel_for)(int64_t n, int64_t min_chunk, void (*fn)(void*, int64_t, int64_t),
                       void* ctx);
  void (*sgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
  void (*dgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);
  void* (*alloc)(int64_t bytes);
  void (*release)(void* p);
};

// The process's environment (static; valid for the life of the process).
const OhmEnv* generated_env();

// A step running generated kernel `symbol` of shared library `library` (loaded for the
// life of the process). `inplace` lists (result, operand) pairs the kernel may share: at run
// time, when the operand's storage has no other owner, the result takes it over instead of
// a new allocation. Throws Unsupported if the library or symbol cannot be loaded.
Step make_generated_step(const std::string& library, const std::string& symbol,
                         std::vector<TensorSpec> results,
                         std::vector<std::pair<int, int>> inplace, size_t num_operands);

}  // namespace openhlo::cpu
