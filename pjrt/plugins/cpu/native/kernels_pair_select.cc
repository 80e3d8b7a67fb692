// Native reduce and reduce_window for bodies that keep one of two (value, index) pairs:
// argmax/argmin (torch.argmax, max/min with a dim, jnp.argmax) and max pooling with indices
// (torch's max_pool2d_with_indices); and for bodies that keep one of two values by the same
// kind of comparisons (a max pooling whose unused indices the compiler dropped,
// xla_core/passes/prune_argreduce_index.py: its table has a value side per state only).
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

// The index type of a value-only body (one operand: a max pooling whose indices nobody
// used, xla_core/passes/prune_argreduce_index.py): no index is read, kept or written.
struct NoIndex {};
template <typename I>
constexpr bool kIndexed = !std::is_same_v<I, NoIndex>;

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

// The body as two bit sets: bit k of `value` (`index`) is set when the body keeps the
// second argument's value (index), for k = state * 3 + relation of a pair body, k = state
// of a value-only one. Looking one up is a shift, so the loops below keep everything in
// registers, and the vectorizer turns the shift into a per-lane one.
struct Picks {
  uint32_t value = 0, index = 0;
};

// The state of the value pair (first <, ==, > second, or which of them is NaN) as
// VALUE_STATES numbers it. Arithmetic on 0/1 words, no jumps: on real data the comparisons
// go either way at random, and a loop of it vectorizes.
template <typename C>
inline uint32_t value_state(C a, C b) {
  const uint32_t ordered = static_cast<uint32_t>(a == b) + 2 * static_cast<uint32_t>(a > b);
  if constexpr (std::is_floating_point_v<C>) {
    const uint32_t a_nan = a != a, b_nan = b != b, any = a_nan | b_nan;
    // nan_first 3, nan_second 4, nan_both 5
    const uint32_t nan_state = 3 + (a_nan ^ 1) + 2 * (a_nan & b_nan);
    return (1 - any) * ordered + any * nan_state;
  } else {
    return ordered;
  }
}

// lt 0, eq 1, gt 2 of the index pair.
template <typename I>
inline uint32_t index_relation(I a, I b) {
  return static_cast<uint32_t>(a == b) + 2 * static_cast<uint32_t>(a > b);
}

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

// (av, ai) = body((av, ai), (bv, bi)); the index arguments are ignored without indices.
template <typename V, typename I>
inline void apply(Picks picks, V& av, I& ai, V bv, I bi) {
  const uint32_t state = value_state(comparable(av), comparable(bv));
  if constexpr (kIndexed<I>) {
    const uint32_t k = state * kIndexRelations + index_relation(ai, bi);
    av = choose(((picks.value >> k) & 1) != 0, bv, av);
    ai = choose(((picks.index >> k) & 1) != 0, bi, ai);
  } else {
    av = choose(((picks.value >> state) & 1) != 0, bv, av);
  }
}

