// Native kernels of the reductions: reduce, reduce_window and select_and_scatter.
//
// Here, reducer regions where every result is one commutative op
// (add/multiply/maximum/minimum/and/or/xor, the `combiner` of attrs.py:region_attrs) of its
// own argument pair run natively (bodies keeping one of two (value, index) pairs go to
// kernels_pair_select.cc), with inputs, init values and results of one element type (the
// interpreter's promotable bodies, e.g. an i8 input reduced in i32, fall back). Variadic ops
// then reduce each operand independently.
//
// Semantics follow stablehlo/interpreter/reducer.py: integers wrap modulo 2**width, booleans
// treat add/maximum as or and multiply/minimum as and, float maximum/minimum propagate NaN
// (numpy's maximum/minimum). Float sums may be folded in another order than the
// interpreter's (Note [float reduction order] there): reductions along a contiguous
// dimension use per-lane partial results so that they vectorize; windowed ops fold each
// window sequentially from the init value, in the interpreter's order.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "_generated/kernel_attrs.h"
#include "kernel.h"
#include "combiners.h"
#include "reductions.h"
#include "thread_pool.h"

namespace openhlo::cpu {
namespace {

// `acc` combined with p[0..n): per-lane partial results (vectorizable) when n is long.
template <Comb C, typename T>
inline T fold_contiguous(const T* p, int64_t n, T acc) {
  constexpr int64_t kLanes = 128 / sizeof(T);
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    T lanes[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = p[j];
    for (i = kLanes; i + kLanes <= n; i += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lanes[j] = combine<C>(lanes[j], p[i + j]);
    }
    for (int64_t j = 0; j < kLanes; ++j) acc = combine<C>(acc, lanes[j]);
  }
  for (; i < n; ++i) acc = combine<C>(acc, p[i]);
  return acc;
}

// Note [float sum order]
// A float sum or product depends on its order, and a fusion's generated kernel
// (codegen/kernels.py) must give the bits these kernels give when the program still runs op
// by op. So a contiguous run (the reduced suffix of a row) is folded in the generated
// kernels' order: kRowLanes(T) accumulators starting at the identity, element j into
// accumulator j % lanes up to the last whole group, the tail into accumulator 0, the
// accumulators combined as a halving tree, and the init value combined first:
// init (op) acc[0]. Rows shorter than the lanes use one accumulator. Such rows are never split
// across threads (the generated kernels do not split them).
template <typename T>
constexpr int64_t kRowLanes = sizeof(T) == 4 ? 16 : 8;

template <Comb C>
constexpr bool kOrderMatters = C == Comb::kAdd || C == Comb::kMul;

template <Comb C, typename T>
inline T fold_row_in_generated_order(const T* p, int64_t n, T init) {
  constexpr int64_t kLanes = kRowLanes<T>;
  const T identity = C == Comb::kAdd ? T(0) : T(1);
  T acc[kLanes];
  if (n < kLanes) {
    T one = identity;
    for (int64_t j = 0; j < n; ++j) one = combine<C>(one, p[j]);
    return combine<C>(init, one);
  }
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = identity;
  const int64_t main = n / kLanes * kLanes;
  for (int64_t j0 = 0; j0 < main; j0 += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = combine<C>(acc[l], p[j0 + l]);
  }
  for (int64_t j = main; j < n; ++j) acc[0] = combine<C>(acc[0], p[j]);
  for (int64_t w = kLanes / 2; w > 0; w /= 2) {
    for (int64_t l = 0; l < w; ++l) acc[l] = combine<C>(acc[l], acc[l + w]);
  }
  return combine<C>(init, acc[0]);
}

// out[j] = out[j] (op) in[j] for j < n.
template <Comb C, typename T>
inline void combine_rows(T* __restrict out, const T* __restrict in, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = combine<C>(out[j], in[j]);
}

template <Comb C, typename T>
inline void combine_value(T* out, T value, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = combine<C>(out[j], value);
}

// ---------------------------------------------------------------------------------------
// reduce

// The loop structure of one reduction, shared by its operands (one shape).
//   inner_reduced == false: the innermost (collapsed) dimension is kept; output row o
//     (length `inner`) = init (op) the input rows at kept[o] + reduced[r], for every r.
//   inner_reduced == true: output element o = init (op) the contiguous runs of `inner`
//     elements at kept[o] + reduced[r], for every r.
struct ReducePlan {
  bool empty_input = false;  // result = init everywhere
  bool inner_reduced = false;
  int64_t inner = 1;
  int64_t out_size = 0;
  std::vector<int64_t> kept;
  std::vector<int64_t> reduced;
};

ReducePlan plan_reduce(const Shape& shape, const std::vector<int64_t>& dims) {
  ReducePlan plan;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> is_reduced(rank, false);
  for (int64_t d : dims) {
    require(d >= 0 && d < rank && !is_reduced[d], "reduce dimensions must be unique and in range");
    is_reduced[d] = true;
  }
  plan.out_size = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!is_reduced[d]) plan.out_size *= shape[d];
  }
  if (num_elements(shape) == 0) {
    plan.empty_input = true;
    return plan;
  }
  // Drop size-1 dimensions and merge neighbours of the same kind: {size, stride, reduced}.
  struct Dim { int64_t size, stride; bool reduced; };
  std::vector<Dim> merged;
  const auto strides = row_major_strides(shape);
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;
    if (!merged.empty() && merged.back().reduced == is_reduced[d]) {
      merged.back().size *= shape[d];
      merged.back().stride = strides[d];
    } else {
      merged.push_back({shape[d], strides[d], is_reduced[d]});
    }
  }
  if (merged.empty()) merged.push_back({1, 1, false});
  plan.inner_reduced = merged.back().reduced;
  plan.inner = merged.back().size;
  std::vector<std::pair<int64_t, int64_t>> kept, reduced;
  for (size_t i = 0; i + 1 < merged.size(); ++i) {
    (merged[i].reduced ? reduced : kept).emplace_back(merged[i].size, merged[i].stride);
  }
  plan.kept = odometer_offsets(kept);
  plan.reduced = odometer_offsets(reduced);
  return plan;
}

