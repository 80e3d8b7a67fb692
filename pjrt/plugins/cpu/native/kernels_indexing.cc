// Native kernels of the ops that index with run-time values: dynamic_slice,
// dynamic_update_slice, gather and scatter (sort is in kernels_sort.cc).
//
// Semantics follow the reference interpreter (stablehlo/interpreter/data_movement.py,
// indexing.py, sort.py, index_values.py):
// * index operands of any integer type are read as int64 saturated to +-2^48;
// * dynamic_slice / dynamic_update_slice / gather clamp start indices so the window fits;
// * scatter applies updates in row-major order of the update index space, skipping each
//   update element whose result index is out of bounds; it runs natively when its region
//   returns the update ("replace") or combines each pair with one op ("combiner");
// * sort runs natively when its comparator is one LT/GT compare of operand 0's pair
//   (region_attrs "comparator"); the result is always the stable order. Note [FLOAT keys
//   with NaN] says what happens to NaN keys under compare_type FLOAT.
// Moving elements only depends on their byte width (dispatch_bytes); scatter combiners and
// sort keys are typed.
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

using index_operands::dispatch_index;
using index_operands::index_value;
using index_operands::IndexVectors;
using strided::CopyFn;
using strided::CopyPlan;
using strided::make_copy_plan;

// ---------------------------------------------------------------------------
// index operands

// Reads a scalar index operand.
using ScalarIndexFn = int64_t (*)(const Array& scalar);

template <typename I>
int64_t read_scalar_index(const Array& scalar) {
  return index_value(*scalar.data<I>());
}

ScalarIndexFn scalar_index_fn(DType dtype, const std::string& what) {
  return dispatch_index(dtype, what, [](auto tag) -> ScalarIndexFn {
    return &read_scalar_index<typename decltype(tag)::type>;
  });
}

// Address of element `elements` of an array, for the type-erased copies.
char* element_address(const Array& a, int64_t elements) {
  return static_cast<char*>(a.raw()) + elements * static_cast<int64_t>(dtype_size(a.dtype));
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int64_t position(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) - v.begin();
}

// ---------------------------------------------------------------------------
// dynamic_slice, dynamic_update_slice

// Readers of the start index operands first.. of a dynamic slice: one scalar per dimension.
std::vector<ScalarIndexFn> start_readers(const OpSpec& spec, size_t first, size_t rank) {
  require(spec.operands.size() == first + rank, spec.name + " needs one start index per dimension");
  std::vector<ScalarIndexFn> readers;
  for (size_t i = first; i < spec.operands.size(); ++i) {
    require(spec.operands[i].shape.empty(), "start indices must be scalars");
    readers.push_back(scalar_index_fn(spec.operands[i].dtype, "start index"));
  }
  return readers;
}

// Offset (in elements) of the window [start, start + size) per dimension, each start
// clamped so that the window fits (the spec's and interpreter's rule).
int64_t clamped_window_offset(const std::vector<ScalarIndexFn>& readers, const Array* starts,
                              const Shape& shape, const Shape& sizes,
                              const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < readers.size(); ++d) {
    const int64_t start = readers[d](starts[d]);
    offset += std::clamp<int64_t>(start, 0, shape[d] - sizes[d]) * strides[d];
  }
  return offset;
}

Step make_dynamic_slice(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec out = spec.results.at(0);
  require(in.dtype == out.dtype, "operand and result element types differ");
  const auto sizes = DynamicSliceAttrs::decode(spec).slice_sizes;
  require(sizes == out.shape && sizes.size() == in.shape.size(),
          "slice_sizes must match the result shape and the operand rank");
  for (size_t d = 0; d < sizes.size(); ++d) {
    require(0 <= sizes[d] && sizes[d] <= in.shape[d], "slice size exceeds the operand");
  }
  const auto readers = start_readers(spec, 1, in.shape.size());
  if (sizes == in.shape) {  // every start clamps to 0: the operand itself
    return [out](ExecContext&, const Array* operands, Array* results) {
      results[0] = strided::share(operands[0], out.dtype, out.shape);
    };
  }
  const Shape in_shape = in.shape;
  const auto in_strides = row_major_strides(in.shape);
  const CopyPlan plan = make_copy_plan(out.shape, in_strides, row_major_strides(out.shape));
  const CopyFn copy = strided::copy_fn(out.dtype);
  return [=](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    const int64_t offset =
        clamped_window_offset(readers, operands + 1, in_shape, out.shape, in_strides);
    copy(plan, element_address(operands[0], offset), results[0].raw());
  };
}

