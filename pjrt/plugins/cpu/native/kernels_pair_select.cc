// Native reduce and reduce_window for bodies that keep one of two (value, index) pairs:
// argmax/argmin (torch.argmax, max/min with a dim, jnp.argmax) and max pooling with indices
// (torch's max_pool2d_with_indices).
//
// The body arrives as its pick table (attrs.py "pair_picks", ArgReduce.picks in
// stablehlo/ir/regions.py): for the state of the value pair (first <, ==, > second, or which
// of them is NaN) and the order of the index pair, which side the value and the index
// results keep. Looking the table up *is* the body, for every input. So, folded in the
// interpreter's order (stablehlo/interpreter/reducer.py, fold_reduce: the init pair first,
// then the elements in index order one at a time up to SEQUENTIAL_LIMIT of them, a pairwise
// tree beyond), the results are the interpreter's bits: ties, NaNs and signed zeros
// included. A window's padding and base-dilation holes hold the init pair, as the
// interpreter pads each operand with its init value.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel.h"
#include "kernels_elementwise.h"
#include "reductions.h"
#include "thread_pool.h"

namespace openhlo::cpu {
namespace {

constexpr int64_t kSequentialLimit = 256;  // reducer.py: SEQUENTIAL_LIMIT
constexpr size_t kValueStates = 6;         // regions.py: VALUE_STATES
constexpr size_t kIndexRelations = 3;      // lt, eq, gt
constexpr size_t kMaxRank = 16;            // of a windowed operand (a window's position)

// A value as the body's comparisons see it (16-bit floats widened exactly).
template <typename V>
inline auto comparable(V v) {
  if constexpr (std::is_same_v<V, bf16_t>) {
    return elementwise::bf16_to_float(v.bits);
  } else if constexpr (std::is_same_v<V, f16_t>) {
    return elementwise::f16_to_float(v.bits);
  } else {
    return v;
  }
}

// The 18 two-bit picks packed in one word, entry k at bits 2k: looking one up is a shift,
// not a load, so the row loops below keep everything in registers.
using PickTable = uint64_t;

// take_b ? b : a on the bits (a mask, not a jump: g++ turns a float ?: into a branch,
// which random data mispredicts half the time).
template <typename T>
inline T choose(bool take_b, T b, T a) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t,
               std::conditional_t<sizeof(T) == 4, uint32_t,
               std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(T) == sizeof(Bits) && std::is_trivially_copyable_v<T>);
  Bits ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const Bits mask = static_cast<Bits>(-static_cast<Bits>(take_b));
  const Bits r = static_cast<Bits>((ua & ~mask) | (ub & mask));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// (av, ai) = body((av, ai), (bv, bi)). Branch-free (masks, no jumps): on real data the
// comparisons go either way at random.
template <typename V, typename I>
inline void apply(PickTable picks, V& av, I& ai, V bv, I bi) {
  const auto a = comparable(av);
  const auto b = comparable(bv);
  // lt 0, eq 1, gt 2 (VALUE_STATES' order)
  size_t state = static_cast<size_t>(a == b) + 2 * static_cast<size_t>(a > b);
  if constexpr (std::is_floating_point_v<decltype(a)>) {
    const bool a_nan = a != a, b_nan = b != b;
    // nan_first 3, nan_second 4, nan_both 5
    const size_t nan_state =
        3 + static_cast<size_t>(!a_nan) + 2 * static_cast<size_t>(a_nan & b_nan);
    state = (a_nan | b_nan) ? nan_state : state;
  }
  const size_t relation = static_cast<size_t>(ai == bi) + 2 * static_cast<size_t>(ai > bi);
  const uint64_t pick = picks >> (2 * (state * kIndexRelations + relation));
  av = choose((pick & 1) != 0, bv, av);
  ai = choose((pick & 2) != 0, bi, ai);
}

// Folds the `count` pairs of `values`/`indices` into (v, i), which holds the init pair, as
// reducer.py:fold_reduce does. The pairwise tree overwrites the buffers.
template <typename V, typename I>
void fold(PickTable picks, V* values, I* indices, int64_t count, V& v, I& i) {
  if (count <= kSequentialLimit) {
    for (int64_t k = 0; k < count; ++k) apply(picks, v, i, values[k], indices[k]);
    return;
  }
  for (int64_t n = count; n > 1;) {
    const int64_t pairs = n / 2;
    for (int64_t k = 0; k < pairs; ++k) {
      V left = values[2 * k];
      I left_index = indices[2 * k];
      apply(picks, left, left_index, values[2 * k + 1], indices[2 * k + 1]);
      values[k] = left;
      indices[k] = left_index;
    }
    if (n % 2) {
      values[pairs] = values[n - 1];
      indices[pairs] = indices[n - 1];
    }
    n = pairs + n % 2;
  }
  apply(picks, v, i, values[0], indices[0]);
}

PickTable pick_table(const std::vector<int64_t>& picks) {
  PickTable table = 0;
  require(picks.size() == kValueStates * kIndexRelations, "pair_picks must have 18 entries");
  for (size_t k = 0; k < picks.size(); ++k) {
    require(picks[k] >= 0 && picks[k] <= 3, "pair_picks entries must be in [0, 3]");
    table |= static_cast<uint64_t>(picks[k]) << (2 * k);
  }
  return table;
}

// Where output element o reads its `count` elements: gather(o, values, indices) fills the
// buffers (init pairs where a window has no element).
template <typename V, typename I, typename Gather>
void run_pair(int64_t outputs, int64_t count, PickTable picks, const Array* operands,
              Array* outs, Gather gather) {
  const V init_value = *operands[2].data<V>();
  const I init_index = *operands[3].data<I>();
  V* out_values = outs[0].data<V>();
  I* out_indices = outs[1].data<I>();
  const V* in_values = operands[0].data<V>();
  const I* in_indices = operands[1].data<I>();
  parallel_for(outputs, std::max<int64_t>(1, 8192 / std::max<int64_t>(count, 1)),
               [&](int64_t b, int64_t e) {
    // Not std::vector: vector<bool> has no data().
    std::unique_ptr<V[]> values(new V[count]);
    std::unique_ptr<I[]> indices(new I[count]);
    for (int64_t o = b; o < e; ++o) {
      gather(o, in_values, in_indices, init_value, init_index, values.get(), indices.get());
      V v = init_value;
      I i = init_index;
      fold(picks, values.get(), indices.get(), count, v, i);
      out_values[o] = v;
      out_indices[o] = i;
    }
  });
}

// One tap for a row of n outputs: output j folds in the element `column[j * stride]` past
// `values`/`indices` (the init pair where that is -1, padding). No pointer aliases another,
// so the accumulators and the pick table stay in registers.
template <typename V, typename I>
void fold_tap(PickTable picks, V* __restrict acc_values, I* __restrict acc_indices,
              const V* __restrict values, const I* __restrict indices,
              const int64_t* __restrict column, int64_t stride, int64_t n, V init_value,
              I init_index) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = column[j * stride];
    const int64_t safe = at >= 0 ? at : 0;
    apply(picks, acc_values[j], acc_indices[j], at >= 0 ? values[safe] : init_value,
          at >= 0 ? indices[safe] : init_index);
  }
}

