// Strided copies and index operands for the data-movement and indexing kernels (private
// to them).
//
// Every op that only moves bytes (transpose, slice, reverse, broadcast, pad, concatenate,
// the dynamic slices, gather) is one or more copies between two strided views:
//   dst[dst_base + sum_d i_d * dst_strides[d]] = src[src_base + sum_d i_d * src_strides[d]]
// for every index i of a shape, with strides in elements (negative for reversal, zero for
// broadcasting). A CopyPlan is that copy simplified at compile time: size-1 dimensions are
// dropped and neighbours that are contiguous in both views merged, so most copies end up
// as a few long memcpy or fill rows. Only the byte width of the element type matters:
// kernels instantiate these templates through dispatch_bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "array.h"
#include "kernel.h"
#include "thread_pool.h"

namespace openhlo::cpu::strided {

// Elements per parallel task: below this, waking a thread costs more than it saves.
constexpr int64_t kParallelGrain = 32 * 1024;
// Side of the square tiles of a blocked transpose (elements).
constexpr int64_t kTile = 32;

struct CopyPlan {
  Shape shape;
  std::vector<int64_t> src_strides, dst_strides;
  int64_t src_base = 0, dst_base = 0;
  int64_t count = 0;  // number of elements copied
  // When >= 0: the dimension that is contiguous in the source while the innermost one is
  // contiguous in the destination (a transpose); the copy then runs in square tiles so
  // that both sides stay in cache.
  int tile_dim = -1;

  int rank() const { return static_cast<int>(shape.size()); }
  // A plain copy of `count` contiguous elements from the start of both views.
  bool is_contiguous() const {
    return src_base == 0 && dst_base == 0 &&
           (rank() == 0 || (rank() == 1 && src_strides[0] == 1 && dst_strides[0] == 1));
  }
};

inline CopyPlan make_copy_plan(const Shape& shape, const std::vector<int64_t>& src_strides,
                               const std::vector<int64_t>& dst_strides, int64_t src_base = 0,
                               int64_t dst_base = 0) {
  CopyPlan plan;
  plan.src_base = src_base;
  plan.dst_base = dst_base;
  plan.count = num_elements(shape);
  if (plan.count == 0) return plan;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    // Merge into the previous (outer) kept dimension when it steps exactly over this one in
    // both views.
    if (!plan.shape.empty()) {
      int64_t& outer = plan.shape.back();
      if (plan.src_strides.back() == src_strides[d] * shape[d] &&
          plan.dst_strides.back() == dst_strides[d] * shape[d]) {
        outer *= shape[d];
        plan.src_strides.back() = src_strides[d];
        plan.dst_strides.back() = dst_strides[d];
        continue;
      }
    }
    plan.shape.push_back(shape[d]);
    plan.src_strides.push_back(src_strides[d]);
    plan.dst_strides.push_back(dst_strides[d]);
  }
  int inner = plan.rank() - 1;
  if (inner >= 1 && plan.dst_strides[inner] == 1 && plan.src_strides[inner] > 1 &&
      plan.shape[inner] >= 8) {
    for (int d = 0; d < inner; ++d) {
      if (plan.src_strides[d] == 1 && plan.shape[d] >= 8) plan.tile_dim = d;
    }
  }
  return plan;
}

template <typename T>
inline void copy_row(const T* src, T* dst, int64_t n, int64_t src_stride, int64_t dst_stride) {
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else if (src_stride == 0 && dst_stride == 1) {
    std::fill(dst, dst + n, *src);
  } else if (dst_stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * src_stride];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * dst_stride] = src[i * src_stride];
  }
}

// Copies the rows [begin, end) of the plan (a row = the innermost dimension) from src to
// dst, which already include the plan's bases and any run-time offset.
template <typename T>
void copy_rows(const CopyPlan& p, const T* src, T* dst, int64_t begin, int64_t end) {
  const int r = p.rank();
  if (r == 0) {
    if (begin == 0 && end > 0) *dst = *src;
    return;
  }
  const int64_t n = p.shape[r - 1];
  const int64_t ss = p.src_strides[r - 1], ds = p.dst_strides[r - 1];
  // Odometer over the outer dimensions, started at row `begin`.
  int64_t index[16];
  std::vector<int64_t> big_index;
  int64_t* idx = index;
  if (r > 16) {
    big_index.resize(r);
    idx = big_index.data();
  }
  int64_t so = 0, dof = 0, rest = begin;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = rest % p.shape[d];
    rest /= p.shape[d];
    so += idx[d] * p.src_strides[d];
    dof += idx[d] * p.dst_strides[d];
  }
  for (int64_t row = begin; row < end; ++row) {
    copy_row(src + so, dst + dof, n, ss, ds);
    for (int d = r - 2; d >= 0; --d) {
      so += p.src_strides[d];
      dof += p.dst_strides[d];
      if (++idx[d] < p.shape[d]) break;
      so -= idx[d] * p.src_strides[d];
      dof -= idx[d] * p.dst_strides[d];
      idx[d] = 0;
    }
  }
}