Step make_dynamic_update_slice(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec& update = spec.operands.at(1);
  const TensorSpec out = spec.results.at(0);
  require(in.dtype == out.dtype && update.dtype == out.dtype && in.shape == out.shape,
          "operand, update and result types differ");
  require(update.shape.size() == in.shape.size(), "update rank differs from operand rank");
  for (size_t d = 0; d < in.shape.size(); ++d) {
    require(0 <= update.shape[d] && update.shape[d] <= in.shape[d], "update exceeds the operand");
  }
  const auto readers = start_readers(spec, 2, in.shape.size());
  if (update.shape == in.shape) {  // the update replaces everything
    return [out](ExecContext&, const Array* operands, Array* results) {
      results[0] = strided::share(operands[1], out.dtype, out.shape);
    };
  }
  const Shape update_shape = update.shape;
  const auto out_strides = row_major_strides(out.shape);
  const CopyPlan plan = make_copy_plan(update.shape, row_major_strides(update.shape), out_strides);
  const CopyFn copy = strided::copy_fn(out.dtype);
  return [=](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    std::memcpy(results[0].raw(), operands[0].raw(), results[0].nbytes());
    const int64_t offset =
        clamped_window_offset(readers, operands + 2, out.shape, update_shape, out_strides);
    copy(plan, operands[1].raw(), element_address(results[0], offset));
  };
}

// ---------------------------------------------------------------------------
// gather

struct GatherPlan {
  Shape batch_shape;
  std::vector<int64_t> batch_index_strides, batch_result_strides, batch_operand_strides;
  int64_t vector_stride = 0;
  std::vector<int64_t> start_limit, start_stride;  // per index vector component
  CopyPlan slice;                                   // operand slice -> result
};

// For index vectors [begin, end) (row-major over the batch shape): clamped starts, then
// the slice copy. Runs inside parallel_for.
// Index vectors [begin, end) (row-major over the batch shape), in blocks: first the
// operand and result offsets of a block, then its copies in a tight loop, so that many
// (random) operand reads are in flight at once. Runs inside parallel_for.
template <typename T, typename I>
void gather_range(const GatherPlan& p, const I* idx, const T* operand, T* result,
                  int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 256;
  const int nb = static_cast<int>(p.batch_shape.size());
  const size_t k_count = p.start_limit.size();
  const int64_t rows = p.slice.rank() == 0 ? 1 : p.slice.count / p.slice.shape.back();
  const size_t row_bytes = static_cast<size_t>(p.slice.count) * sizeof(T);
  std::vector<int64_t> b(nb);
  int64_t ioff = 0, roff = 0, ooff = 0, rest = begin;
  for (int a = nb - 1; a >= 0; --a) {
    b[a] = rest % p.batch_shape[a];
    rest /= p.batch_shape[a];
    ioff += b[a] * p.batch_index_strides[a];
    roff += b[a] * p.batch_result_strides[a];
    ooff += b[a] * p.batch_operand_strides[a];
  }
  int64_t src[kBlock], dst[kBlock];
  for (int64_t g0 = begin; g0 < end; g0 += kBlock) {
    const int64_t m = std::min(kBlock, end - g0);
    for (int64_t j = 0; j < m; ++j) {
      int64_t s = ooff;
      for (size_t k = 0; k < k_count; ++k) {
        const int64_t start = index_value(idx[ioff + static_cast<int64_t>(k) * p.vector_stride]);
        s += std::clamp<int64_t>(start, 0, p.start_limit[k]) * p.start_stride[k];
      }
      src[j] = s;
      dst[j] = roff;
      for (int a = nb - 1; a >= 0; --a) {
        ioff += p.batch_index_strides[a];
        roff += p.batch_result_strides[a];
        ooff += p.batch_operand_strides[a];
        if (++b[a] < p.batch_shape[a]) break;
        ioff -= b[a] * p.batch_index_strides[a];
        roff -= b[a] * p.batch_result_strides[a];
        ooff -= b[a] * p.batch_operand_strides[a];
        b[a] = 0;
      }
    }
    // Most gathers take one element or one contiguous row per index vector.
    if (p.slice.rank() == 0) {
      for (int64_t j = 0; j < m; ++j) result[dst[j]] = operand[src[j]];
    } else if (p.slice.is_contiguous()) {
      for (int64_t j = 0; j < m; ++j) std::memcpy(result + dst[j], operand + src[j], row_bytes);
    } else {
      for (int64_t j = 0; j < m; ++j) {
        strided::copy_rows(p.slice, operand + src[j], result + dst[j], 0, rows);
      }
    }
  }
}