template <Comb C, typename T>
void run_reduce(const ReducePlan& plan, const T* in, T init, T* out) {
  if (plan.empty_input) {
    std::fill(out, out + plan.out_size, init);
    return;
  }
  const int64_t n_kept = static_cast<int64_t>(plan.kept.size());
  const int64_t n_red = static_cast<int64_t>(plan.reduced.size());
  const int64_t inner = plan.inner;
  const int64_t* kept = plan.kept.data();
  const int64_t* reduced = plan.reduced.data();
  if (!plan.inner_reduced) {
    // Rows are cut in column blocks that stay in L1 while all reduced rows are folded in,
    // and small enough to give every thread some when there are few rows.
    int64_t block = std::min<int64_t>(inner, 2048);
    if (n_kept * ((inner + block - 1) / block) < 4 * parallel_width()) {
      block = std::max<int64_t>(256, (inner / (4 * parallel_width()) + 63) / 64 * 64);
    }
    const int64_t blocks = (inner + block - 1) / block;
    const int64_t work = n_red * std::min(inner, block);
    parallel_for(n_kept * blocks, std::max<int64_t>(1, 32768 / work), [&](int64_t b, int64_t e) {
      for (int64_t task = b; task < e; ++task) {
        const int64_t o = task / blocks;
        const int64_t col = (task % blocks) * block;
        const int64_t n = std::min(block, inner - col);
        T* row = out + o * inner + col;
        std::fill(row, row + n, init);
        for (int64_t r = 0; r < n_red; ++r) {
          combine_rows<C>(row, in + kept[o] + reduced[r] + col, n);
        }
      }
    });
    return;
  }
  // Inner dimension reduced: each output folds n_red * inner elements. Few outputs with much
  // work each are split into parts whose partial results are folded at the end.
  const int64_t per_out = n_red * inner;
  if constexpr (std::is_floating_point_v<T> && kOrderMatters<C>) {
    if (n_red == 1) {  // a contiguous row: Note [float sum order]
      parallel_for(n_kept, std::max<int64_t>(1, 32768 / per_out), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          out[o] = fold_row_in_generated_order<C>(in + kept[o] + reduced[0], inner, init);
        }
      });
      return;
    }
  }
  const int64_t width = parallel_width();
  const int64_t parts = (n_kept < width && per_out >= (1 << 16))
                            ? std::min<int64_t>(per_out / (1 << 14), 4 * width)
                            : 1;
  // Not a std::vector: vector<bool> has no data().
  std::unique_ptr<T[]> partial(parts > 1 ? new T[n_kept * parts] : nullptr);
  T* partial_data = partial.get();
  parallel_for(n_kept * parts, std::max<int64_t>(1, 32768 / (per_out / parts)),
               [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t o = task / parts;
      const int64_t k = task % parts;
      const int64_t begin = per_out * k / parts;
      const int64_t end = per_out * (k + 1) / parts;
      const T* base = in + kept[o];
      // Seed with the first element of the range so that no identity value is needed.
      T acc = base[reduced[begin / inner] + begin % inner];
      for (int64_t pos = begin + 1; pos < end;) {
        const int64_t r = pos / inner;
        const int64_t col = pos % inner;
        const int64_t n = std::min(inner - col, end - pos);
        acc = fold_contiguous<C>(base + reduced[r] + col, n, acc);
        pos += n;
      }
      if (parts == 1) {
        out[o] = combine<C>(init, acc);
      } else {
        partial_data[task] = acc;
      }
    }
  });
  if (parts > 1) {
    for (int64_t o = 0; o < n_kept; ++o) {
      T acc = init;
      for (int64_t k = 0; k < parts; ++k) acc = combine<C>(acc, partial_data[o * parts + k]);
      out[o] = acc;
    }
  }
}

