// Native collectives of the cpu backend; the Rendezvous they meet in is rendezvous.cc.
//
// Kernels: all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute and
// collective_broadcast. Their process groups are not computed here: the lowering
// (pjrt/plugins/cpu/collectives.py) computes them with the reference interpreter's rules and
// passes them in the op's attribute record (kernel_attrs.py): `num_replicas`,
// `num_partitions`, `channel_id` and `collective_groups[k]` (the instances that instance k
// exchanges with, in group order; [] when k is in no group), plus `permute_sources[k]` for
// collective_permute. Without them the op falls back to the interpreter.
//
// Semantics are those of stablehlo/interpreter/collectives.py: reductions fold the members'
// values in group order, ((v0 op v1) op v2)..., with the combiners of kernels_reduction.cc
// (integers wrap, booleans treat add/maximum as or, float maximum/minimum propagate NaN).
// A group of one instance needs no exchange, so those ops also run in single-device
// executions (ExecContext::rendezvous == nullptr); a larger group there is an ExecError.
//
// Work is shared where every member gets the same result (all_reduce, all_gather): the first
// member allocates the results and hands them out with its contribution, each member fills
// its share, and a second exchange (a barrier) ends the op, so an all_reduce over g
// instances costs one pass over the data in all, not g.
#include "collectives.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "_generated/kernel_attrs.h"
#include "combiners.h"
#include "kernels_elementwise.h"
#include "strided.h"
#include "thread_pool.h"