// Folds the `count` pairs of `values`/`indices` into (v, i), which holds the init pair, as
// reducer.py:fold_reduce does. The pairwise tree overwrites the buffers.
template <typename V, typename I>
void fold(Picks picks, V* values, I* indices, int64_t count, V& v, I& i) {
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

// 18 entries (value_side + 2 * index_side per state and relation: ArgReduce.picks) for a
// pair body, 6 (the value side per state: region_value_picks) for a value-only one.
Picks pick_bits(const std::vector<int64_t>& record, bool indexed) {
  const size_t size = indexed ? kValueStates * kIndexRelations : kValueStates;
  require(record.size() == size, "pair_picks must have " + std::to_string(size) + " entries");
  Picks picks;
  for (size_t k = 0; k < record.size(); ++k) {
    require(record[k] >= 0 && record[k] <= (indexed ? 3 : 1), "pair_picks entry out of range");
    picks.value |= static_cast<uint32_t>(record[k] & 1) << k;
    picks.index |= static_cast<uint32_t>((record[k] >> 1) & 1) << k;
  }
  return picks;
}

// The operands and results a kernel reads and writes; the index pointers are null without
// indices.
template <typename V, typename I>
struct PairData {
  const V* in_values;
  const I* in_indices;
  V init_value;
  I init_index;
  V* out_values;
  I* out_indices;

  PairData(const Array* operands, Array* outs) {
    constexpr int n = kIndexed<I> ? 2 : 1;
    in_values = operands[0].data<V>();
    init_value = *operands[n].data<V>();
    out_values = outs[0].data<V>();
    if constexpr (kIndexed<I>) {
      in_indices = operands[1].data<I>();
      init_index = *operands[3].data<I>();
      out_indices = outs[1].data<I>();
    } else {
      in_indices = nullptr;
      init_index = {};
      out_indices = nullptr;
    }
  }
};

// Where output element o reads its `count` elements: gather(o, data, values, indices)
// fills the buffers (init pairs where a window has no element).
template <typename V, typename I, typename Gather>
void run_pair(int64_t outputs, int64_t count, Picks picks, const PairData<V, I>& data,
              Gather gather) {
  parallel_for(outputs, std::max<int64_t>(1, 8192 / std::max<int64_t>(count, 1)),
               [&](int64_t b, int64_t e) {
    // Not std::vector: vector<bool> has no data().
    std::unique_ptr<V[]> values(new V[count]);
    std::unique_ptr<I[]> indices(new I[count]);
    for (int64_t o = b; o < e; ++o) {
      gather(o, data, values.get(), indices.get());
      V v = data.init_value;
      I i = data.init_index;
      fold(picks, values.get(), indices.get(), count, v, i);
      data.out_values[o] = v;
      if constexpr (kIndexed<I>) data.out_indices[o] = i;
    }
  });
}

// The tables of the bodies the PyTorch lowering writes for max pooling
// (frameworks/torch/lowering/pooling.py: the larger value, NaN, the lower index wins) with
// its indices, and without them (prune-argreduce-index: the first of equal values), known
// when the kernels are compiled, so that their loops fold the table away. Any other table
// runs the same code with its bits read at run time (Picks), to the same results.
template <uint32_t VALUE, uint32_t INDEX>
struct KnownPicks {
  static constexpr uint32_t value = VALUE, index = INDEX;
};
using TorchPoolPicks = KnownPicks<0x7037, 0x7037>;
using FirstMaxPicks = KnownPicks<0x11, 0>;

// Whether the body keeps the second value (`value`) and the second index (`index`): bit
// k of the table for the one state and relation that hold, as and/or of comparisons (mask
// operations in a vectorized loop, where a per-lane shift would be slower).
template <typename Table, typename V, typename I>
inline void takes_second(const Table& table, V av, V bv, I ai, I bi, bool& value,
                         bool& index) {
  bool a_nan = false, b_nan = false;
  if constexpr (std::is_floating_point_v<V>) {
    a_nan = av != av;
    b_nan = bv != bv;
  }
  // VALUE_STATES' order; the ordered comparisons are all false where a NaN is
  const bool states[kValueStates] = {av < bv, av == bv, av > bv, a_nan && !b_nan,
                                     !a_nan && b_nan, a_nan && b_nan};
  value = false;
  index = false;
  if constexpr (kIndexed<I>) {
    const bool relations[kIndexRelations] = {ai < bi, ai == bi, ai > bi};
    for (size_t s = 0; s < kValueStates; ++s) {
      for (size_t r = 0; r < kIndexRelations; ++r) {
        const size_t k = s * kIndexRelations + r;
        const bool holds = states[s] & relations[r];
        value |= holds & (((table.value >> k) & 1) != 0);
        index |= holds & (((table.index >> k) & 1) != 0);
      }
    }
  } else {
    for (size_t s = 0; s < kValueStates; ++s) value |= states[s] & (((table.value >> s) & 1) != 0);
  }
}

// One tap for outputs [0, n) of a row whose elements all lie inside the operand: output j
// folds in element j * stride of `values`/`indices`. The same bits as `apply`, written so
// that g++ vectorizes it (strided loads, masks, blends); STRIDE is the window stride when
// it is 1 or 2 (contiguous or deinterleaved loads), else 0 and `stride` is read.
// Runs shorter than this go one output at a time: the vectorized loop's set-up costs more
// than it saves on them (pooling rows of 8 outputs).
constexpr int64_t kShortRun = 16;

template <int64_t STRIDE, typename Table, typename V, typename I>
void fold_interior(const Table& table, V* __restrict acc_values, I* __restrict acc_indices,
                   const V* __restrict values, const I* __restrict indices, int64_t stride,
                   int64_t n) {
  const int64_t step = STRIDE > 0 ? STRIDE : stride;
  if (!std::is_arithmetic_v<V> || n < kShortRun) {  // 16-bit floats: widened one at a time
    const Picks picks{table.value, table.index};
    I none{};
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (kIndexed<I>) {
        apply(picks, acc_values[j], acc_indices[j], values[j * step], indices[j * step]);
      } else {
        apply(picks, acc_values[j], none, values[j * step], none);
      }
    }
    return;
  }
  if constexpr (!std::is_arithmetic_v<V>) {
    return;
  } else if constexpr (kIndexed<I>) {
    for (int64_t j = 0; j < n; ++j) {
      const V av = acc_values[j], bv = values[j * step];
      const I ai = acc_indices[j], bi = indices[j * step];
      bool value, index;
      takes_second(table, av, bv, ai, bi, value, index);
      acc_values[j] = value ? bv : av;
      acc_indices[j] = index ? bi : ai;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const V av = acc_values[j], bv = values[j * step];
      bool value, index;
      takes_second(table, av, bv, NoIndex{}, NoIndex{}, value, index);  // index: unused
      acc_values[j] = value ? bv : av;
    }
  }
}