// A windowed fold of at most kSequentialLimit taps (init pair, then the taps in order: the
// interpreter's sequential fold) a whole output row at a time: for each tap, every output
// of the innermost output dimension takes its element in one pass over the row. The
// position of the row and each tap's offset along the outer dimensions are worked out once
// per row and tap, not once per output and tap, and no tap is copied into a buffer first.
// `tables[d][p * window[d] + t]`: the offset of tap t of position p along dimension d, or
// -1 in padding (tap_table); dimensions that are not `moving` have window 1.
template <typename V, typename I>
void run_pair_rows(PickTable picks, const Array* operands, Array* outs,
                   const Shape& out_shape, const Shape& window,
                   const std::vector<std::vector<int64_t>>& tables,
                   const std::vector<size_t>& moving, const std::array<bool, kMaxRank>& is_moving,
                   int64_t taps) {
  const V init_value = *operands[2].data<V>();
  const I init_index = *operands[3].data<I>();
  const V* in_values = operands[0].data<V>();
  const I* in_indices = operands[1].data<I>();
  V* out_values = outs[0].data<V>();
  I* out_indices = outs[1].data<I>();
  const size_t last = out_shape.size() - 1;
  const int64_t row_length = out_shape[last];
  const int64_t rows = row_length == 0 ? 0 : num_elements(out_shape) / row_length;
  const int64_t last_window = window[last];  // 1 where the last dimension does not move
  const int64_t* last_table = tables[last].data();
  // The moving dimensions before the last; the last one's taps are the innermost.
  const size_t outer = moving.size() - (is_moving[last] ? 1 : 0);
  const int64_t outer_taps = taps / last_window;
  parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(taps * row_length, 1)),
               [&](int64_t b, int64_t e) {
    std::unique_ptr<V[]> acc_values(new V[row_length]);
    std::unique_ptr<I[]> acc_indices(new I[row_length]);
    for (int64_t r = b; r < e; ++r) {
      int64_t pos[kMaxRank], tap[kMaxRank] = {};
      int64_t base = 0;
      for (int64_t d = static_cast<int64_t>(last) - 1, rest = r; d >= 0; --d) {
        pos[d] = rest % out_shape[d];
        rest /= out_shape[d];
        if (!is_moving[d]) base += tables[d][pos[d]];
      }
      std::fill(acc_values.get(), acc_values.get() + row_length, init_value);
      std::fill(acc_indices.get(), acc_indices.get() + row_length, init_index);
      V* av = acc_values.get();
      I* ai = acc_indices.get();
      for (int64_t t = 0; t < outer_taps; ++t) {
        int64_t offset = base;
        bool valid = true;
        for (size_t k = 0; k < outer; ++k) {
          const size_t d = moving[k];
          const int64_t v = tables[d][pos[d] * window[d] + tap[k]];
          valid &= v >= 0;
          offset += v;
        }
        for (int64_t l = 0; l < last_window; ++l) {
          if (!valid) {  // a padding row of taps: the init pair for every output
            for (int64_t j = 0; j < row_length; ++j) {
              apply(picks, av[j], ai[j], init_value, init_index);
            }
            continue;
          }
          fold_tap(picks, av, ai, in_values + offset, in_indices + offset, last_table + l,
                   last_window, row_length, init_value, init_index);
        }
        for (int64_t k = static_cast<int64_t>(outer) - 1;
             k >= 0 && ++tap[k] == window[moving[k]]; --k) {
          tap[k] = 0;
        }
      }
      std::copy(av, av + row_length, out_values + r * row_length);
      std::copy(ai, ai + row_length, out_indices + r * row_length);
    }
  });
}

