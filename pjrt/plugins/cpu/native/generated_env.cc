#include "generated_env.h"

#include <dlfcn.h>

#include <cstdlib>

#include "blas.h"
#include "thread_pool.h"

namespace openhlo::cpu {

namespace {

void env_parallel_for(int64_t n, int64_t min_chunk, void (*fn)(void*, int64_t, int64_t),
                      void* ctx) {
  parallel_for(n, min_chunk, [fn, ctx](int64_t b, int64_t e) { fn(ctx, b, e); });
}

void env_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc) {
  blas::sgemm(ta != 0, tb != 0, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c,
              static_cast<int>(ldc));
}

void env_dgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double* c, int64_t ldc) {
  blas::dgemm(ta != 0, tb != 0, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
              static_cast<int>(ldc));
}

void* env_alloc(int64_t bytes) {
  return std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
}

void env_release(void* p) { std::free(p); }

const OhmEnv kEnv = {env_parallel_for, env_sgemm, env_dgemm, env_alloc, env_release};

}  // namespace

const OhmEnv* generated_env() { return &kEnv; }

Step make_generated_step(const std::string& library, const std::string& symbol,
                         std::vector<TensorSpec> results,
                         std::vector<std::pair<int, int>> inplace, size_t num_operands) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw Unsupported(std::string("cannot load ") + dlerror());
  using Fn = void (*)(const OhmEnv*, const void* const*, void* const*);
  auto fn = reinterpret_cast<Fn>(dlsym(handle, symbol.c_str()));
  if (fn == nullptr) throw Unsupported("no symbol " + symbol + " in " + library);
  for (auto [r, o] : inplace) {
    if (r < 0 || static_cast<size_t>(r) >= results.size() || o < 0 ||
        static_cast<size_t>(o) >= num_operands) {
      throw Unsupported("in-place pair out of range");
    }
  }
  return [fn, results = std::move(results), inplace = std::move(inplace), num_operands](
             ExecContext&, const Array* operands, Array* outs) {
    const void* in_buf[16];
    void* out_buf[16];
    std::vector<const void*> in_vec;
    std::vector<void*> out_vec;
    const void** ins = in_buf;
    void** res = out_buf;
    if (num_operands > 16 || results.size() > 16) {
      in_vec.resize(num_operands);
      out_vec.resize(results.size());
      ins = in_vec.data();
      res = out_vec.data();
    }
    for (size_t i = 0; i < num_operands; ++i) ins[i] = operands[i].raw();
    // An operand whose storage nobody else holds (the executor released its slot before
    // this step) is taken over by its paired result.
    for (auto [r, o] : inplace) {
      const Array& a = operands[o];
      if (!outs[r].defined() && can_take_over(a, num_bytes(results[r].dtype, results[r].shape))) {
        outs[r] = Array{results[r].dtype, results[r].shape, a.storage};
      }
    }
    for (size_t i = 0; i < results.size(); ++i) {
      if (!outs[i].defined()) outs[i] = allocate(results[i].dtype, results[i].shape);
      res[i] = outs[i].raw();
    }
    fn(generated_env(), ins, res);
  };
}

}  // namespace openhlo::cpu