using TypedReduce = void (*)(const ReducePlan&, const Array&, const Array&, Array&);

template <typename T, Comb C>
void reduce_operand(const ReducePlan& plan, const Array& in, const Array& init, Array& out) {
  run_reduce<C, T>(plan, in.data<T>(), *init.data<T>(), out.data<T>());
}

Step make_reduce(const OpSpec& spec) {
  const size_t n = check_reducer_types(spec);
  const ReduceAttrs a = ReduceAttrs::decode(spec);
  if (!a.pair_picks.empty()) return make_pair_reduce(spec, a.dimensions, a.pair_picks);
  const Comb comb = parse_combiner(a.combiner);
  auto plan = std::make_shared<const ReducePlan>(plan_reduce(spec.operands[0].shape, a.dimensions));
  std::vector<TypedReduce> loops;
  for (size_t i = 0; i < n; ++i) {
    require(num_elements(spec.results[i].shape) == plan->out_size, "unexpected result shape");
    loops.push_back(dispatch_combiner(spec.operands[i].dtype, comb, [](auto tag, auto c) {
      return static_cast<TypedReduce>(&reduce_operand<typename decltype(tag)::type, c.value>);
    }));
  }
  std::vector<TensorSpec> results = spec.results;
  return [plan, loops, results, n](ExecContext&, const Array* operands, Array* outs) {
    for (size_t i = 0; i < n; ++i) {
      outs[i] = allocate(results[i].dtype, results[i].shape);
      loops[i](*plan, operands[i], operands[n + i], outs[i]);
    }
  };
}

OPENHLO_KERNEL(stablehlo_reduce, "stablehlo.reduce", make_reduce);

// ---------------------------------------------------------------------------------------
// Windows (reduce_window, select_and_scatter)

// The loops of reduce_window. The trailing dimensions that the window leaves alone (window 1,
// no stride, padding or dilation) collapse into contiguous rows of `inner` elements. Of the
// other (windowed) dimensions, the last one is the vector dimension: for each tap along it,
// a contiguous range of output positions reads input rows at a fixed stride, so that whole
// output lines are combined at once; the leading windowed dimensions go through tap tables.
// A base-dilated last dimension is treated as a leading one (a size-1 vector dimension is
// added after it). Each output folds its taps in lexicographic order, like the interpreter.
struct WindowPlan {
  std::vector<int64_t> out_dims, window;  // leading windowed dimensions
  std::vector<std::vector<int64_t>> tables;  // per leading dim: tap_table in rows
  int64_t lead_count = 1, lead_taps = 1;
  int64_t x_out = 1, x_window = 1, x_stride = 1;  // the vector dimension
  // Per tap w of the vector dimension: output positions [x_begin, x_end) read input row
  // x * x_stride + x_shift (all others read padding).
  std::vector<int64_t> x_begin, x_end, x_shift;
  int64_t inner = 1;
};

