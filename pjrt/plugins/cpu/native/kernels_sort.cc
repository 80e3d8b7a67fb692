// Native kernel of stablehlo.sort: runs when its comparator is one LT/GT compare of
// operand 0's pair (region_attrs "comparator"); the result is always the stable order, and
// Note [FLOAT keys with NaN] says what happens to NaN keys under compare_type FLOAT.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "_generated/kernel_attrs.h"
#include "array.h"
#include "kernel.h"
#include "strided.h"
#include "thread_pool.h"

namespace openhlo::cpu {
namespace {

// ---------------------------------------------------------------------------
// sort

// Sort keys: every comparator we run maps operand 0's elements to int64 keys whose order is
// the comparator's, so one sort routine serves all element types.
template <typename T>
struct IntegerKey {
  using Raw = T;
  static constexpr bool kNaNStays = false;
  static int64_t key(T v) {
    // uint64 order = int64 order once the top bit is flipped.
    if constexpr (std::is_same_v<T, uint64_t>) return static_cast<int64_t>(v ^ (uint64_t{1} << 63));
    return static_cast<int64_t>(v);
  }
  static bool is_nan(T) { return false; }
};

// IEEE floats by their bits (f16, bf16, f32, f64). TOTALORDER: -NaN < -inf < ... < -0 <
// +0 < ... < inf < NaN, the sign-magnitude bits made two's complement. FLOAT: the same
// with -0 == +0; NaN is unordered, see Note [FLOAT keys with NaN].
template <typename Bits, Bits kInf, bool kFloatCompare>
struct FloatKey {
  using Raw = Bits;
  using Signed = std::make_signed_t<Bits>;
  static constexpr Bits kMagnitude = static_cast<Bits>(~Bits{0}) >> 1;
  static constexpr bool kNaNStays = kFloatCompare;
  static int64_t key(Bits bits) {
    if (kFloatCompare && (bits & kMagnitude) == 0) return 0;
    const Signed s = static_cast<Signed>(bits);
    return s < 0 ? static_cast<Signed>(s ^ static_cast<Signed>(kMagnitude)) : s;
  }
  static bool is_nan(Bits bits) { return (bits & kMagnitude) > kInf; }
};

// Note [FLOAT keys with NaN]
// compare LT/GT with compare_type FLOAT is false whenever a NaN is involved, so it is no
// strict weak order once keys hold NaN, and the stable order is undefined. The interpreter
// then returns whatever its merge sort or Python's sort produce (its docstring: any order
// is acceptable); no fast kernel can reproduce that. We give a defined answer that is
// sorted under the comparator: NaN keys keep their positions and all other elements are
// stably sorted around them. For NaN-free rows this is exactly the interpreter's order.

struct SortScratch {
  std::vector<std::pair<int64_t, int64_t>> keyed;  // (key, index in row)
  std::vector<int64_t> slots;                      // row positions of non-NaN keys
};

// perm[p] = row index of the element that ends at position p, for the row of n elements at
// keys[base + i * stride].
using PermFn = void (*)(const void* keys, int64_t base, int64_t stride, int64_t n,
                        SortScratch& scratch, int64_t* perm);

template <typename Policy, bool kDescending>
void sort_permutation(const void* keys, int64_t base, int64_t stride, int64_t n,
                      SortScratch& scratch, int64_t* perm) {
  const auto* row = static_cast<const typename Policy::Raw*>(keys) + base;
  scratch.keyed.clear();
  scratch.slots.clear();
  for (int64_t i = 0; i < n; ++i) {
    const auto v = row[i * stride];
    if (Policy::kNaNStays && Policy::is_nan(v)) {
      perm[i] = i;
      continue;
    }
    scratch.keyed.emplace_back(Policy::key(v), i);
    if (Policy::kNaNStays) scratch.slots.push_back(i);
  }
  // The index breaks ties, so an unstable sort gives the stable order.
  std::sort(scratch.keyed.begin(), scratch.keyed.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return kDescending ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  });
  const int64_t m = static_cast<int64_t>(scratch.keyed.size());
  for (int64_t p = 0; p < m; ++p) {
    perm[Policy::kNaNStays ? scratch.slots[p] : p] = scratch.keyed[p].second;
  }
}

template <typename Policy>
PermFn perm_fn(bool descending) {
  return descending ? &sort_permutation<Policy, true> : &sort_permutation<Policy, false>;
}

// The key policy of operand 0's type under the comparator's compare_type.
PermFn sort_perm_fn(DType dtype, const std::string& type, bool descending) {
  const bool total = type == "TOTALORDER";
  require(type.empty() || total || type == "FLOAT" || type == "SIGNED" || type == "UNSIGNED",
          "sort compare_type " + type + " is not native");
  switch (dtype) {
    case DType::F16:
    case DType::BF16:
    case DType::F32:
    case DType::F64:
      require(type.empty() || type == "FLOAT" || total,
              "sort compare_type " + type + " on floats is not native");
      break;
    case DType::C64:
    case DType::C128:
      throw Unsupported("sort on complex keys is not native");
    default: {
      const bool is_signed = dtype == DType::S8 || dtype == DType::S16 || dtype == DType::S32 ||
                             dtype == DType::S64;
      require(type.empty() || type == (is_signed ? "SIGNED" : "UNSIGNED"),
              "sort compare_type " + type + " on " + dtype_name(dtype) + " is not native");
      return dispatch_real(dtype, [&](auto tag) -> PermFn {
        return perm_fn<IntegerKey<typename decltype(tag)::type>>(descending);
      });
    }
  }
  switch (dtype) {
    case DType::F16:
      return total ? perm_fn<FloatKey<uint16_t, 0x7C00, false>>(descending)
                   : perm_fn<FloatKey<uint16_t, 0x7C00, true>>(descending);
    case DType::BF16:
      return total ? perm_fn<FloatKey<uint16_t, 0x7F80, false>>(descending)
                   : perm_fn<FloatKey<uint16_t, 0x7F80, true>>(descending);
    case DType::F32:
      return total ? perm_fn<FloatKey<uint32_t, 0x7F800000u, false>>(descending)
                   : perm_fn<FloatKey<uint32_t, 0x7F800000u, true>>(descending);
    default:
      return total ? perm_fn<FloatKey<uint64_t, 0x7FF0000000000000ull, false>>(descending)
                   : perm_fn<FloatKey<uint64_t, 0x7FF0000000000000ull, true>>(descending);
  }
}

// dst row = src row permuted by perm.
using PermuteFn = void (*)(const void* src, void* dst, int64_t base, int64_t stride, int64_t n,
                           const int64_t* perm);

template <typename T>
void permute_row(const void* src, void* dst, int64_t base, int64_t stride, int64_t n,
                 const int64_t* perm) {
  const T* s = static_cast<const T*>(src) + base;
  T* d = static_cast<T*>(dst) + base;
  for (int64_t p = 0; p < n; ++p) d[p * stride] = s[perm[p] * stride];
}

Step make_sort(const OpSpec& spec) {
  require(!spec.operands.empty() && spec.results.size() == spec.operands.size(),
          "sort needs one result per operand");
  const Shape shape = spec.operands[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const SortAttrs a = SortAttrs::decode(spec);
  int64_t dim = a.dimension;
  require(-rank <= dim && dim < rank, "sort dimension is out of range");
  if (dim < 0) dim += rank;
  require(a.comparator_direction.has_value(), "sort comparator is not one compare of operand 0");
  const std::string& direction = *a.comparator_direction;
  const std::string& type = a.comparator_type;
  require(direction == "LT" || direction == "GT",
          "sort comparator " + direction + " is not native");
  std::vector<PermuteFn> permutes;
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    require(spec.operands[k].shape == shape && spec.results[k].shape == shape &&
                spec.results[k].dtype == spec.operands[k].dtype,
            "sort operands and results must share one shape");
    permutes.push_back(dispatch_bytes(spec.operands[k].dtype, [](auto tag) -> PermuteFn {
      return &permute_row<typename decltype(tag)::type>;
    }));
  }
  const PermFn perm_of = sort_perm_fn(spec.operands[0].dtype, type, direction == "GT");
  const std::vector<TensorSpec> outs = spec.results;
  const int64_t n = shape[dim];
  const int64_t stride = row_major_strides(shape)[dim];
  return [outs, permutes, perm_of, n, stride](ExecContext&, const Array* operands,
                                              Array* results) {
    for (size_t k = 0; k < outs.size(); ++k) results[k] = allocate(outs[k].dtype, outs[k].shape);
    const int64_t count = num_elements(outs[0].shape);
    if (count == 0) return;
    // Row r: its `stride` neighbours share an outer index, so base = outer * n * stride +
    // inner.
    parallel_for(count / n, std::max<int64_t>(1, strided::kParallelGrain / n),
                 [&](int64_t begin, int64_t end) {
                   SortScratch scratch;
                   scratch.keyed.reserve(n);
                   scratch.slots.reserve(n);
                   std::vector<int64_t> perm(n);
                   for (int64_t r = begin; r < end; ++r) {
                     const int64_t base = r / stride * n * stride + r % stride;
                     perm_of(operands[0].raw(), base, stride, n, scratch, perm.data());
                     for (size_t k = 0; k < outs.size(); ++k) {
                       permutes[k](operands[k].raw(), results[k].raw(), base, stride, n,
                                   perm.data());
                     }
                   }
                 });
  };
}

OPENHLO_KERNEL(stablehlo_sort, "stablehlo.sort", make_sort);

}  // namespace
}  // namespace openhlo::cpu