// Tiles [begin, end) of a plan with a tile_dim: unit u covers one kTile-wide block of the
// tile dimension for one index of the other outer dimensions.
template <typename T>
void copy_tiles(const CopyPlan& p, const T* src, T* dst, int64_t begin, int64_t end) {
  const int r = p.rank(), inner = r - 1, j = p.tile_dim;
  const int64_t ni = p.shape[inner], nj = p.shape[j];
  const int64_t si = p.src_strides[inner], dj = p.dst_strides[j];
  const int64_t blocks = (nj + kTile - 1) / kTile;
  for (int64_t u = begin; u < end; ++u) {
    int64_t rest = u / blocks, so = 0, dof = 0;
    for (int d = r - 2; d >= 0; --d) {
      if (d == j) continue;
      int64_t i = rest % p.shape[d];
      rest /= p.shape[d];
      so += i * p.src_strides[d];
      dof += i * p.dst_strides[d];
    }
    const int64_t j0 = (u % blocks) * kTile, j1 = std::min(nj, j0 + kTile);
    for (int64_t i0 = 0; i0 < ni; i0 += kTile) {
      const int64_t i1 = std::min(ni, i0 + kTile);
      for (int64_t jj = j0; jj < j1; ++jj) {
        const T* s = src + so + jj;
        T* d = dst + dof + jj * dj;
        for (int64_t ii = i0; ii < i1; ++ii) d[ii] = s[ii * si];
      }
    }
  }
}

// Runs the whole plan; src and dst are the arrays' data (the plan adds its bases).
// Large copies are split over the thread pool.
template <typename T>
void run_copy(const CopyPlan& p, const T* src, T* dst) {
  if (p.count == 0) return;
  src += p.src_base;
  dst += p.dst_base;
  if (p.tile_dim >= 0) {
    const int64_t nj = p.shape[p.tile_dim];
    const int64_t outer = p.count / (nj * p.shape.back());
    const int64_t units = outer * ((nj + kTile - 1) / kTile);
    const int64_t per_unit = kTile * p.shape.back();
    parallel_for(units, std::max<int64_t>(1, kParallelGrain / per_unit),
                 [&](int64_t b, int64_t e) { copy_tiles(p, src, dst, b, e); });
    return;
  }
  const int64_t n = p.rank() == 0 ? 1 : p.shape.back();
  parallel_for(p.count / n, std::max<int64_t>(1, kParallelGrain / n),
               [&](int64_t b, int64_t e) { copy_rows(p, src, dst, b, e); });
}

// Fills n elements with *value, in parallel when large.
template <typename T>
void run_fill(T* dst, int64_t n, const T* value) {
  const T v = *value;
  parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
}

// Type-erased entry points, chosen once per kernel at compile time by element width.
using CopyFn = void (*)(const CopyPlan&, const void* src, void* dst);
using FillFn = void (*)(void* dst, int64_t n, const void* value);

template <typename T>
void copy_erased(const CopyPlan& p, const void* src, void* dst) {
  run_copy(p, static_cast<const T*>(src), static_cast<T*>(dst));
}
template <typename T>
void fill_erased(void* dst, int64_t n, const void* value) {
  run_fill(static_cast<T*>(dst), n, static_cast<const T*>(value));
}

inline CopyFn copy_fn(DType dtype) {
  return dispatch_bytes(dtype, [](auto tag) -> CopyFn {
    return &copy_erased<typename decltype(tag)::type>;
  });
}
inline FillFn fill_fn(DType dtype) {
  return dispatch_bytes(dtype, [](auto tag) -> FillFn {
    return &fill_erased<typename decltype(tag)::type>;
  });
}

// A result that is its operand's bytes under another shape: shares the storage (arrays are
// immutable values, so no copy is needed).
inline Array share(const Array& operand, DType dtype, const Shape& shape) {
  Array out;
  out.dtype = dtype;
  out.shape = shape;
  out.storage = operand.storage;
  return out;
}

}  // namespace openhlo::cpu::strided

// Index operands of dynamic_slice, gather and scatter, read as the interpreter reads them
// (stablehlo/interpreter/index_values.py).
namespace openhlo::cpu::index_operands {

// Interpreter's bound (index_values.py): start + offset can never overflow int64.
constexpr int64_t kIndexBound = int64_t{1} << 48;

// One index of integer type I as the interpreter reads it: int64, saturated.
template <typename I>
inline int64_t index_value(I v) {
  if constexpr (std::is_same_v<I, bool>) {
    return v ? 1 : 0;
  } else if constexpr (std::is_unsigned_v<I>) {
    return v > static_cast<uint64_t>(kIndexBound) ? kIndexBound : static_cast<int64_t>(v);
  } else {
    return std::clamp<int64_t>(v, -kIndexBound, kIndexBound);
  }
}

// Calls fn(TypeTag<I>{}) for the C++ type of an integer index type. Kernels instantiate
// their index loops per index type, so indices are read in place (a converted copy of a
// large index tensor would cost more than the gather itself).
template <typename Fn>
auto dispatch_index(DType dtype, const std::string& what, Fn&& fn) {
  return dispatch_integer(dtype, fn, [&]() -> decltype(fn(TypeTag<int64_t>{})) {
    throw Unsupported(what + " must have an integer type, got " + dtype_name(dtype));
  });
}

// Index vectors: the start indices tensor minus its index_vector_dim. `batch_*` are per
// batch axis (the remaining indices dimensions, in order).
struct IndexVectors {
  Shape batch_shape;
  std::vector<int64_t> batch_index_strides;
  int64_t vector_size = 1;
  int64_t vector_stride = 0;  // between an index vector's components

  IndexVectors(const Shape& indices, int64_t ivd) {
    const int64_t rank = static_cast<int64_t>(indices.size());
    require(0 <= ivd && ivd <= rank, "index_vector_dim is out of range");
    const auto strides = row_major_strides(indices);
    for (int64_t d = 0; d < rank; ++d) {
      if (d == ivd) continue;
      batch_shape.push_back(indices[d]);
      batch_index_strides.push_back(strides[d]);
    }
    if (ivd < rank) {
      vector_size = indices[ivd];
      vector_stride = strides[ivd];
    }
  }
  // The batch axis of indices dimension `d` (the spec's rule: axes after
  // index_vector_dim move down by one).
  static int64_t batch_axis(int64_t d, int64_t ivd) { return d < ivd ? d : d - 1; }
};

}  // namespace openhlo::cpu::index_operands