template <Comb C, typename T>
void run_reduce_window(const WindowPlan& plan, const T* in, T init, T* out) {
  const int64_t rank = static_cast<int64_t>(plan.out_dims.size());
  const int64_t inner = plan.inner;
  const int64_t line = plan.x_out * inner;
  const int64_t work = std::max<int64_t>(1, plan.lead_taps * plan.x_window * line);
  parallel_for(plan.lead_count, std::max<int64_t>(1, 16384 / work), [&](int64_t b, int64_t e) {
    std::vector<int64_t> pos(rank), tap(rank);
    for (int64_t o = b; o < e; ++o) {
      for (int64_t d = rank - 1, rest = o; d >= 0; --d) {
        pos[d] = rest % plan.out_dims[d];
        rest /= plan.out_dims[d];
      }
      T* row = out + o * line;
      std::fill(row, row + line, init);
      std::fill(tap.begin(), tap.end(), 0);
      for (int64_t t = 0; t < plan.lead_taps; ++t) {
        int64_t offset = 0;
        bool valid = true;
        for (int64_t d = 0; d < rank; ++d) {
          const int64_t v = plan.tables[d][pos[d] * plan.window[d] + tap[d]];
          valid &= v >= 0;
          offset += v;
        }
        for (int64_t w = 0; w < plan.x_window; ++w) {
          const int64_t xb = valid ? plan.x_begin[w] : plan.x_out;
          const int64_t xe = valid ? plan.x_end[w] : plan.x_out;
          combine_value<C>(row, init, xb * inner);
          combine_value<C>(row + xe * inner, init, (plan.x_out - xe) * inner);
          const int64_t first = offset + plan.x_shift[w];
          if (inner == 1) {
            const int64_t step = plan.x_stride;
            for (int64_t x = xb; x < xe; ++x) row[x] = combine<C>(row[x], in[first + x * step]);
          } else {
            for (int64_t x = xb; x < xe; ++x) {
              combine_rows<C>(row + x * inner, in + (first + x * plan.x_stride) * inner, inner);
            }
          }
        }
        for (int64_t d = rank - 1; d >= 0 && ++tap[d] == plan.window[d]; --d) tap[d] = 0;
      }
    }
  });
}

using TypedWindow = void (*)(const WindowPlan&, const Array&, const Array&, Array&);

template <typename T, Comb C>
void reduce_window_operand(const WindowPlan& plan, const Array& in, const Array& init,
                           Array& out) {
  run_reduce_window<C, T>(plan, in.data<T>(), *init.data<T>(), out.data<T>());
}

WindowPlan plan_reduce_window(const Shape& operand, const WindowAttrs& attrs,
                              const Shape& result) {
  Shape expected;
  for (size_t d = 0; d < operand.size(); ++d) {
    expected.push_back(window_count(operand[d], attrs, d));
  }
  require(expected == result, "unexpected reduce_window result shape");
  WindowPlan plan;
  size_t windowed = operand.size();
  while (windowed > 0) {
    const size_t d = windowed - 1;
    if (attrs.window[d] != 1 || attrs.strides[d] != 1 || attrs.base[d] != 1 ||
        attrs.pad_low[d] != 0 || attrs.pad_high[d] != 0) {
      break;
    }
    plan.inner *= operand[d];
    --windowed;
  }
  Shape shape(operand.begin(), operand.begin() + windowed);
  WindowAttrs w = attrs;
  if (windowed == 0 || w.base[windowed - 1] != 1) {
    // A size-1 vector dimension that the window leaves alone.
    shape.push_back(1);
    for (auto* v : {&w.window, &w.strides, &w.base, &w.dilation}) {
      v->insert(v->begin() + windowed, 1);
    }
    for (auto* v : {&w.pad_low, &w.pad_high}) v->insert(v->begin() + windowed, 0);
  }
  const size_t x = shape.size() - 1;
  const auto strides = row_major_strides(shape);  // in rows
  for (size_t d = 0; d < x; ++d) {
    const int64_t count = window_count(shape[d], w, d);
    plan.out_dims.push_back(count);
    plan.window.push_back(w.window[d]);
    plan.tables.push_back(tap_table(shape[d], strides[d], count, w, d));
    plan.lead_count *= count;
    plan.lead_taps *= w.window[d];
  }
  plan.x_out = window_count(shape[x], w, x);
  plan.x_window = w.window[x];
  plan.x_stride = w.strides[x];
  for (int64_t k = 0; k < plan.x_window; ++k) {
    // Input index x * stride + shift is in [0, size) for x in [begin, end).
    const int64_t shift = k * w.dilation[x] - w.pad_low[x];
    auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
    const int64_t begin = std::clamp<int64_t>(ceil_div(-shift, plan.x_stride), 0, plan.x_out);
    const int64_t end =
        std::clamp<int64_t>(ceil_div(shape[x] - shift, plan.x_stride), begin, plan.x_out);
    plan.x_begin.push_back(begin);
    plan.x_end.push_back(end);
    plan.x_shift.push_back(shift);
  }
  if (plan.inner == 0 || plan.x_out == 0) plan.lead_count = 0;
  return plan;
}