// One tap of the last dimension for a row of n outputs whose reads are not one affine run
// (a base-dilated last dimension): output j folds in the element `column[j * window]` past
// `values`/`indices`, the init pair where that is -1.
template <typename V, typename I>
void fold_tap(Picks picks, V* __restrict acc_values, I* __restrict acc_indices,
              const V* __restrict values, const I* __restrict indices,
              const int64_t* __restrict column, int64_t window, int64_t n, V init_value,
              I init_index) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = column[j * window];
    const int64_t safe = at >= 0 ? at : 0;
    I bi = init_index;
    if constexpr (kIndexed<I>) bi = at >= 0 ? indices[safe] : init_index;
    apply(picks, acc_values[j], acc_indices[kIndexed<I> ? j : 0],
          at >= 0 ? values[safe] : init_value, bi);
  }
}

// The taps of the last dimension as runs: tap l of output j reads element
// j * stride + shift[l] of the row for j in [begin[l], end[l]) and padding elsewhere.
// `affine` is false when some tap's reads are not such a run (base dilation): then the
// tap table is read instead.
struct LastTaps {
  bool affine = true;
  int64_t stride = 1;
  std::vector<int64_t> begin, end, shift;
};

LastTaps last_taps(const std::vector<int64_t>& table, int64_t outputs, int64_t window,
                   int64_t stride) {
  LastTaps runs;
  runs.stride = stride;
  for (int64_t l = 0; l < window; ++l) {
    int64_t begin = 0;
    while (begin < outputs && table[begin * window + l] < 0) ++begin;
    int64_t end = begin;
    const int64_t shift = begin < outputs ? table[begin * window + l] - begin * stride : 0;
    while (end < outputs && table[end * window + l] == end * stride + shift) ++end;
    for (int64_t j = end; j < outputs; ++j) runs.affine &= table[j * window + l] < 0;
    runs.begin.push_back(begin);
    runs.end.push_back(end);
    runs.shift.push_back(shift);
  }
  return runs;
}

