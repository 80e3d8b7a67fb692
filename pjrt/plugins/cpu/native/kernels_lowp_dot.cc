// dot_general on the low-precision GEMMs (lowp_gemm.h): i8 x i8 -> i32 always (the portable
// loop gives the same integers where the CPU lacks AMX and VNNI), bf16 x bf16 -> f32/bf16
// where the CPU has AMX or AVX-512 BF16 (elsewhere kernels_linalg.cc widens to f32 for BLAS,
// which is faster than a portable bf16 loop).
//
// The rhs (the weight, in the products that matter) is packed for the microkernel once per
// distinct array: a step keeps the last rhs it packed, holding a reference to its storage.
// Arrays are values and storage with another reference is never taken over for an in-place
// result, so the same storage means the same contents; a program's constants and the
// parameters a caller passes again are thus packed once. Borrowed storage (a caller's
// buffer) is not cached: its owner may rewrite it between calls.
#include <memory>
#include <mutex>

#include "contraction.h"
#include "cpu_isa.h"
#include "float16.h"
#include "lowp_gemm.h"

namespace openhlo::cpu {
namespace {

// The packed form of the last rhs a step saw, per batch element.
template <typename Packed>
class PackedRhsCache {
 public:
  template <typename PackFn>
  std::shared_ptr<const std::vector<Packed>> get(const Array& rhs, const PackFn& pack) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (packed_ != nullptr && storage_ == rhs.storage) return packed_;
    }
    auto packed = std::make_shared<const std::vector<Packed>>(pack());
    if (rhs.storage->owned) {
      std::lock_guard<std::mutex> lock(mu_);
      storage_ = rhs.storage;
      packed_ = packed;
    }
    return packed;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const std::vector<Packed>> packed_;
};

// Batch element i of an operand as a matrix view: in place, or in `scratch` (the whole
// operand permuted to [B, rows, cols] once).
template <typename T>
lowp::MatrixView<T> batch_view(const MatrixOperand& plan, const Array& array,
                               const std::vector<T>& scratch, int64_t i, int64_t step) {
  if (plan.in_place) return {array.data<T>() + i * step, plan.ld, plan.transposed};
  return {scratch.data() + i * step, plan.ld, false};
}

template <typename T>
std::vector<T> scratch_for(const MatrixOperand& plan, const Array& array) {
  std::vector<T> scratch;
  if (!plan.in_place) {
    scratch.resize(static_cast<size_t>(array.size()));
    plan.pack.run(array.data<T>(), scratch.data());
  }
  return scratch;
}

// The step of a dot on `pack` (B -> Packed, per batch element) and `multiply` (one batch
// element's product into the result at `offset`).
template <typename T, typename Packed, typename Pack, typename Multiply>
Step make_packed_dot(const DotPlan& plan, const TensorSpec& result, Pack pack,
                     Multiply multiply) {
  auto cache = std::make_shared<PackedRhsCache<Packed>>();
  return [plan, result, cache, pack, multiply](ExecContext&, const Array* operands,
                                               Array* results) {
    results[0] = allocate(result.dtype, result.shape);
    const int64_t b = plan.batch, m = plan.m, n = plan.n, k = plan.k;
    const Array& rhs = operands[1];
    auto packed = cache->get(rhs, [&] {
      const std::vector<T> scratch = scratch_for<T>(plan.rhs, rhs);
      std::vector<Packed> all;
      for (int64_t i = 0; i < b; ++i) {
        all.push_back(pack(batch_view(plan.rhs, rhs, scratch, i, k * n), k, n));
      }
      return all;
    });
    const std::vector<T> lhs = scratch_for<T>(plan.lhs, operands[0]);
    for (int64_t i = 0; i < b; ++i) {
      multiply(m, batch_view(plan.lhs, operands[0], lhs, i, m * k), (*packed)[i], results[0],
               i * m * n);
    }
  };
}

Step make_int8_dot(const DotPlan& plan, const TensorSpec& result) {
  return make_packed_dot<int8_t, lowp::PackedS8>(
      plan, result, lowp::pack_s8,
      [](int64_t m, lowp::MatrixView<int8_t> a, const lowp::PackedS8& b, Array& out,
         int64_t offset) {
        lowp::S8Epilogue epilogue;
        epilogue.out_s32 = out.data<int32_t>() + offset;
        lowp::gemm_s8(m, a, b, epilogue);
      });
}

Step make_bf16_dot(const DotPlan& plan, const TensorSpec& result) {
  return make_packed_dot<uint16_t, lowp::PackedBF16>(
      plan, result, lowp::pack_bf16,
      [](int64_t m, lowp::MatrixView<uint16_t> a, const lowp::PackedBF16& b, Array& out,
         int64_t offset) {
        if (out.dtype == DType::F32) {
          lowp::gemm_bf16(m, a, b, out.data<float>() + offset);
          return;
        }
        std::vector<float> wide(static_cast<size_t>(m * b.n));
        lowp::gemm_bf16(m, a, b, wide.data());
        bf16_t* rounded = out.data<bf16_t>() + offset;
        for (size_t j = 0; j < wide.size(); ++j) rounded[j] = bf16_t{f32_to_bf16(wide[j])};
      });
}

}  // namespace

Step make_lowp_dot(const DotPlan& plan, const TensorSpec& lhs, const TensorSpec& rhs,
                   const TensorSpec& result) {
  if (lhs.dtype == DType::S8 && rhs.dtype == DType::S8 && result.dtype == DType::S32) {
    return make_int8_dot(plan, result);
  }
  if (lhs.dtype == DType::BF16 && rhs.dtype == DType::BF16 &&
      (result.dtype == DType::F32 || result.dtype == DType::BF16) &&
      (active_isa().bf16 || active_isa().amx)) {
    return make_bf16_dot(plan, result);
  }
  return {};
}

}  // namespace openhlo::cpu