namespace openhlo::cpu {

namespace {

// ---------------------------------------------------------------------------------------
// Groups and exchanges

// What every collective kernel knows at compile time: the grid it was compiled for and the
// group of each instance.
struct Groups {
  int64_t num_replicas = 1, num_partitions = 1;
  std::string key;  // the interpreter's rendezvous key: op name and channel
  std::vector<std::vector<int64_t>> members;  // per instance; empty: in no group
  std::vector<int64_t> position;              // per instance: its index in its group
};

// `a`: the decoded attributes of any collective (their first fields are the grid's).
template <typename A>
std::shared_ptr<const Groups> parse_groups(const OpSpec& spec, const A& a,
                                           bool every_instance_in_a_group) {
  auto g = std::make_shared<Groups>();
  g->num_replicas = a.num_replicas;
  g->num_partitions = a.num_partitions;
  g->key = spec.name + " (channel " + std::to_string(a.channel_id) + ")";
  g->members = a.collective_groups;
  const int64_t count = g->num_replicas * g->num_partitions;
  require(static_cast<int64_t>(g->members.size()) == count,
          "collective_groups must hold one group per instance");
  for (int64_t k = 0; k < count; ++k) {
    const auto& members = g->members[k];
    require(!every_instance_in_a_group || !members.empty(),
            "instance " + std::to_string(k) + " is in no process group");
    for (int64_t m : members) require(0 <= m && m < count, "a group names no instance");
    const auto at = std::find(members.begin(), members.end(), k);
    require(members.empty() || at != members.end(), "an instance is not in its own group");
    g->position.push_back(members.empty() ? -1 : at - members.begin());
  }
  return g;
}

// The instance running `ctx` (its flattened id), checked against the compiled grid.
int64_t instance_of(const ExecContext& ctx, const Groups& g) {
  if (ctx.num_replicas != g.num_replicas || ctx.num_partitions != g.num_partitions) {
    throw ExecError("compiled for " + std::to_string(g.num_replicas) + " replica(s) x " +
                    std::to_string(g.num_partitions) + " partition(s), but runs in an "
                    "execution of " + std::to_string(ctx.num_replicas) + " x " +
                    std::to_string(ctx.num_partitions));
  }
  return ctx.replica_id * g.num_partitions + ctx.partition_id;
}

std::vector<std::vector<Array>> exchange(ExecContext& ctx, const Groups& g, int64_t k,
                                         std::vector<Array> mine) {
  if (ctx.rendezvous == nullptr) {
    throw ExecError("instance " + std::to_string(k) + " exchanges with instances " +
                    id_list(g.members[k]) + ", but this execution runs alone: run the "
                    "program on all its devices (execute_sharded)");
  }
  return ctx.rendezvous->exchange(g.key, g.members[k], k, std::move(mine));
}

// Whether the group of instance k has members in other processes: then no member can write
// into arrays the others receive (all_reduce and all_gather compute their whole results).
bool spans_processes(const ExecContext& ctx, const Groups& g, int64_t k) {
  return ctx.rendezvous != nullptr && !ctx.rendezvous->shares_memory(g.members[k]);
}

// Results of these types, allocated (by the member that hands them out to its group).
std::vector<Array> allocate_all(const std::vector<TensorSpec>& specs) {
  std::vector<Array> out;
  for (const auto& r : specs) out.push_back(allocate(r.dtype, r.shape));
  return out;
}

void require_same_types(const OpSpec& spec) {
  require(!spec.operands.empty() && spec.operands.size() == spec.results.size(),
          "expected one result per operand");
  for (size_t j = 0; j < spec.operands.size(); ++j) {
    require(spec.operands[j].dtype == spec.results[j].dtype,
            "operand and result element types differ");
  }
}

// The group size all instances share (results' shapes depend on it), or Unsupported.
int64_t common_group_size(const Groups& g) {
  size_t size = 0;
  for (const auto& members : g.members) {
    if (members.empty()) continue;
    require(size == 0 || members.size() == size, "process groups of different sizes");
    size = members.size();
  }
  return static_cast<int64_t>(size);
}

// ---------------------------------------------------------------------------------------
// Combiners (the reducer regions attrs.py:region_attrs recognizes)

// out[0..n) = srcs[0][i] op srcs[1][i] op ... (left to right), in cache-sized blocks.
using FoldFn = void (*)(const void* const* srcs, int64_t members, void* out, int64_t n);

template <Comb C, typename T>
void fold(const void* const* srcs, int64_t members, void* out, int64_t n) {
  constexpr int64_t kBlock = 2048;
  T* __restrict__ o = static_cast<T*>(out);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    // srcs[0] may be `out` itself (a partial result received in place, chain_reduce).
    if (srcs[0] != out) {
      std::memcpy(o + b, static_cast<const T*>(srcs[0]) + b, (e - b) * sizeof(T));
    }
    for (int64_t m = 1; m < members; ++m) {
      const T* __restrict__ s = static_cast<const T*>(srcs[m]);
      for (int64_t i = b; i < e; ++i) o[i] = combine<C>(o[i], s[i]);
    }
  }
}

// The 16-bit floats: each step widened to double and rounded back, as the interpreter
// rounds each application of the reducer region.
template <Comb C, typename N>
void fold_narrow(const void* const* srcs, int64_t members, void* out, int64_t n) {
  N* o = static_cast<N*>(out);
  for (int64_t i = 0; i < n; ++i) {
    N acc = static_cast<const N*>(srcs[0])[i];
    for (int64_t m = 1; m < members; ++m) {
      acc = elementwise::narrow_from_double<N>(
          combine<C>(elementwise::to_double(acc),
                     elementwise::to_double(static_cast<const N*>(srcs[m])[i])));
    }
    o[i] = acc;
  }
}

template <typename N>
FoldFn narrow_fold_fn(DType dtype, Comb comb) {
  switch (comb) {
    case Comb::kAdd: return &fold_narrow<Comb::kAdd, N>;
    case Comb::kMul: return &fold_narrow<Comb::kMul, N>;
    case Comb::kMax: return &fold_narrow<Comb::kMax, N>;
    case Comb::kMin: return &fold_narrow<Comb::kMin, N>;
    default: throw Unsupported(std::string("bitwise reduction on ") + dtype_name(dtype));
  }
}

// Complex addition is componentwise: the fold of the parts' type over twice the elements
// (bit for bit numpy's, as the interpreter adds). Complex multiply has no native fold.
template <typename Part>
void fold_complex_add(const void* const* srcs, int64_t members, void* out, int64_t n) {
  fold<Comb::kAdd, Part>(srcs, members, out, 2 * n);
}

FoldFn fold_fn(DType dtype, Comb comb) {
  if (dtype == DType::F16) return narrow_fold_fn<f16_t>(dtype, comb);
  if (dtype == DType::BF16) return narrow_fold_fn<bf16_t>(dtype, comb);
  if (comb == Comb::kAdd && dtype == DType::C64) return &fold_complex_add<float>;
  if (comb == Comb::kAdd && dtype == DType::C128) return &fold_complex_add<double>;
  return dispatch_real(dtype, [&](auto tag) -> FoldFn {
    using T = typename decltype(tag)::type;
    switch (comb) {
      case Comb::kAdd: return &fold<Comb::kAdd, T>;
      case Comb::kMul: return &fold<Comb::kMul, T>;
      case Comb::kMax: return &fold<Comb::kMax, T>;
      case Comb::kMin: return &fold<Comb::kMin, T>;
      default: break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      throw Unsupported(std::string("bitwise reduction on ") + dtype_name(dtype));
    } else {
      switch (comb) {
        case Comb::kAnd: return &fold<Comb::kAnd, T>;
        case Comb::kOr: return &fold<Comb::kOr, T>;
        default: return &fold<Comb::kXor, T>;
      }
    }
  });
}

// Byte offset of element `index` of an array of `dtype`.
inline const char* at(const Array& a, int64_t index) {
  return static_cast<const char*>(a.raw()) + index * static_cast<int64_t>(dtype_size(a.dtype));
}
inline char* at_mut(const Array& a, int64_t index) {
  return static_cast<char*>(a.raw()) + index * static_cast<int64_t>(dtype_size(a.dtype));
}

// out = srcs[0] op srcs[1] op ... over `count` elements of `esize` bytes, over the pool.
void fold_parallel(FoldFn fold, const std::vector<const void*>& srcs, void* out, int64_t count,
                   size_t esize) {
  parallel_for(count, strided::kParallelGrain, [&](int64_t b, int64_t e) {
    std::vector<const void*> part(srcs.size());
    for (size_t m = 0; m < srcs.size(); ++m) {
      part[m] = static_cast<const char*>(srcs[m]) + b * static_cast<int64_t>(esize);
    }
    fold(part.data(), static_cast<int64_t>(srcs.size()),
         static_cast<char*>(out) + b * static_cast<int64_t>(esize), e - b);
  });
}

// Chunks of a reduction across processes: large enough that the per-message cost vanishes,
// small enough that receiving, folding and sending overlap (2 processes on loopback: 1 MiB
// did better than 256 KiB and no worse than 4 MiB from 4 to 64 MiB, tools/README.md).
constexpr size_t kChainChunkBytes = size_t{1} << 20;

// Whether folding `members` values of `dtype` with `comb` gives the same bits in any order
// and grouping: integer arithmetic wraps (exact), and two floats commute under add and
// multiply (a NaN's payload aside, which IEEE leaves open).
bool fold_is_order_free(DType dtype, Comb comb, size_t members) {
  const bool integer = dispatch_integer(dtype, [](auto) { return true; }, [] { return false; });
  return integer || (members == 2 && (comb == Comb::kAdd || comb == Comb::kMul));
}

// all_reduce's step across processes (Rendezvous::meet_across), run once per process on the
// local members' operands (`local`, by group position). When each process's members are
// consecutive in group order, the partial result travels along the processes in that order
// (ProcessGroups::chain_reduce) and each folds its members in: the fold order is the group
// order, ((v0 op v1) op v2)..., exactly as within one process, and the bytes go from operand
// or result storage straight into the next process's result storage. Where the order cannot
// change the bits (fold_is_order_free), the chunks' chains rotate so that the processes share
// the folding and sending evenly. Otherwise every contribution is gathered
// (exchange_across_processes) and folded here.
std::vector<Array> reduce_across_processes(const std::vector<std::vector<Array>>& local,
                                           const CrossProcess& across,
                                           const std::vector<int64_t>& group,
                                           Comb comb, const std::vector<FoldFn>& folds,
                                           const std::vector<TensorSpec>& result_specs,
                                           const std::string& tag, const std::string& what) {
  const int me = across.groups->process_index();
  std::vector<int> chain;  // the processes, in group order
  bool consecutive = true;
  for (int64_t k : group) {
    const int process = across.instance_process[k];
    if (!chain.empty() && chain.back() == process) continue;
    consecutive &= std::find(chain.begin(), chain.end(), process) == chain.end();
    chain.push_back(process);
  }
  std::vector<Array> results;
  if (!consecutive) {
    auto values = local;
    exchange_across_processes(*across.groups, across.instance_process, group, tag, what, values);
    for (size_t j = 0; j < folds.size(); ++j) {
      Array out = allocate(result_specs[j].dtype, result_specs[j].shape);
      std::vector<const void*> srcs;
      for (const auto& member : values) srcs.push_back(member[j].raw());
      fold_parallel(folds[j], srcs, out.raw(), out.size(), dtype_size(out.dtype));
      results.push_back(std::move(out));
    }
    return results;
  }
  std::vector<size_t> mine;  // the group positions of this process's members
  for (size_t pos = 0; pos < group.size(); ++pos) {
    if (across.instance_process[group[pos]] == me) mine.push_back(pos);
  }
  for (size_t j = 0; j < folds.size(); ++j) {
    Array out = allocate(result_specs[j].dtype, result_specs[j].shape);
    const size_t esize = dtype_size(out.dtype);
    char* const base = static_cast<char*>(out.raw());
    across.groups->chain_reduce(
        chain, tag + "/" + std::to_string(j), base, out.nbytes(),
        std::max<size_t>(1, kChainChunkBytes / esize) * esize,
        fold_is_order_free(out.dtype, comb, group.size()),
        [&](size_t offset, size_t bytes, bool received) -> const void* {
          std::vector<const void*> srcs;
          if (received) srcs.push_back(base + offset);  // the partial result
          for (size_t pos : mine) {
            srcs.push_back(static_cast<const char*>(local[pos][j].raw()) + offset);
          }
          if (srcs.size() == 1) return srcs[0];
          fold_parallel(folds[j], srcs, base + offset, static_cast<int64_t>(bytes / esize), esize);
          return base + offset;
        },
        what + " across processes");
    results.push_back(std::move(out));
  }
  return results;
}

// ---------------------------------------------------------------------------------------
// Kernels

// all_reduce: every member reduces its share of the elements into the results that the
// first member hands out; all members return those results.
Step make_all_reduce(const OpSpec& spec) {
  const AllReduceAttrs a = AllReduceAttrs::decode(spec);
  auto g = parse_groups(spec, a, true);
  require_same_types(spec);
  const Comb comb = parse_combiner(a.combiner);
  std::vector<FoldFn> folds;
  for (size_t j = 0; j < spec.operands.size(); ++j) {
    require(spec.operands[j].shape == spec.results[j].shape, "operand and result shapes differ");
    folds.push_back(fold_fn(spec.operands[j].dtype, comb));
  }
  // Steps never hold Python objects (they run without the GIL): only the result types.
  const std::vector<TensorSpec> result_specs = spec.results;
  return [g, comb, folds, result_specs](ExecContext& ctx, const Array* operands,
                                       Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const int64_t size = static_cast<int64_t>(g->members[k].size());
    const size_t n = folds.size();
    if (size == 1) {
      for (size_t j = 0; j < n; ++j) results[j] = operands[j];
      return;
    }
    if (spans_processes(ctx, *g, k)) {
      const auto& group = g->members[k];
      auto out = ctx.rendezvous->meet_across(
          g->key, group, k, std::vector<Array>(operands, operands + n),
          [&](const std::vector<std::vector<Array>>& local, const CrossProcess& across,
              const std::string& tag, const std::string& what) {
            return reduce_across_processes(local, across, group, comb, folds, result_specs, tag,
                                           what);
          });
      for (size_t j = 0; j < n; ++j) results[j] = std::move(out[j]);
      return;
    }
    const int64_t pos = g->position[k];
    std::vector<Array> mine(operands, operands + n);
    if (pos == 0) {
      for (Array& r : allocate_all(result_specs)) mine.push_back(std::move(r));
    }
    const auto values = exchange(ctx, *g, k, std::move(mine));
    for (size_t j = 0; j < n; ++j) {
      const Array& out = values[0][n + j];
      const int64_t count = out.size();
      const int64_t lo = count * pos / size, hi = count * (pos + 1) / size;
      // A share is split further over the pool when the group is smaller than the pool.
      const int64_t grain = size < parallel_width() ? strided::kParallelGrain : hi - lo;
      parallel_for(hi - lo, grain, [&](int64_t b, int64_t e) {
        std::vector<const void*> part(size);
        for (int64_t m = 0; m < size; ++m) part[m] = at(values[m][j], lo + b);
        folds[j](part.data(), size, at_mut(out, lo + b), e - b);
      });
    }
    exchange(ctx, *g, k, {});  // every share is written
    for (size_t j = 0; j < n; ++j) results[j] = values[0][n + j];
  };
}

// all_gather: every member copies its operands into its slot of the results that the first
// member hands out.
Step make_all_gather(const OpSpec& spec) {
  const AllGatherAttrs a = AllGatherAttrs::decode(spec);
  auto g = parse_groups(spec, a, true);
  require_same_types(spec);
  const int64_t size = common_group_size(*g);
  const int64_t dim = a.all_gather_dim;
  struct Part {
    strided::CopyPlan plan;
    strided::CopyFn copy;
    int64_t slot_stride;  // elements between the slots of consecutive members
  };
  std::vector<Part> parts;
  for (size_t j = 0; j < spec.operands.size(); ++j) {
    const Shape& in = spec.operands[j].shape;
    const Shape& out = spec.results[j].shape;
    require(dim >= 0 && dim < static_cast<int64_t>(in.size()) && in.size() == out.size(),
            "all_gather_dim is out of range");
    Shape want = in;
    want[dim] *= size;
    require(out == want, "result shape does not match the process group size");
    const auto out_strides = row_major_strides(out);
    parts.push_back({strided::make_copy_plan(in, row_major_strides(in), out_strides),
                     strided::copy_fn(spec.operands[j].dtype), in[dim] * out_strides[dim]});
  }
  const std::vector<TensorSpec> result_specs = spec.results;
  return [g, parts, result_specs](ExecContext& ctx, const Array* operands, Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const size_t n = parts.size();
    if (g->members[k].size() == 1) {
      for (size_t j = 0; j < n; ++j) results[j] = operands[j];
      return;
    }
    const int64_t pos = g->position[k];
    if (spans_processes(ctx, *g, k)) {
      const auto values = exchange(ctx, *g, k, std::vector<Array>(operands, operands + n));
      const int64_t size = static_cast<int64_t>(values.size());
      for (size_t j = 0; j < n; ++j) {
        const Part& p = parts[j];
        Array out = allocate(result_specs[j].dtype, result_specs[j].shape);
        for (int64_t m = 0; m < size; ++m) {
          p.copy(p.plan, values[m][j].raw(), at_mut(out, m * p.slot_stride));
        }
        results[j] = std::move(out);
      }
      return;
    }
    const auto values = exchange(ctx, *g, k, pos == 0 ? allocate_all(result_specs)
                                                      : std::vector<Array>());
    for (size_t j = 0; j < n; ++j) {
      const Part& p = parts[j];
      p.copy(p.plan, operands[j].raw(), at_mut(values[0][j], pos * p.slot_stride));
    }
    exchange(ctx, *g, k, {});  // every slot is written
    for (size_t j = 0; j < n; ++j) results[j] = values[0][j];
  };
}

// reduce_scatter: member i reduces block i of the scatter dimension over all members, for
// each operand (a combined reduce_scatter, xla_core/spmd/combiner.py, has several).
Step make_reduce_scatter(const OpSpec& spec) {
  const ReduceScatterAttrs a = ReduceScatterAttrs::decode(spec);
  auto g = parse_groups(spec, a, true);
  require_same_types(spec);
  const int64_t size = common_group_size(*g);
  const int64_t dim = a.scatter_dimension;
  const Comb comb = parse_combiner(a.combiner);
  struct Part {
    FoldFn fold;
    int64_t outer;  // elements before the scatter dimension
    int64_t block;  // my part per row
    TensorSpec result;
  };
  std::vector<Part> parts;
  for (size_t j = 0; j < spec.operands.size(); ++j) {
    const Shape& in = spec.operands[j].shape;
    require(dim >= 0 && dim < static_cast<int64_t>(in.size()),
            "scatter_dimension is out of range");
    require(in[dim] % size == 0, "scatter dimension is not divisible by the group size");
    Shape want = in;
    want[dim] /= size;
    require(spec.results[j].shape == want,
            "result shape does not match the process group size");
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= in[d];
    parts.push_back({fold_fn(spec.operands[j].dtype, comb), outer,
                     num_elements(want) / std::max<int64_t>(outer, 1), spec.results[j]});
  }
  return [g, parts](ExecContext& ctx, const Array* operands, Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const int64_t size = static_cast<int64_t>(g->members[k].size());
    const size_t n = parts.size();
    if (size == 1) {
      for (size_t j = 0; j < n; ++j) results[j] = operands[j];
      return;
    }
    const int64_t pos = g->position[k];
    const auto values = exchange(ctx, *g, k, std::vector<Array>(operands, operands + n));
    std::vector<const void*> srcs(size);
    for (size_t j = 0; j < n; ++j) {
      const Part& p = parts[j];
      Array out = allocate(p.result.dtype, p.result.shape);
      for (int64_t o = 0; o < p.outer; ++o) {
        for (int64_t m = 0; m < size; ++m) {
          srcs[m] = at(values[m][j], (o * size + pos) * p.block);
        }
        p.fold(srcs.data(), size, at_mut(out, o * p.block), p.block);
      }
      results[j] = std::move(out);
    }
  };
}

// all_to_all: result = the concatenation along concat_dimension of block i (along
// split_dimension) of every member's operand, in group order.
Step make_all_to_all(const OpSpec& spec) {
  const AllToAllAttrs a = AllToAllAttrs::decode(spec);
  auto g = parse_groups(spec, a, true);
  require_same_types(spec);
  const int64_t size = common_group_size(*g);
  const int64_t split_dim = a.split_dimension;
  const int64_t concat_dim = a.concat_dimension;
  require(a.split_count == size,
          "split_count differs from the process group size");
  struct Part {
    strided::CopyPlan plan;
    strided::CopyFn copy;
    int64_t src_block, dst_block;  // elements between consecutive blocks
  };
  std::vector<Part> parts;
  for (size_t j = 0; j < spec.operands.size(); ++j) {
    const Shape& in = spec.operands[j].shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    require(0 <= split_dim && split_dim < rank && 0 <= concat_dim && concat_dim < rank,
            "split or concat dimension is out of range");
    require(in[split_dim] % size == 0, "split dimension is not divisible by split_count");
    Shape block = in;
    block[split_dim] /= size;
    Shape want = block;
    want[concat_dim] *= size;
    require(spec.results[j].shape == want, "result shape does not match split_count");
    const auto in_strides = row_major_strides(in);
    const auto out_strides = row_major_strides(want);
    parts.push_back({strided::make_copy_plan(block, in_strides, out_strides),
                     strided::copy_fn(spec.operands[j].dtype),
                     block[split_dim] * in_strides[split_dim],
                     block[concat_dim] * out_strides[concat_dim]});
  }
  const std::vector<TensorSpec> result_specs = spec.results;
  return [g, parts, result_specs](ExecContext& ctx, const Array* operands, Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const int64_t size = static_cast<int64_t>(g->members[k].size());
    const size_t n = parts.size();
    if (size == 1) {
      for (size_t j = 0; j < n; ++j) results[j] = operands[j];
      return;
    }
    const int64_t pos = g->position[k];
    const auto values = exchange(ctx, *g, k, std::vector<Array>(operands, operands + n));
    for (size_t j = 0; j < n; ++j) {
      const Part& p = parts[j];
      Array out = allocate(result_specs[j].dtype, result_specs[j].shape);
      for (int64_t m = 0; m < size; ++m) {
        p.copy(p.plan, at(values[m][j], pos * p.src_block), at_mut(out, m * p.dst_block));
      }
      results[j] = std::move(out);
    }
  };
}

// collective_permute: an instance receives the operand of the instance paired with it as
// source (zeros if none); instances named in no pair take part in no exchange.
Step make_collective_permute(const OpSpec& spec) {
  const CollectivePermuteAttrs a = CollectivePermuteAttrs::decode(spec);
  auto g = parse_groups(spec, a, false);
  require(spec.operands.size() == 1, "collective_permute takes one operand");
  require_same_types(spec);
  require(a.permute_sources.has_value(), "no permute_sources from the lowering");
  const auto& sources = *a.permute_sources;
  require(sources.size() == g->members.size(), "permute_sources must hold one per instance");
  std::vector<int64_t> source_pos;  // per instance: index of its source in its group, or -1
  for (size_t k = 0; k < sources.size(); ++k) {
    const auto& members = g->members[k];
    const auto it = std::find(members.begin(), members.end(), sources[k]);
    require(sources[k] < 0 || it != members.end(), "a permute source is not in the group");
    source_pos.push_back(sources[k] < 0 ? -1 : it - members.begin());
  }
  const TensorSpec result = spec.results[0];
  return [g, source_pos, result](ExecContext& ctx, const Array* operands, Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const auto& members = g->members[k];
    if (members.size() > 1) {
      const auto values = exchange(ctx, *g, k, {operands[0]});
      if (source_pos[k] >= 0) {
        results[0] = values[source_pos[k]][0];
        return;
      }
    } else if (source_pos[k] == 0) {  // paired with itself
      results[0] = operands[0];
      return;
    }
    results[0] = allocate_zeroed(result.dtype, result.shape);
  };
}

// Reads element i of an integer array as an int64 (the interpreter's reading of indices).
using ReadIndexFn = int64_t (*)(const void* data, int64_t i);
template <typename I>
int64_t read_index(const void* data, int64_t i) {
  return index_operands::index_value(static_cast<const I*>(data)[i]);
}

// collective_broadcast: result j of every member is operand j of the member at group index
// root_j: 0, or with has_dynamic_root (an extension of the interpreter) element j of the
// last operand, an integer vector read by each instance from its own operand. Instances in
// no group get zeros.
Step make_collective_broadcast(const OpSpec& spec) {
  const CollectiveBroadcastAttrs a = CollectiveBroadcastAttrs::decode(spec);
  auto g = parse_groups(spec, a, false);
  const bool dynamic_root = a.has_dynamic_root;
  const size_t n = spec.results.size();
  require(n >= 1 && spec.operands.size() == n + (dynamic_root ? 1 : 0),
          "expected one result per data operand");
  for (size_t j = 0; j < n; ++j) {
    require(spec.operands[j].dtype == spec.results[j].dtype &&
                spec.operands[j].shape == spec.results[j].shape,
            "operand and result types differ");
  }
  ReadIndexFn read_root = nullptr;
  if (dynamic_root) {
    const TensorSpec& roots = spec.operands[n];
    require(num_elements(roots.shape) == static_cast<int64_t>(n),
            "has_dynamic_root needs one root per data operand");
    read_root = index_operands::dispatch_index(roots.dtype, "the root operand", [](auto tag) {
      return &read_index<typename decltype(tag)::type>;
    });
  }
  const std::vector<TensorSpec> result_specs = spec.results;
  return [g, read_root, result_specs](ExecContext& ctx, const Array* operands, Array* results) {
    const int64_t k = instance_of(ctx, *g);
    const auto& members = g->members[k];
    const size_t n = result_specs.size();
    if (members.empty()) {
      for (size_t j = 0; j < n; ++j) {
        results[j] = allocate_zeroed(result_specs[j].dtype, result_specs[j].shape);
      }
      return;
    }
    std::vector<int64_t> roots(n, 0);
    for (size_t j = 0; read_root != nullptr && j < n; ++j) {
      roots[j] = read_root(operands[n].raw(), static_cast<int64_t>(j));
      if (roots[j] < 0 || roots[j] >= static_cast<int64_t>(members.size())) {
        throw ExecError("root index " + std::to_string(roots[j]) +
                        " is outside the process group " + id_list(members));
      }
    }
    if (members.size() == 1) {
      for (size_t j = 0; j < n; ++j) results[j] = operands[j];
      return;
    }
    const auto values = exchange(ctx, *g, k, std::vector<Array>(operands, operands + n));
    for (size_t j = 0; j < n; ++j) results[j] = values[roots[j]][j];
  };
}

OPENHLO_KERNEL(all_reduce, "stablehlo.all_reduce", make_all_reduce);
OPENHLO_KERNEL(all_gather, "stablehlo.all_gather", make_all_gather);
OPENHLO_KERNEL(reduce_scatter, "stablehlo.reduce_scatter", make_reduce_scatter);
OPENHLO_KERNEL(all_to_all, "stablehlo.all_to_all", make_all_to_all);
OPENHLO_KERNEL(collective_permute, "stablehlo.collective_permute", make_collective_permute);
OPENHLO_KERNEL(collective_broadcast, "stablehlo.collective_broadcast",
               make_collective_broadcast);

}  // namespace

}  // namespace openhlo::cpu