// A windowed fold of at most kSequentialLimit taps (init pair, then the taps in order: the
// interpreter's sequential fold) a whole output row at a time: for each tap, every output
// of the innermost output dimension takes its element in one pass over the row, the
// outputs whose window lies inside the operand in one vectorized run (fold_interior). The
// position of the row and each tap's offset along the outer dimensions are worked out once
// per row and tap, not once per output and tap, and no tap is copied into a buffer first.
// Rows (every position of the outer dimensions: batch x channel x output rows of a
// pooling) are split across the thread pool.
// `tables[d][p * window[d] + t]`: the offset of tap t of position p along dimension d, or
// -1 in padding (tap_table); dimensions that are not `moving` have window 1.
template <typename V, typename I, typename Table>
void run_pair_rows(const Table& table, Picks picks, const PairData<V, I>& data,
                   const Shape& out_shape, const Shape& window,
                   const std::vector<std::vector<int64_t>>& tables,
                   const LastTaps& runs, const std::vector<size_t>& moving,
                   const std::array<bool, kMaxRank>& is_moving, int64_t taps) {
  const V init_value = data.init_value;
  const I init_index = data.init_index;
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
    std::unique_ptr<I[]> acc_indices(new I[kIndexed<I> ? row_length : 1]);
    V* av = acc_values.get();
    I* ai = acc_indices.get();
    I none{};
    // Padding taps: the init pair for outputs [from, to).
    auto fold_init = [&](int64_t from, int64_t to) {
      for (int64_t j = from; j < to; ++j) {
        apply(picks, av[j], kIndexed<I> ? ai[j] : none, init_value, init_index);
      }
    };
    for (int64_t r = b; r < e; ++r) {
      int64_t pos[kMaxRank], tap[kMaxRank] = {};
      int64_t base = 0;
      for (int64_t d = static_cast<int64_t>(last) - 1, rest = r; d >= 0; --d) {
        pos[d] = rest % out_shape[d];
        rest /= out_shape[d];
        if (!is_moving[d]) base += tables[d][pos[d]];
      }
      std::fill(av, av + row_length, init_value);
      if constexpr (kIndexed<I>) std::fill(ai, ai + row_length, init_index);
      for (int64_t t = 0; t < outer_taps; ++t) {
        int64_t offset = base;
        bool valid = true;
        for (size_t k = 0; k < outer; ++k) {
          const size_t d = moving[k];
          const int64_t v = tables[d][pos[d] * window[d] + tap[k]];
          valid &= v >= 0;
          offset += v;
        }
        const V* values = data.in_values + offset;
        const I* indices = kIndexed<I> ? data.in_indices + offset : nullptr;
        for (int64_t l = 0; l < last_window; ++l) {
          if (!valid) {  // a padding row of taps
            fold_init(0, row_length);
          } else if (!runs.affine) {
            fold_tap(picks, av, ai, values, indices, last_table + l, last_window, row_length,
                     init_value, init_index);
          } else {
            const int64_t from = runs.begin[l], to = runs.end[l], shift = runs.shift[l];
            fold_init(0, from);
            const V* v = values + shift + from * runs.stride;
            const I* i = kIndexed<I> ? indices + shift + from * runs.stride : nullptr;
            I* acc_i = kIndexed<I> ? ai + from : ai;
            if (runs.stride == 1) {
              fold_interior<1>(table, av + from, acc_i, v, i, 1, to - from);
            } else if (runs.stride == 2) {
              fold_interior<2>(table, av + from, acc_i, v, i, 2, to - from);
            } else {
              fold_interior<0>(table, av + from, acc_i, v, i, runs.stride, to - from);
            }
            fold_init(to, row_length);
          }
        }
        for (int64_t k = static_cast<int64_t>(outer) - 1;
             k >= 0 && ++tap[k] == window[moving[k]]; --k) {
          tap[k] = 0;
        }
      }
      std::copy(av, av + row_length, data.out_values + r * row_length);
      if constexpr (kIndexed<I>) std::copy(ai, ai + row_length, data.out_indices + r * row_length);
    }
  });
}

// Checks (values, indices, init value, init index) -> (values, indices), or (values, init
// value) -> values for a value-only body, and calls fn(TypeTag<V>, TypeTag<I>) (I = NoIndex
// without indices); `indexed` says which.
template <typename Fn>
Step dispatch_pair(const OpSpec& spec, bool& indexed, Fn&& fn) {
  const size_t inputs = check_reducer_types(spec);
  require(inputs == 1 || inputs == 2, "a pair body reduces two inputs, a value-only one one");
  indexed = inputs == 2;
  const DType index_type = indexed ? spec.operands[1].dtype : DType::S64;
  return elementwise::dispatch_numeric(spec.operands[0].dtype, [&](auto value_tag) -> Step {
    if (!indexed) return fn(value_tag, TypeTag<NoIndex>{});
    if (index_type == DType::S32) return fn(value_tag, TypeTag<int32_t>{});
    if (index_type == DType::S64) return fn(value_tag, TypeTag<int64_t>{});
    throw Unsupported(std::string("pair body with ") + dtype_name(index_type) + " indices");
  });
}