// A running reduction: a window along one dimension d that reaches from the start of the
// operand to each position (window >= size, low padding window - 1, no high padding, stride
// and dilations 1; every other dimension left alone) is a prefix scan. This is how JAX spells
// cumsum/cummax/cumprod. The general loops fold size x window taps (quadratic); the scan folds
// each element once. When init combined with itself is init (bit for bit: 0 for add, 1 for
// multiply, anything for max/min), the padding taps the general loops fold first leave init
// unchanged, so the scan folds the same values in the same order: identical results.
struct PrefixPlan {
  int64_t outer = 1, n = 1, inner = 1;
};

std::optional<PrefixPlan> plan_prefix(const Shape& operand, const WindowAttrs& w) {
  std::optional<size_t> axis;
  for (size_t d = 0; d < operand.size(); ++d) {
    const bool identity = w.window[d] == 1 && w.strides[d] == 1 && w.base[d] == 1 &&
                          w.pad_low[d] == 0 && w.pad_high[d] == 0;
    if (identity) continue;
    const bool prefix = !axis && w.strides[d] == 1 && w.base[d] == 1 && w.dilation[d] == 1 &&
                        w.pad_high[d] == 0 && w.pad_low[d] == w.window[d] - 1 &&
                        w.window[d] >= operand[d];
    if (!prefix) return std::nullopt;
    axis = d;
  }
  if (!axis) return std::nullopt;
  PrefixPlan plan;
  for (size_t d = 0; d < operand.size(); ++d) {
    int64_t& part = d < *axis ? plan.outer : d == *axis ? plan.n : plan.inner;
    part *= operand[d];
  }
  return plan;
}

template <Comb C, typename T>
bool init_is_idempotent(T init) {
  const T twice = combine<C>(init, init);
  return std::memcmp(&twice, &init, sizeof(T)) == 0;
}

template <Comb C, typename T>
void run_prefix(const PrefixPlan& plan, const T* in, T init, T* out) {
  if (plan.outer * plan.n * plan.inner == 0) return;
  // Tasks: (outer index, a block of the kept inner positions), each scanned down the axis.
  const int64_t block = std::min<int64_t>(plan.inner, 1024);
  const int64_t blocks = (plan.inner + block - 1) / block;
  const int64_t work = plan.n * block;
  parallel_for(plan.outer * blocks, std::max<int64_t>(1, 16384 / work), [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t o = task / blocks;
      const int64_t j0 = (task % blocks) * block;
      const int64_t j1 = std::min(plan.inner, j0 + block);
      const T* src = in + o * plan.n * plan.inner;
      T* dst = out + o * plan.n * plan.inner;
      for (int64_t j = j0; j < j1; ++j) dst[j] = combine<C>(init, src[j]);
      for (int64_t i = 1; i < plan.n; ++i) {
        const T* s = src + i * plan.inner;
        T* d = dst + i * plan.inner;
        const T* prev = d - plan.inner;
        for (int64_t j = j0; j < j1; ++j) d[j] = combine<C>(prev[j], s[j]);
      }
    }
  });
}