// Checks (values, indices, init value, init index) -> (values, indices) and calls
// fn(TypeTag<V>, TypeTag<I>).
template <typename Fn>
Step dispatch_pair(const OpSpec& spec, Fn&& fn) {
  require(check_reducer_types(spec) == 2, "a pair body reduces two inputs");
  const DType index_type = spec.operands[1].dtype;
  return elementwise::dispatch_numeric(spec.operands[0].dtype, [&](auto value_tag) -> Step {
    if (index_type == DType::S32) return fn(value_tag, TypeTag<int32_t>{});
    if (index_type == DType::S64) return fn(value_tag, TypeTag<int64_t>{});
    throw Unsupported(std::string("pair body with ") + dtype_name(index_type) + " indices");
  });
}

}  // namespace

Step make_pair_reduce(const OpSpec& spec, const std::vector<int64_t>& dimensions,
                      const std::vector<int64_t>& picks_record) {
  const PickTable picks = pick_table(picks_record);
  const Shape& shape = spec.operands[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> is_reduced(rank, false);
  for (int64_t d : dimensions) {
    require(d >= 0 && d < rank && !is_reduced[d], "reduce dimensions must be unique and in range");
    is_reduced[d] = true;
  }
  // Elements of output o: kept[o] + reduced[r], r in the reduced dims' lexicographic order.
  const auto strides = row_major_strides(shape);
  std::vector<std::pair<int64_t, int64_t>> kept_dims, reduced_dims;
  Shape out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    (is_reduced[d] ? reduced_dims : kept_dims).emplace_back(shape[d], strides[d]);
    if (!is_reduced[d]) out_shape.push_back(shape[d]);
  }
  for (const TensorSpec& result : spec.results) {
    require(result.shape == out_shape, "unexpected reduce result shape");
  }
  auto kept = std::make_shared<const std::vector<int64_t>>(odometer_offsets(kept_dims));
  auto reduced = std::make_shared<const std::vector<int64_t>>(odometer_offsets(reduced_dims));
  const int64_t outputs = num_elements(out_shape);
  const int64_t count = static_cast<int64_t>(reduced->size());  // 0 if a reduced dim is
  const std::vector<TensorSpec> results = spec.results;
  return dispatch_pair(spec, [&](auto value_tag, auto index_tag) -> Step {
    using V = typename decltype(value_tag)::type;
    using I = typename decltype(index_tag)::type;
    return [=](ExecContext&, const Array* operands, Array* outs) {
      for (size_t k = 0; k < 2; ++k) outs[k] = allocate(results[k].dtype, results[k].shape);
      run_pair<V, I>(outputs, count, picks, operands, outs,
                     [&](int64_t o, const V* in_values, const I* in_indices, V, I, V* values,
                         I* indices) {
        const int64_t base = (*kept)[o];
        for (int64_t r = 0; r < count; ++r) {
          values[r] = in_values[base + (*reduced)[r]];
          indices[r] = in_indices[base + (*reduced)[r]];
        }
      });
    };
  });
}