using GatherFn = void (*)(const GatherPlan&, const void* idx, const void*, void*);

template <typename T, typename I>
void gather_all(const GatherPlan& p, const void* idx, const void* operand, void* result) {
  const int64_t count = num_elements(p.batch_shape);
  const int64_t per_vector = std::max<int64_t>(1, p.slice.count);
  const int64_t grain = std::max<int64_t>(1, strided::kParallelGrain / per_vector);
  parallel_for(count, grain, [&](int64_t b, int64_t e) {
    gather_range(p, static_cast<const I*>(idx), static_cast<const T*>(operand),
                 static_cast<T*>(result), b, e);
  });
}

Step make_gather(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec& indices = spec.operands.at(1);
  const TensorSpec out = spec.results.at(0);
  require(in.dtype == out.dtype, "operand and result element types differ");
  const GatherAttrs a = GatherAttrs::decode(spec);
  const auto& offset_dims = a.offset_dims;
  const auto& collapsed = a.collapsed_slice_dims;
  const auto& operand_batching = a.operand_batching_dims;
  const auto& indices_batching = a.start_indices_batching_dims;
  const auto& start_index_map = a.start_index_map;
  const int64_t ivd = a.index_vector_dim;
  const auto& sizes = a.slice_sizes;
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const IndexVectors vectors(indices.shape, ivd);
  require(static_cast<int64_t>(start_index_map.size()) == vectors.vector_size,
          "start_index_map must have one entry per index vector component");
  require(static_cast<int64_t>(sizes.size()) == rank, "slice_sizes must match the operand rank");
  require(offset_dims.size() + collapsed.size() + operand_batching.size() == sizes.size(),
          "offset, collapsed and batching dims must account for every operand dimension");
  require(operand_batching.size() == indices_batching.size(), "batching dims differ in number");
  require(std::is_sorted(offset_dims.begin(), offset_dims.end()), "offset_dims must be sorted");

  const int64_t out_rank = static_cast<int64_t>(vectors.batch_shape.size() + offset_dims.size());
  require(static_cast<int64_t>(out.shape.size()) == out_rank, "result rank does not match");
  const auto in_strides = row_major_strides(in.shape);
  const auto out_strides = row_major_strides(out.shape);
  GatherPlan plan;
  plan.batch_shape = vectors.batch_shape;
  plan.batch_index_strides = vectors.batch_index_strides;
  plan.vector_stride = vectors.vector_stride;
  plan.batch_operand_strides.assign(vectors.batch_shape.size(), 0);
  for (int64_t d = 0, a = 0; d < out_rank; ++d) {
    if (contains(offset_dims, d)) continue;
    require(out.shape[d] == vectors.batch_shape[a], "result batch dimensions do not match");
    plan.batch_result_strides.push_back(out_strides[d]);
    ++a;
  }
  // The slice: operand dimensions that are neither collapsed nor batching, in order, onto
  // offset_dims in order.
  Shape slice_shape;
  std::vector<int64_t> slice_src, slice_dst;
  for (int64_t d = 0; d < rank; ++d) {
    require(0 <= sizes[d] && sizes[d] <= in.shape[d], "slice size exceeds the operand");
    if (contains(operand_batching, d)) {
      const int64_t i = indices_batching[position(operand_batching, d)];
      require(0 <= i && i < static_cast<int64_t>(indices.shape.size()) && i != ivd,
              "invalid start_indices_batching_dims");
      plan.batch_operand_strides[IndexVectors::batch_axis(i, ivd)] += in_strides[d];
      continue;
    }
    if (contains(collapsed, d)) continue;
    const int64_t axis = offset_dims.at(slice_shape.size());
    require(0 <= axis && axis < out_rank && out.shape[axis] == sizes[d],
            "result offset dimensions do not match slice_sizes");
    slice_shape.push_back(sizes[d]);
    slice_src.push_back(in_strides[d]);
    slice_dst.push_back(out_strides[axis]);
  }
  for (int64_t d : start_index_map) {
    require(0 <= d && d < rank, "start_index_map entry out of range");
    plan.start_limit.push_back(in.shape[d] - sizes[d]);
    plan.start_stride.push_back(in_strides[d]);
  }
  plan.slice = make_copy_plan(slice_shape, slice_src, slice_dst);
  // A slice size of 0 on a collapsed dimension leaves result elements that no operand element
  // is gathered into (an empty operand implies one); XLA returns zeros there, and reading
  // would clamp the start to one past the end.
  const bool empty_slice = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
  const GatherFn run = dispatch_bytes(out.dtype, [&](auto tag) -> GatherFn {
    return dispatch_index(indices.dtype, "start_indices", [](auto index_tag) -> GatherFn {
      return &gather_all<typename decltype(tag)::type, typename decltype(index_tag)::type>;
    });
  });
  return [out, plan, run, empty_slice](ExecContext&, const Array* operands, Array* results) {
    if (empty_slice) {
      results[0] = allocate_zeroed(out.dtype, out.shape);
      return;
    }
    results[0] = allocate(out.dtype, out.shape);
    if (num_elements(out.shape) == 0) return;
    run(plan, operands[1].raw(), operands[0].raw(), results[0].raw());
  };
}