using TypedPrefix = bool (*)(const PrefixPlan&, const Array&, const Array&, Array&);

// false (nothing written) when init is not idempotent: the general loops run instead.
template <typename T, Comb C>
bool prefix_operand(const PrefixPlan& plan, const Array& in, const Array& init, Array& out) {
  const T value = *init.data<T>();
  if (!init_is_idempotent<C>(value)) return false;
  run_prefix<C, T>(plan, in.data<T>(), value, out.data<T>());
  return true;
}

Step make_reduce_window(const OpSpec& spec) {
  const size_t n = check_reducer_types(spec);
  const ReduceWindowAttrs a = ReduceWindowAttrs::decode(spec);
  const Shape& shape = spec.operands[0].shape;
  const WindowAttrs w = window_attrs(a, a.base_dilations, a.window_dilations, shape.size());
  if (!a.pair_picks.empty()) return make_pair_reduce_window(spec, w, a.pair_picks);
  const Comb comb = parse_combiner(a.combiner);
  auto plan = std::make_shared<const WindowPlan>(
      plan_reduce_window(shape, w, spec.results[0].shape));
  const std::optional<PrefixPlan> prefix = plan_prefix(shape, w);
  std::vector<TypedWindow> loops;
  std::vector<TypedPrefix> scans;
  for (size_t i = 0; i < n; ++i) {
    require(spec.results[i].shape == spec.results[0].shape, "results of different shapes");
    loops.push_back(dispatch_combiner(spec.operands[i].dtype, comb, [](auto tag, auto c) {
      return static_cast<TypedWindow>(
          &reduce_window_operand<typename decltype(tag)::type, c.value>);
    }));
    if (prefix) {
      scans.push_back(dispatch_combiner(spec.operands[i].dtype, comb, [](auto tag, auto c) {
        return static_cast<TypedPrefix>(&prefix_operand<typename decltype(tag)::type, c.value>);
      }));
    }
  }
  std::vector<TensorSpec> results = spec.results;
  return [plan, prefix, loops, scans, results, n](ExecContext&, const Array* operands,
                                                  Array* outs) {
    for (size_t i = 0; i < n; ++i) {
      outs[i] = allocate(results[i].dtype, results[i].shape);
      if (prefix && scans[i](*prefix, operands[i], operands[n + i], outs[i])) continue;
      loops[i](*plan, operands[i], operands[n + i], outs[i]);
    }
  };
}

OPENHLO_KERNEL(stablehlo_reduce_window, "stablehlo.reduce_window", make_reduce_window);

// ---------------------------------------------------------------------------------------
// select_and_scatter with a compare select region (GE/GT/LE/LT) and a simple scatter region:
// per window, the first valid tap is selected and every later tap replaces the selection
// unless select(selected, tap) holds (windows.py:_select); then the source values are
// folded into init at the selected indices in source order.

enum class Select { kGE, kGT, kLE, kLT };

template <Select S, typename T>
inline bool keeps(T best, T candidate) {
  if constexpr (S == Select::kGE) return best >= candidate;
  if constexpr (S == Select::kGT) return best > candidate;
  if constexpr (S == Select::kLE) return best <= candidate;
  if constexpr (S == Select::kLT) return best < candidate;
}

struct ScatterPlan {
  std::vector<int64_t> out_dims, window;
  std::vector<std::vector<int64_t>> tables;
  int64_t windows = 1, taps = 1, size = 0;
};