Step make_pair_reduce_window(const OpSpec& spec, const WindowAttrs& w,
                             const std::vector<int64_t>& picks_record) {
  const PickTable picks = pick_table(picks_record);
  const Shape& shape = spec.operands[0].shape;
  const size_t rank = shape.size();
  require(rank <= kMaxRank, "reduce_window of rank above 16");
  const auto strides = row_major_strides(shape);
  Shape out_shape, window;
  auto tables = std::make_shared<std::vector<std::vector<int64_t>>>();
  // The dimensions a window moves along; in the others (window 1, no padding or base
  // dilation: batch and channels of a pooling) every tap of window o reads element o.
  std::vector<size_t> moving;
  std::array<bool, kMaxRank> is_moving{};
  int64_t taps = 1;
  for (size_t d = 0; d < rank; ++d) {
    out_shape.push_back(window_count(shape[d], w, d));
    window.push_back(w.window[d]);
    tables->push_back(tap_table(shape[d], strides[d], out_shape[d], w, d));
    taps *= w.window[d];
    if (w.window[d] != 1 || w.pad_low[d] != 0 || w.pad_high[d] != 0 || w.base[d] != 1) {
      moving.push_back(d);
      is_moving[d] = true;
    }
  }
  for (const TensorSpec& result : spec.results) {
    require(result.shape == out_shape, "unexpected reduce_window result shape");
  }
  const int64_t outputs = num_elements(out_shape);
  const std::vector<TensorSpec> results = spec.results;
  std::shared_ptr<const std::vector<std::vector<int64_t>>> frozen = tables;
  return dispatch_pair(spec, [&](auto value_tag, auto index_tag) -> Step {
    using V = typename decltype(value_tag)::type;
    using I = typename decltype(index_tag)::type;
    return [=](ExecContext&, const Array* operands, Array* outs) {
      for (size_t k = 0; k < 2; ++k) outs[k] = allocate(results[k].dtype, results[k].shape);
      if (taps <= kSequentialLimit && rank > 0) {
        run_pair_rows<V, I>(picks, operands, outs, out_shape, window, *frozen, moving, is_moving,
                            taps);
        return;
      }
      const int64_t num_moving = static_cast<int64_t>(moving.size());
      run_pair<V, I>(outputs, taps, picks, operands, outs,
                     [&](int64_t o, const V* in_values, const I* in_indices, V init_value,
                         I init_index, V* values, I* indices) {
        // The window's taps in lexicographic order (the interpreter's window axes).
        int64_t pos[kMaxRank], tap[kMaxRank];
        int64_t base = 0;
        for (int64_t d = static_cast<int64_t>(rank) - 1, rest = o; d >= 0; --d) {
          pos[d] = rest % out_shape[d];
          rest /= out_shape[d];
          if (!is_moving[d]) base += (*frozen)[d][pos[d]];
        }
        std::fill(tap, tap + num_moving, 0);
        for (int64_t t = 0; t < taps; ++t) {
          int64_t offset = base;
          bool valid = true;
          for (int64_t k = 0; k < num_moving; ++k) {
            const size_t d = moving[k];
            const int64_t v = (*frozen)[d][pos[d] * window[d] + tap[k]];
            valid &= v >= 0;
            offset += v;
          }
          values[t] = valid ? in_values[offset] : init_value;
          indices[t] = valid ? in_indices[offset] : init_index;
          for (int64_t k = num_moving - 1; k >= 0 && ++tap[k] == window[moving[k]]; --k) {
            tap[k] = 0;
          }
        }
      });
    };
  });
}

}  // namespace openhlo::cpu