// ---------------------------------------------------------------------------
// scatter

// Update elements update[u .. u + n) applied, in order, to result[r + i * run_stride].
struct Run {
  int64_t update, result, n;
};

// The update computation on one operand pair: result = apply(result, update).
template <typename T>
struct Replace {
  static T apply(T, T update) { return update; }
};
// Integer arithmetic wraps (as the interpreter's does): computed on uint64_t, then narrowed.
template <typename T>
struct Add {
  static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a || b;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    } else {
      return a + b;
    }
  }
};
template <typename T>
struct Multiply {
  static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    } else {
      return a * b;
    }
  }
};
// IEEE maximum/minimum as the interpreter's: NaN wins, -0 < +0; bool max/min are or/and.
template <typename T>
struct Maximum {
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return (a > b || (a == b && !std::signbit(a))) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};
template <typename T>
struct Minimum {
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return (a < b || (a == b && std::signbit(a))) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
template <typename T>
struct BitAnd {
  static T apply(T a, T b) { return a & b; }
};
template <typename T>
struct BitOr {
  static T apply(T a, T b) { return a | b; }
};
template <typename T>
struct BitXor {
  static T apply(T a, T b) { return a ^ b; }
};

using ApplyFn = void (*)(const Run*, int64_t count, const void* update, void* result,
                         int64_t run_stride);

template <typename T, typename Op>
void apply_runs(const Run* runs, int64_t count, const void* update, void* result,
                int64_t run_stride) {
  const T* u = static_cast<const T*>(update);
  T* r = static_cast<T*>(result);
  for (int64_t j = 0; j < count; ++j) {
    const T* src = u + runs[j].update;
    T* dst = r + runs[j].result;
    for (int64_t i = 0; i < runs[j].n; ++i) {
      dst[i * run_stride] = Op::apply(dst[i * run_stride], src[i]);
    }
  }
}

// The typed update loop for region_attrs' "replace" (combiner empty) or "combiner".
ApplyFn scatter_apply_fn(DType dtype, const std::string& combiner) {
  if (combiner.empty()) {
    return dispatch_bytes(dtype, [](auto tag) -> ApplyFn {
      using T = typename decltype(tag)::type;
      return &apply_runs<T, Replace<T>>;
    });
  }
  const bool real = dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::C64 &&
                    dtype != DType::C128;
  require(real, std::string("scatter combiner on ") + dtype_name(dtype) + " is not native");
  return dispatch_real(dtype, [&](auto tag) -> ApplyFn {
    using T = typename decltype(tag)::type;
    if (combiner == "stablehlo.add") return &apply_runs<T, Add<T>>;
    if (combiner == "stablehlo.multiply") return &apply_runs<T, Multiply<T>>;
    if (combiner == "stablehlo.maximum") return &apply_runs<T, Maximum<T>>;
    if (combiner == "stablehlo.minimum") return &apply_runs<T, Minimum<T>>;
    if constexpr (std::is_integral_v<T>) {
      if (combiner == "stablehlo.and") return &apply_runs<T, BitAnd<T>>;
      if (combiner == "stablehlo.or") return &apply_runs<T, BitOr<T>>;
      if (combiner == "stablehlo.xor") return &apply_runs<T, BitXor<T>>;
    }
    throw Unsupported("scatter combiner " + combiner + " on " + dtype_name(dtype));
  });
}

struct ScatterPlan {
  Shape input_shape;
  std::vector<int64_t> input_strides;
  Shape batch_shape;  // index vectors = scatter positions
  std::vector<int64_t> batch_index_strides;
  std::vector<int64_t> batch_input_dim;  // per batch axis: the input batching dim, or -1
  int64_t vector_stride = 0;
  std::vector<int64_t> component_dim;  // per index vector component: its input dim
  std::vector<int64_t> window_input_dim, window_size;  // per update window dim
  std::vector<int64_t> window_of;                      // per input dim: its window, or -1
  // Update dims: for each, its window number, or -1 for a scatter dim.
  Shape update_shape;
  std::vector<int64_t> update_window;
  // Window dims are the last update dims: row-major update order is then "each scatter
  // position, its window in row-major order", which lets whole rows form one Run.
  bool trailing = true;
  int64_t window_count = 1;
  int64_t run_stride = 1;
};

// Adds the start `v` of input dim d to a window's origin. Dims without a window must
// hold v; windowed dims narrow their in-bounds range [lo, hi) of window positions.
inline bool place_start(const ScatterPlan& p, int64_t d, int64_t v, int64_t* lo, int64_t* hi) {
  const int64_t w = p.window_of[d];
  if (w < 0) return 0 <= v && v < p.input_shape[d];
  lo[w] = std::max<int64_t>(0, -v);
  hi[w] = std::min<int64_t>(p.window_size[w], p.input_shape[d] - v);
  return true;
}

// Where scatter position g (its index vector at idx[ioff..], batch index b) lands: the
// input offset of its window origin and, per window dim, the window range [lo, hi) that
// stays in bounds. False when nothing of it lands in bounds. Each input dim gets at most
// one start (checked by scatter_plan), and dims without one start at 0.
template <typename I>
inline bool locate_window(const ScatterPlan& p, const I* idx, int64_t ioff,
                   const std::vector<int64_t>& b, int64_t* lo, int64_t* hi, int64_t& base) {
  const size_t nw = p.window_size.size();
  for (size_t k = 0; k < nw; ++k) {
    lo[k] = 0;
    hi[k] = std::min(p.window_size[k], p.input_shape[p.window_input_dim[k]]);
  }
  base = 0;
  for (size_t k = 0; k < p.component_dim.size(); ++k) {
    const int64_t d = p.component_dim[k];
    const int64_t v = index_value(idx[ioff + static_cast<int64_t>(k) * p.vector_stride]);
    if (!place_start(p, d, v, lo, hi)) return false;
    base += v * p.input_strides[d];
  }
  for (size_t a = 0; a < b.size(); ++a) {
    const int64_t d = p.batch_input_dim[a];
    if (d < 0) continue;
    if (!place_start(p, d, b[a], lo, hi)) return false;
    base += b[a] * p.input_strides[d];
  }
  for (size_t k = 0; k < nw; ++k) {
    if (lo[k] >= hi[k]) return false;
  }
  return true;
}

// Walks every scatter position in row-major order, calling at(g, ioff, b) for each.
template <typename Fn>
void for_each_position(const ScatterPlan& p, Fn&& at) {
  const int nb = static_cast<int>(p.batch_shape.size());
  const int64_t count = num_elements(p.batch_shape);
  std::vector<int64_t> b(nb, 0);
  int64_t ioff = 0;
  for (int64_t g = 0; g < count; ++g) {
    at(g, ioff, b);
    for (int a = nb - 1; a >= 0; --a) {
      ioff += p.batch_index_strides[a];
      if (++b[a] < p.batch_shape[a]) break;
      ioff -= b[a] * p.batch_index_strides[a];
      b[a] = 0;
    }
  }
}

// Produces the Runs of all in-bounds update elements in row-major update order, handing
// them to flush(runs, count) in batches.
template <typename I, typename Flush>
void scatter_runs(const ScatterPlan& p, const I* idx, Flush&& flush) {
  constexpr int64_t kBatch = 4096;
  std::unique_ptr<Run[]> runs(new Run[kBatch]);
  int64_t pending = 0;
  auto emit = [&](int64_t u, int64_t r, int64_t n) {
    runs[pending++] = {u, r, n};
    if (pending == kBatch) {
      flush(runs.get(), kBatch);
      pending = 0;
    }
  };
  // In an empty input nothing lands (dims without a start would start out of bounds).
  if (num_elements(p.input_shape) == 0) return;
  const size_t nw = p.window_size.size();
  std::vector<int64_t> lo(nw + 1), hi(nw + 1), w(nw + 1);
  if (p.trailing) {
    for_each_position(p, [&](int64_t g, int64_t ioff, const std::vector<int64_t>& b) {
      int64_t base;
      if (!locate_window(p, idx, ioff, b, lo.data(), hi.data(), base)) return;
      if (nw == 0) return emit(g, base, 1);
      // Rows of the in-bounds box: odometer over all window dims but the last.
      const size_t last = nw - 1;
      std::copy(lo.begin(), lo.end(), w.begin());
      for (;;) {
        int64_t u = 0, r = base;
        for (size_t k = 0; k < nw; ++k) {
          u = u * p.window_size[k] + w[k];
          r += w[k] * p.input_strides[p.window_input_dim[k]];
        }
        emit(g * p.window_count + u, r, hi[last] - lo[last]);
        size_t k = last;
        while (k-- > 0) {
          if (++w[k] < hi[k]) break;
          w[k] = lo[k];
        }
        if (k == static_cast<size_t>(-1)) break;
      }
    });
  } else {
    // Window dims interleave with scatter dims: locate every position first, then walk
    // the updates element by element in row-major order.
    const int64_t positions = num_elements(p.batch_shape);
    // (A window origin may lie out of bounds while part of its window is in bounds.)
    std::vector<int64_t> bases(positions), ranges(positions * 2 * nw);
    std::vector<bool> landed(positions);
    for_each_position(p, [&](int64_t g, int64_t ioff, const std::vector<int64_t>& b) {
      int64_t* range = ranges.data() + g * 2 * nw;
      landed[g] = locate_window(p, idx, ioff, b, range, range + nw, bases[g]);
    });
    const int64_t total = num_elements(p.update_shape);
    const int ur = static_cast<int>(p.update_shape.size());
    std::vector<int64_t> ui(ur, 0), g_stride(ur, 0);
    int64_t step = 1;
    for (int d = ur - 1; d >= 0; --d) {
      if (p.update_window[d] >= 0) continue;
      g_stride[d] = step;
      step *= p.update_shape[d];
    }
    int64_t g = 0;
    for (int64_t u = 0; u < total; ++u) {
      if (landed[g]) {
        const int64_t* range = ranges.data() + g * 2 * nw;
        int64_t r = bases[g];
        bool in = true;
        for (int d = 0; d < ur && in; ++d) {
          const int64_t k = p.update_window[d];
          if (k < 0) continue;
          in = range[k] <= ui[d] && ui[d] < range[nw + k];
          r += ui[d] * p.input_strides[p.window_input_dim[k]];
        }
        if (in) emit(u, r, 1);
      }
      for (int d = ur - 1; d >= 0; --d) {
        g += g_stride[d];
        if (++ui[d] < p.update_shape[d]) break;
        g -= ui[d] * g_stride[d];
        ui[d] = 0;
      }
    }
  }
  if (pending > 0) flush(runs.get(), pending);
}

// Applies every update of a scatter (operands = inputs, indices, updates) to results that
// start as copies of the inputs.
using ScatterFn = void (*)(const ScatterPlan&, const std::vector<ApplyFn>& apply,
                           const Array* operands, Array* results);

template <typename I>
void scatter_all(const ScatterPlan& p, const std::vector<ApplyFn>& apply, const Array* operands,
                 Array* results) {
  const size_t n = apply.size();
  scatter_runs(p, operands[n].data<I>(), [&](const Run* runs, int64_t count) {
    for (size_t k = 0; k < n; ++k) {
      apply[k](runs, count, operands[n + 1 + k].raw(), results[k].raw(), p.run_stride);
    }
  });
}

ScatterPlan scatter_plan(const ScatterAttrs& a, const TensorSpec& input, const TensorSpec& indices,
                         const TensorSpec& update) {
  const auto& window_dims = a.update_window_dims;
  const auto& inserted = a.inserted_window_dims;
  const auto& input_batching = a.input_batching_dims;
  const auto& indices_batching = a.scatter_indices_batching_dims;
  const auto& to_operand = a.scatter_dims_to_operand_dims;
  const int64_t ivd = a.index_vector_dim;
  const int64_t rank = static_cast<int64_t>(input.shape.size());
  const int64_t update_rank = static_cast<int64_t>(update.shape.size());
  const IndexVectors vectors(indices.shape, ivd);
  require(static_cast<int64_t>(to_operand.size()) == vectors.vector_size,
          "scatter_dims_to_operand_dims must have one entry per index vector component");
  require(static_cast<int64_t>(window_dims.size() + inserted.size() + input_batching.size()) ==
              rank,
          "window, inserted and batching dims must account for every input dimension");
  require(input_batching.size() == indices_batching.size(), "batching dims differ in number");
  require(std::is_sorted(window_dims.begin(), window_dims.end()),
          "update_window_dims must be sorted");

  ScatterPlan p;
  p.input_shape = input.shape;
  p.input_strides = row_major_strides(input.shape);
  p.batch_shape = vectors.batch_shape;
  p.batch_index_strides = vectors.batch_index_strides;
  p.batch_input_dim.assign(vectors.batch_shape.size(), -1);
  p.vector_stride = vectors.vector_stride;
  p.update_shape = update.shape;
  p.window_of.assign(rank, -1);
  // Each input dim takes at most one start: from the index vector or a batch index.
  std::vector<bool> started(rank, false);
  for (int64_t d : to_operand) {
    require(0 <= d && d < rank && !started[d], "invalid scatter_dims_to_operand_dims");
    started[d] = true;
    p.component_dim.push_back(d);
  }
  for (size_t j = 0; j < input_batching.size(); ++j) {
    const int64_t d = input_batching[j], i = indices_batching[j];
    require(0 <= d && d < rank && !started[d] && 0 <= i &&
                i < static_cast<int64_t>(indices.shape.size()) && i != ivd,
            "invalid batching dims");
    started[d] = true;
    p.batch_input_dim[IndexVectors::batch_axis(i, ivd)] = d;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (contains(inserted, d) || contains(input_batching, d)) continue;
    p.window_of[d] = static_cast<int64_t>(p.window_input_dim.size());
    p.window_input_dim.push_back(d);
  }
  p.update_window.assign(update_rank, -1);
  for (size_t k = 0; k < window_dims.size(); ++k) {
    const int64_t d = window_dims[k];
    require(0 <= d && d < update_rank, "update_window_dims entry out of range");
    p.update_window[d] = static_cast<int64_t>(k);
    p.window_size.push_back(update.shape[d]);
    p.trailing = p.trailing && d == update_rank - static_cast<int64_t>(window_dims.size() - k);
  }
  for (int64_t d = 0, a = 0; d < update_rank; ++d) {
    if (p.update_window[d] >= 0) continue;
    require(a < static_cast<int64_t>(p.batch_shape.size()) && update.shape[d] == p.batch_shape[a],
            "updates shape does not match the scatter indices shape");
    ++a;
  }
  require(update_rank - window_dims.size() == p.batch_shape.size(),
          "updates rank does not match the scatter indices");
  p.window_count = num_elements(Shape(p.window_size));
  if (!p.window_input_dim.empty()) p.run_stride = p.input_strides[p.window_input_dim.back()];
  return p;
}

Step make_scatter(const OpSpec& spec) {
  const size_t n = spec.operands.size() / 2;
  require(spec.operands.size() == 2 * n + 1 && n >= 1 && spec.results.size() == n,
          "scatter expects N inputs, one index tensor and N updates");
  const ScatterAttrs a = ScatterAttrs::decode(spec);
  const bool replace = a.replace;
  const std::string& combiner = a.combiner;
  require(replace || !combiner.empty(),
          "scatter region is neither a replacement nor a single combining op");
  const TensorSpec& indices = spec.operands[n];
  std::vector<TensorSpec> outs = spec.results;
  std::vector<ApplyFn> apply;
  for (size_t k = 0; k < n; ++k) {
    const TensorSpec& in = spec.operands[k];
    const TensorSpec& up = spec.operands[n + 1 + k];
    require(in.dtype == outs[k].dtype && up.dtype == in.dtype,
            "scatter inputs, updates and results must share element types");
    require(in.shape == spec.operands[0].shape && outs[k].shape == in.shape &&
                up.shape == spec.operands[n + 1].shape,
            "all inputs (and all updates) must have the same shape");
    apply.push_back(scatter_apply_fn(in.dtype, replace ? "" : combiner));
  }
  const ScatterPlan plan = scatter_plan(a, spec.operands[0], indices, spec.operands[n + 1]);
  const ScatterFn run = dispatch_index(indices.dtype, "scatter_indices", [](auto tag) {
    return &scatter_all<typename decltype(tag)::type>;
  });
  return [outs, apply, plan, run](ExecContext&, const Array* operands, Array* results) {
    for (size_t k = 0; k < outs.size(); ++k) {
      results[k] = allocate(outs[k].dtype, outs[k].shape);
      std::memcpy(results[k].raw(), operands[k].raw(), results[k].nbytes());
    }
    run(plan, apply, operands, results);
  };
}

OPENHLO_KERNEL(stablehlo_dynamic_slice, "stablehlo.dynamic_slice", make_dynamic_slice);
OPENHLO_KERNEL(stablehlo_dynamic_update_slice, "stablehlo.dynamic_update_slice",
               make_dynamic_update_slice);
OPENHLO_KERNEL(stablehlo_gather, "stablehlo.gather", make_gather);
OPENHLO_KERNEL(stablehlo_scatter, "stablehlo.scatter", make_scatter);

}  // namespace
}  // namespace openhlo::cpu