template <Select S, Comb C, typename T>
void run_select_and_scatter(const ScatterPlan& plan, const T* operand, const T* source,
                            T init, T* out) {
  const int64_t rank = static_cast<int64_t>(plan.out_dims.size());
  std::vector<int64_t> chosen(plan.windows);
  int64_t* chosen_data = chosen.data();
  parallel_for(plan.windows, std::max<int64_t>(1, 8192 / plan.taps), [&](int64_t b, int64_t e) {
    std::vector<int64_t> pos(rank), tap(rank);
    for (int64_t o = b; o < e; ++o) {
      for (int64_t d = rank - 1, rest = o; d >= 0; --d) {
        pos[d] = rest % plan.out_dims[d];
        rest /= plan.out_dims[d];
      }
      std::fill(tap.begin(), tap.end(), 0);
      int64_t best = -1;
      for (int64_t t = 0; t < plan.taps; ++t) {
        int64_t offset = 0;
        bool valid = true;
        for (int64_t d = 0; d < rank; ++d) {
          const int64_t v = plan.tables[d][pos[d] * plan.window[d] + tap[d]];
          valid &= v >= 0;
          offset += v;
        }
        if (valid && (best < 0 || !keeps<S>(operand[best], operand[offset]))) best = offset;
        for (int64_t d = rank - 1; d >= 0 && ++tap[d] == plan.window[d]; --d) tap[d] = 0;
      }
      chosen_data[o] = best;
    }
  });
  std::fill(out, out + plan.size, init);
  for (int64_t o = 0; o < plan.windows; ++o) {
    if (chosen_data[o] >= 0) out[chosen_data[o]] = combine<C>(out[chosen_data[o]], source[o]);
  }
}

using TypedScatter = void (*)(const ScatterPlan&, const Array*, Array&);

template <Select S, typename T, Comb C>
void select_and_scatter_arrays(const ScatterPlan& plan, const Array* operands, Array& out) {
  run_select_and_scatter<S, C, T>(plan, operands[0].data<T>(), operands[1].data<T>(),
                                  *operands[2].data<T>(), out.data<T>());
}

template <Select S>
TypedScatter scatter_loop(DType dtype, Comb comb) {
  return dispatch_combiner(dtype, comb, [](auto tag, auto c) {
    return static_cast<TypedScatter>(
        &select_and_scatter_arrays<S, typename decltype(tag)::type, c.value>);
  });
}

Step make_select_and_scatter(const OpSpec& spec) {
  require(spec.operands.size() == 3 && spec.results.size() == 1,
          "expected operand, source and init value");
  const DType dtype = spec.operands[0].dtype;
  for (const TensorSpec& t : {spec.operands[1], spec.operands[2], spec.results[0]}) {
    require(t.dtype == dtype, "select_and_scatter with mixed element types");
  }
  require(spec.operands[2].shape.empty(), "init value must be a scalar");
  const SelectAndScatterAttrs a = SelectAndScatterAttrs::decode(spec);
  require(a.comparator_direction.has_value(), "select region is not one compare of its arguments");
  const std::string& direction = *a.comparator_direction;
  require(a.comparator_type != "TOTALORDER", "select with a TOTALORDER compare");
  const Comb comb = parse_combiner(a.combiner);

  const Shape& shape = spec.operands[0].shape;
  const size_t rank = shape.size();
  WindowAttrs w = window_attrs(a, std::nullopt, std::nullopt, rank);
  auto plan = std::make_shared<ScatterPlan>();
  const auto strides = row_major_strides(shape);
  Shape windows;
  for (size_t d = 0; d < rank; ++d) {
    windows.push_back(window_count(shape[d], w, d));
    plan->out_dims.push_back(windows[d]);
    plan->window.push_back(w.window[d]);
    plan->tables.push_back(tap_table(shape[d], strides[d], windows[d], w, d));
    plan->windows *= windows[d];
    plan->taps *= w.window[d];
  }
  plan->size = num_elements(shape);
  require(spec.operands[1].shape == windows, "source shape does not match the windows");

  TypedScatter loop;
  if (direction == "GE") {
    loop = scatter_loop<Select::kGE>(dtype, comb);
  } else if (direction == "GT") {
    loop = scatter_loop<Select::kGT>(dtype, comb);
  } else if (direction == "LE") {
    loop = scatter_loop<Select::kLE>(dtype, comb);
  } else if (direction == "LT") {
    loop = scatter_loop<Select::kLT>(dtype, comb);
  } else {
    throw Unsupported("select compare direction " + direction);
  }
  TensorSpec result = spec.results[0];
  std::shared_ptr<const ScatterPlan> frozen = plan;
  return [frozen, loop, result](ExecContext&, const Array* operands, Array* outs) {
    outs[0] = allocate(result.dtype, result.shape);
    loop(*frozen, operands, outs[0]);
  };
}

OPENHLO_KERNEL(stablehlo_select_and_scatter, "stablehlo.select_and_scatter",
               make_select_and_scatter);

}  // namespace
}  // namespace openhlo::cpu
