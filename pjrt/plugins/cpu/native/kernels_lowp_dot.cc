// dot_general on the low-precision GEMMs (lowp_gemm.h): i8 x i8 -> i32 always (the portable
// loop gives the same integers where the CPU lacks AMX and VNNI), bf16 x bf16 -> f32/bf16
// where the CPU has AMX or AVX-512 BF16 (elsewhere kernels_linalg.cc widens to f32 for BLAS,
// which is faster than a portable bf16 loop). An i8 product of fewer than kRowsInPlace rows
// whose rhs is stored as rows ([n, k], as torch's linear weights are) reads it in place
// (gemm_s8_rows): nothing to pack, so a caller's weights cost no packing per call.
//
// The `openhlo.weight_only_dot` composite (xla_core/quantization/weight_only_dot.py): f32
// activations times int8 or int4 weights with per-channel or group-wise scales, on
// gemm_weight_rows. Weights already stored as rows (int8 [n, k]; int4 packed two a byte,
// [n, k / 2]) are read in place; others (int8 [k, n]; i4 one a byte, [n, k / g, g]) are
// brought into rows once per distinct array, as the rhs packs below.
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
#include "_generated/kernel_attrs.h"
#include "lowp_gemm.h"

namespace openhlo::cpu {
namespace {

constexpr int64_t kRowsInPlace = 16;

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
  StorageRef storage_;
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
  Step packed = make_packed_dot<int8_t, lowp::PackedS8>(
      plan, result, lowp::pack_s8,
      [](int64_t m, lowp::MatrixView<int8_t> a, const lowp::PackedS8& b, Array& out,
         int64_t offset) {
        lowp::S8Epilogue epilogue;
        epilogue.out_s32 = out.data<int32_t>() + offset;
        lowp::gemm_s8(m, a, b, epilogue);
      });
  if (!(plan.batch == 1 && plan.m < kRowsInPlace && plan.lhs.in_place &&
        !plan.lhs.transposed && plan.rhs.in_place && plan.rhs.transposed)) {
    return packed;
  }
  // a rhs stored as rows, few lhs rows: read in place, nothing packed
  return [plan, result](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(result.dtype, result.shape);
    lowp::gemm_s8_rows(plan.m, operands[0].data<int8_t>(), operands[1].data<int8_t>(),
                       plan.k, plan.n, results[0].data<int32_t>());
  };
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

// --- openhlo.weight_only_dot ------------------------------------------------------------

// The weight as rows (lowp::RowWeight's bytes) from one value a byte (i8, or i4 with the
// nibble in the low bits), stored as rows (weight_contracting 1) or as [k, n] (0).
std::vector<uint8_t> weight_rows(const Array& w, int bits, bool transposed, int64_t k,
                                 int64_t n) {
  const uint8_t* src = static_cast<const uint8_t*>(w.raw());
  std::vector<uint8_t> values(src, src + n * k);
  if (transposed) {
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < n; ++j) values[j * k + kk] = src[kk * n + j];
  }
  if (bits == 8) return values;
  std::vector<uint8_t> rows(static_cast<size_t>(n * k / 2));
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<uint8_t>((values[2 * i] & 0x0f) | ((values[2 * i + 1] & 0x0f) << 4));
  }
  return rows;
}

// Operands: x f32 [..., k] (contracting its last dim), the weight, scales f32 (n * k / group
// of them, output-major); result f32 [..., n]. The weight holds one value a byte (i8; i4 as
// raw bytes), as rows (weight_contracting 1: [n, k], or [n * k / group, group]) or as
// [k, n] (0), or for int4 the bytes [n, k / 2] with two values each, read in place.
Step make_weight_only_dot(const OpSpec& spec) {
  const WeightOnlyDotAttrs a = WeightOnlyDotAttrs::decode(spec);
  require(spec.operands.size() == 3 && spec.results.size() == 1,
          spec.name + ": takes x, weight and scales");
  const TensorSpec &x = spec.operands[0], &w = spec.operands[1], &s = spec.operands[2];
  const TensorSpec& out = spec.results[0];
  require(x.dtype == DType::F32 && s.dtype == DType::F32 && out.dtype == DType::F32 &&
              !x.shape.empty() && !out.shape.empty(),
          spec.name + ": x, scales and result must be f32 tensors");
  const int64_t k = x.shape.back(), n = out.shape.back();
  const int64_t m = k == 0 ? 0 : num_elements(x.shape) / k;
  const int bits = static_cast<int>(a.bits);
  const int64_t group = a.group_size;
  require((bits == 8 || bits == 4) && group > 0 && k % group == 0 &&
              num_elements(s.shape) == n * (k / group),
          spec.name + ": bits must be 8 or 4, the group size divide k, scales n * k / group");
  const bool packed = bits == 4 && (w.dtype == DType::U8 || w.dtype == DType::S8);
  const bool transposed = a.weight_contracting == 0;
  if (packed) {
    require(k % 2 == 0 && w.shape == Shape{n, k / 2} && !transposed,
            spec.name + ": packed int4 weights are bytes [n, k / 2]");
  } else {
    require(w.dtype == (bits == 8 ? DType::S8 : DType::B8) && num_elements(w.shape) == n * k &&
                (!transposed || w.shape == Shape{k, n}),
            spec.name + ": the weight does not match x, the result and the bits");
    require(bits == 8 || k % 2 == 0, spec.name + ": int4 needs an even k");
  }
  const bool in_place = packed || (bits == 8 && !transposed);
  auto cache = std::make_shared<PackedRhsCache<uint8_t>>();
  const Shape result_shape = out.shape;
  return [=](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(DType::F32, result_shape);
    const Array& weight = operands[1];
    std::shared_ptr<const std::vector<uint8_t>> rows;
    if (!in_place) {
      rows = cache->get(weight, [&] { return weight_rows(weight, bits, transposed, k, n); });
    }
    lowp::RowWeight rw;
    rw.data = in_place ? static_cast<const uint8_t*>(weight.raw()) : rows->data();
    rw.bits = bits;
    rw.k = k;
    rw.n = n;
    rw.group = group;
    rw.scales = operands[2].data<float>();
    lowp::gemm_weight_rows(m, operands[0].data<float>(), rw, results[0].data<float>());
  };
}

OPENHLO_KERNEL(openhlo_weight_only_dot, "openhlo.weight_only_dot", make_weight_only_dot);

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