// The buffers of the results (values, and indices for a pair body).
void allocate_results(const std::vector<TensorSpec>& results, Array* outs) {
  for (size_t k = 0; k < results.size(); ++k) {
    outs[k] = allocate(results[k].dtype, results[k].shape);
  }
}

}  // namespace

Step make_pair_reduce(const OpSpec& spec, const std::vector<int64_t>& dimensions,
                      const std::vector<int64_t>& picks_record) {
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
  bool indexed = true;
  return dispatch_pair(spec, indexed, [&](auto value_tag, auto index_tag) -> Step {
    using V = typename decltype(value_tag)::type;
    using I = typename decltype(index_tag)::type;
    const Picks picks = pick_bits(picks_record, kIndexed<I>);
    return [=](ExecContext&, const Array* operands, Array* outs) {
      allocate_results(results, outs);
      run_pair<V, I>(outputs, count, picks, PairData<V, I>(operands, outs),
                     [&](int64_t o, const PairData<V, I>& data, V* values, I* indices) {
        const int64_t base = (*kept)[o];
        for (int64_t r = 0; r < count; ++r) {
          values[r] = data.in_values[base + (*reduced)[r]];
          if constexpr (kIndexed<I>) indices[r] = data.in_indices[base + (*reduced)[r]];
        }
      });
    };
  });
}

Step make_pair_reduce_window(const OpSpec& spec, const WindowAttrs& w,
                             const std::vector<int64_t>& picks_record) {
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
  const LastTaps runs = rank == 0 ? LastTaps{} : last_taps(tables->back(), out_shape.back(),
                                                           w.window.back(), w.strides.back());
  const int64_t outputs = num_elements(out_shape);
  const std::vector<TensorSpec> results = spec.results;
  std::shared_ptr<const std::vector<std::vector<int64_t>>> frozen = tables;
  bool indexed = true;
  return dispatch_pair(spec, indexed, [&](auto value_tag, auto index_tag) -> Step {
    using V = typename decltype(value_tag)::type;
    using I = typename decltype(index_tag)::type;
    const Picks picks = pick_bits(picks_record, kIndexed<I>);
    return [=](ExecContext&, const Array* operands, Array* outs) {
      allocate_results(results, outs);
      const PairData<V, I> data(operands, outs);
      if (taps <= kSequentialLimit && rank > 0) {
        auto rows = [&](const auto& table) {
          run_pair_rows<V, I>(table, picks, data, out_shape, window, *frozen, runs, moving,
                              is_moving, taps);
        };
        if constexpr (std::is_same_v<V, float> && kIndexed<I>) {
          if (picks.value == TorchPoolPicks::value && picks.index == TorchPoolPicks::index) {
            return rows(TorchPoolPicks{});
          }
        } else if constexpr (std::is_same_v<V, float>) {
          if (picks.value == FirstMaxPicks::value) return rows(FirstMaxPicks{});
        }
        return rows(picks);
      }
      const int64_t num_moving = static_cast<int64_t>(moving.size());
      run_pair<V, I>(outputs, taps, picks, data,
                     [&](int64_t o, const PairData<V, I>& data, V* values, I* indices) {
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
          values[t] = valid ? data.in_values[offset] : data.init_value;
          if constexpr (kIndexed<I>) {
            indices[t] = valid ? data.in_indices[offset] : data.init_index;
          }
          for (int64_t k = num_moving - 1; k >= 0 && ++tap[k] == window[moving[k]]; --k) {
            tap[k] = 0;
          }
        }
      });
    };
  });
}

}  // namespace openhlo::cpu
