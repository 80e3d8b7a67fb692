// Native kernels of the contractions: dot_general, dot and convolution, on BLAS.
//
// dot_general: each operand is brought to a batch of matrices, [B, M, K] and [B, K, N]. An
// operand whose memory layout already is such a batch (possibly transposed: [B, K, M] or
// [B, N, K], which the BLAS transpose flags absorb) is used in place; any other layout is
// copied once into scratch. The result [batch..., lhs free..., rhs free...] is [B, M, N]
// row-major, the GEMM output. f16/bf16 operands are widened to f32 in that copy and the
// f32 product rounded once to the result type, as the interpreter (linalg.py, XLA)
// accumulates them in f32.
//
// convolution: im2col + GEMM, in one of two layouts that need no copies of the operands.
// Channels-last (NHWC/HWIO): rows of the im2col matrix are output positions of all images,
// columns the (tap, input feature) pairs of one feature group, so one GEMM per group and
// block of rows computes [N, spatial..., O], the kernel matrix read in place. Channels-first
// (NCHW/OIHW, what PyTorch programs use), ungrouped: per image, the im2col matrix has a row
// per (input feature, tap) and a column per output position, so the OIHW kernel, read in
// place as [O, C * taps], times it gives the [O, positions] NCHW output directly (Note
// [channels-first convolution]). Other layouts and grouped channels-first convolutions are
// copied to channels-last. Depthwise convolutions (one input feature per
// group) use a direct loop vectorized over features.
//
// i8 x i8 -> i32 and (on CPUs with AVX-512 BF16) bf16 x bf16 products run on the
// low-precision GEMMs (kernels_lowp_dot.cc). Other integer, complex and mixed element types
// raise Unsupported (the interpreter runs them).
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "_generated/kernel_attrs.h"
#include "blas.h"
#include "contraction.h"
#include "float16.h"
#include "kernel.h"
#include "permute.h"
#include "thread_pool.h"

namespace openhlo::cpu {
namespace {

// Calls fn(TypeTag<T>) for the float element types.
template <typename Fn>
auto dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F16: return fn(TypeTag<f16_t>{});
    case DType::BF16: return fn(TypeTag<bf16_t>{});
    case DType::F32: return fn(TypeTag<float>{});
    case DType::F64: return fn(TypeTag<double>{});
    default: throw Unsupported(std::string("no native contraction on ") + dtype_name(dtype));
  }
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc) {
  blas::sgemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  blas::dgemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
}

void require_blas_size(int64_t n, const char* what) {
  require(n <= std::numeric_limits<int>::max(), std::string(what) + " too large for BLAS");
}

// Contractions parallelize over the shared pool themselves, each task running whole
// single-threaded GEMMs. That needs OpenBLAS set to one thread (blas.py): its own threads
// spin-wait beside the pool's, and GEMMs called from several pool threads at once each
// wake them (measured on 2 busy cores: a 3x3 convolution 5-50x slower). With a threaded
// OpenBLAS, GEMMs are issued from the calling thread only and BLAS does the threading.
inline int64_t gemm_threads() {
  return blas::num_threads() == 1 ? parallel_width() : 1;
}

// Multiply-adds below which a GEMM is not worth splitting over threads.
constexpr int64_t kSplitWork = int64_t{1} << 18;

// C = op(A) op(B) (row-major), split into row or column panels of C over the pool.
template <typename T>
void parallel_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                   const T* b, int64_t ldb, T* c, int64_t ldc) {
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(gemm_threads(), m * n * k / kSplitWork));
  const bool by_rows = m >= n;
  parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      if (by_rows) {
        const int64_t r0 = m * part / parts, r1 = m * (part + 1) / parts;
        gemm(ta, tb, r1 - r0, n, k, a + (ta ? r0 : r0 * lda), lda, b, ldb, c + r0 * ldc, ldc);
      } else {
        const int64_t c0 = n * part / parts, c1 = n * (part + 1) / parts;
        gemm(ta, tb, m, c1 - c0, k, a, lda, b + (tb ? c0 * ldb : c0), ldb, c + c0, ldc);
      }
    }
  });
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// ---------------------------------------------------------------------------------------
// dot_general and dot

template <typename In, typename Acc, typename Out>
void run_dot(const DotPlan& plan, const Array& lhs_array, const Array& rhs_array, Array& result) {
  const int64_t b = plan.batch, m = plan.m, n = plan.n, k = plan.k;
  Out* out = result.data<Out>();
  if (b * m * n == 0) return;
  if (k == 0) {
    std::fill(out, out + b * m * n, convert<Out>(Acc(0)));
    return;
  }
  Array lhs_scratch, rhs_scratch, out_scratch;
  const Acc* lhs = reinterpret_cast<const Acc*>(lhs_array.raw());
  const Acc* rhs = reinterpret_cast<const Acc*>(rhs_array.raw());
  const DType acc_type = std::is_same_v<Acc, float> ? DType::F32 : DType::F64;
  if (!plan.lhs.in_place) {
    lhs_scratch = allocate(acc_type, {b * m * k});
    plan.lhs.pack.run(lhs_array.data<In>(), lhs_scratch.data<Acc>());
    lhs = lhs_scratch.data<Acc>();
  }
  if (!plan.rhs.in_place) {
    rhs_scratch = allocate(acc_type, {b * k * n});
    plan.rhs.pack.run(rhs_array.data<In>(), rhs_scratch.data<Acc>());
    rhs = rhs_scratch.data<Acc>();
  }
  Acc* acc = reinterpret_cast<Acc*>(out);
  if (!plan.result_in_place) {
    out_scratch = allocate(acc_type, {b * m * n});
    acc = out_scratch.data<Acc>();
  }
  const int64_t lhs_step = m * k, rhs_step = k * n, out_step = m * n;
  const int64_t threads = gemm_threads();
  if (b >= threads || m * n * k <= kSplitWork) {
    // Whole products per task.
    const int64_t min_chunk = threads > 1 ? std::max<int64_t>(1, kSplitWork / (m * n * k)) : b;
    parallel_for(b, min_chunk, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        gemm(plan.lhs.transposed, plan.rhs.transposed, m, n, k, lhs + i * lhs_step,
             plan.lhs.ld, rhs + i * rhs_step, plan.rhs.ld, acc + i * out_step, n);
      }
    });
  } else {
    for (int64_t i = 0; i < b; ++i) {
      parallel_gemm(plan.lhs.transposed, plan.rhs.transposed, m, n, k, lhs + i * lhs_step,
                    plan.lhs.ld, rhs + i * rhs_step, plan.rhs.ld, acc + i * out_step, n);
    }
  }
  if (!plan.result_in_place) {
    parallel_for(b * m * n, 32768, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = convert<Out>(acc[i]);
    });
  }
}

using DotLoop = void (*)(const DotPlan&, const Array&, const Array&, Array&);

Step make_contraction(const OpSpec& spec, const std::vector<int64_t>& lb,
                      const std::vector<int64_t>& rb, const std::vector<int64_t>& lc,
                      const std::vector<int64_t>& rc, bool has_algorithm) {
  require(spec.operands.size() == 2 && spec.results.size() == 1, "expected two operands");
  require(!has_algorithm, "dot algorithms are not supported natively");
  const TensorSpec& l = spec.operands[0];
  const TensorSpec& r = spec.operands[1];
  const TensorSpec& out = spec.results[0];
  require(l.dtype == r.dtype, "mixed operand element types");
  const bool wide = l.dtype == DType::F64 || out.dtype == DType::F64;
  require(!wide || (out.dtype != DType::F16 && out.dtype != DType::BF16),
          "f64 contraction rounded to a 16-bit float");
  require(lb.size() == rb.size() && lc.size() == rc.size(),
          "lhs and rhs need as many batching and as many contracting dimensions");
  auto free_dims = [](size_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<bool> used(rank, false);
    for (int64_t d : a) {
      require(d >= 0 && d < static_cast<int64_t>(rank) && !used[d], "bad dimension numbers");
      used[d] = true;
    }
    for (int64_t d : b) {
      require(d >= 0 && d < static_cast<int64_t>(rank) && !used[d], "bad dimension numbers");
      used[d] = true;
    }
    std::vector<int64_t> free;
    for (size_t d = 0; d < rank; ++d) {
      if (!used[d]) free.push_back(static_cast<int64_t>(d));
    }
    return free;
  };
  const auto lf = free_dims(l.shape.size(), lb, lc);
  const auto rf = free_dims(r.shape.size(), rb, rc);
  DotPlan plan;
  Shape expected;
  for (size_t i = 0; i < lb.size(); ++i) {
    require(l.shape[lb[i]] == r.shape[rb[i]], "batch dimension sizes differ");
    plan.batch *= l.shape[lb[i]];
    expected.push_back(l.shape[lb[i]]);
  }
  for (size_t i = 0; i < lc.size(); ++i) {
    require(l.shape[lc[i]] == r.shape[rc[i]], "contracting dimension sizes differ");
    plan.k *= l.shape[lc[i]];
  }
  for (int64_t d : lf) {
    plan.m *= l.shape[d];
    expected.push_back(l.shape[d]);
  }
  for (int64_t d : rf) {
    plan.n *= r.shape[d];
    expected.push_back(r.shape[d]);
  }
  require(expected == out.shape, "unexpected result shape");
  for (int64_t v : {plan.m, plan.n, plan.k}) require_blas_size(v, "matrix dimension");

  {
    DotPlan lowp = plan;
    lowp.lhs = plan_matrix(l.shape, lb, lf, lc, true);
    lowp.rhs = plan_matrix(r.shape, rb, rc, rf, true);
    if (Step step = make_lowp_dot(lowp, l, r, out)) return step;
  }
  const DType acc = wide ? DType::F64 : DType::F32;
  plan.lhs = plan_matrix(l.shape, lb, lf, lc, l.dtype == acc);
  plan.rhs = plan_matrix(r.shape, rb, rc, rf, r.dtype == acc);
  plan.result_in_place = out.dtype == acc;
  const DotLoop loop = dispatch_float(l.dtype, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    return dispatch_float(out.dtype, [&](auto out_tag) -> DotLoop {
      using Out = typename decltype(out_tag)::type;
      if (wide) return &run_dot<In, double, Out>;
      return &run_dot<In, float, Out>;
    });
  });
  auto frozen = std::make_shared<const DotPlan>(std::move(plan));
  TensorSpec result = out;
  return [frozen, loop, result](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(result.dtype, result.shape);
    loop(*frozen, operands[0], operands[1], results[0]);
  };
}

Step make_dot_general(const OpSpec& spec) {
  const DotGeneralAttrs a = DotGeneralAttrs::decode(spec);
  return make_contraction(spec, a.lhs_batching_dimensions, a.rhs_batching_dimensions,
                          a.lhs_contracting_dimensions, a.rhs_contracting_dimensions,
                          a.has_algorithm);
}

Step make_dot(const OpSpec& spec) {
  require(spec.operands.size() == 2, "expected two operands");
  const int64_t lhs_rank = static_cast<int64_t>(spec.operands[0].shape.size());
  const int64_t rhs_rank = static_cast<int64_t>(spec.operands[1].shape.size());
  require((lhs_rank == 1 || lhs_rank == 2) && (rhs_rank == 1 || rhs_rank == 2),
          "dot operands must be vectors or matrices");
  return make_contraction(spec, {}, {}, {lhs_rank - 1}, {0}, false);
}

OPENHLO_KERNEL(stablehlo_dot_general, "stablehlo.dot_general", make_dot_general);
OPENHLO_KERNEL(stablehlo_dot, "stablehlo.dot", make_dot);

// ---------------------------------------------------------------------------------------
// convolution

struct ConvPlan {
  // Canonical layouts: x [N, S..., C], w [k..., I, O], y [N / batch_groups, out..., O].
  Permute x_pack, w_pack, y_unpack;
  bool x_in_place = false, w_in_place = false, y_in_place = false;
  int64_t n = 0, c = 0, o = 0;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t cg = 0, og = 0, out_batch = 0;
  int64_t positions = 1, taps = 1, image = 0;  // output positions, kernel taps, x image size
  std::vector<int64_t> out_sizes, k_sizes;
  // Per spatial dim i: tables[i][p * k_i + t] = offset in an x image read by tap t of output
  // position p (window reversal included), or -1 for padding and lhs-dilation holes.
  std::vector<std::vector<int64_t>> tables;
  bool pointwise = false;   // im2col would copy x unchanged (1x1 kernel, no stride...)
  bool depthwise = false;   // one input feature per group
  int64_t block_rows = 0;   // im2col rows per GEMM
  // Channels-first: x [N, C, S...], w [O, C, k...], y [N, O, out...] used in place.
  bool channels_first = false;
  int64_t plane = 0;  // x positions per feature (product of the input spatial sizes)
  // Per spatial dim i: plane_tables[i][t * out_i + p] = offset in an x feature plane read
  // by tap t of output position p, or -1 (the channels-first twin of `tables`).
  std::vector<std::vector<int64_t>> plane_tables;
  // Per tap t of the last spatial dim: output positions [run_begin[t], run_end[t]) along it
  // read the plane at run_offset[t] + run_step * (position - run_begin[t]); the others read
  // padding (a run, as the channels-first path requires no lhs dilation).
  std::vector<int64_t> run_begin, run_end, run_offset;
  int64_t run_step = 1;
};

// The x image that output batch index `out_batch_index` of group g reads.
inline int64_t input_batch(const ConvPlan& p, int64_t g, int64_t out_batch_index) {
  return p.batch_groups > 1 ? g * p.out_batch + out_batch_index : out_batch_index;
}

// Calls fn(t, offset in an x image or -1) for the taps of output position `pos`, in
// row-major tap order; `index` is scratch for the position's spatial index.
template <typename Fn>
inline void for_each_tap(const ConvPlan& p, int64_t pos, int64_t* index, Fn&& fn) {
  const int64_t dims = static_cast<int64_t>(p.out_sizes.size());
  for (int64_t i = dims - 1, rest = pos; i >= 0; --i) {
    index[i] = rest % p.out_sizes[i];
    rest /= p.out_sizes[i];
  }
  int64_t tap[8] = {0};
  for (int64_t t = 0; t < p.taps; ++t) {
    int64_t offset = 0;
    bool valid = true;
    for (int64_t i = 0; i < dims; ++i) {
      const int64_t v = p.tables[i][index[i] * p.k_sizes[i] + tap[i]];
      valid &= v >= 0;
      offset += v;
    }
    fn(t, valid ? offset : -1);
    for (int64_t i = dims - 1; i >= 0 && ++tap[i] == p.k_sizes[i]; --i) tap[i] = 0;
  }
}

// im2col + GEMM. Tasks are (group, block of output rows); the pool's threads take
// contiguous runs of tasks, each packing its blocks into its own scratch and multiplying
// them while they are still in cache.
template <typename T>
void conv_gemm(const ConvPlan& p, const T* x, const T* w, T* y) {
  const int64_t rows = p.out_batch * p.positions;
  const int64_t cols = p.taps * p.cg;
  const int64_t groups = p.feature_groups * p.batch_groups;
  if (p.pointwise) {
    for (int64_t g = 0; g < groups; ++g) {
      const T* a = x + input_batch(p, g, 0) * p.image + (p.feature_groups > 1 ? g * p.cg : 0);
      parallel_gemm(false, false, rows, p.og, cols, a, p.c, w + g * p.og, p.o, y + g * p.og,
                    p.o);
    }
    return;
  }
  const int64_t blocks = (rows + p.block_rows - 1) / p.block_rows;
  const int64_t tasks = groups * blocks;
  const int64_t parts = std::min<int64_t>(gemm_threads(), tasks);
  Array scratch = allocate(std::is_same_v<T, float> ? DType::F32 : DType::F64,
                           {parts * p.block_rows * cols});
  parallel_for(parts, 1, [&](int64_t part_begin, int64_t part_end) {
    int64_t index[8];
    for (int64_t part = part_begin; part < part_end; ++part) {
      T* a = scratch.data<T>() + part * p.block_rows * cols;
      for (int64_t task = tasks * part / parts; task < tasks * (part + 1) / parts; ++task) {
        const int64_t g = task / blocks;
        const int64_t r0 = (task % blocks) * p.block_rows;
        const int64_t r1 = std::min(rows, r0 + p.block_rows);
        const int64_t channel = p.feature_groups > 1 ? g * p.cg : 0;
        for (int64_t r = r0; r < r1; ++r) {
          const T* img = x + input_batch(p, g, r / p.positions) * p.image + channel;
          T* dst = a + (r - r0) * cols;
          for_each_tap(p, r % p.positions, index, [&](int64_t t, int64_t offset) {
            if (offset >= 0) {
              std::memcpy(dst + t * p.cg, img + offset, p.cg * sizeof(T));
            } else {
              std::memset(dst + t * p.cg, 0, p.cg * sizeof(T));
            }
          });
        }
        gemm(false, false, r1 - r0, p.og, cols, a, cols, w + g * p.og, p.o,
             y + r0 * p.o + g * p.og, p.o);
      }
    }
  });
}

// One input feature per group: y[r, c * og + j] = sum over taps of x[tap, c] * w[tap, c * og + j].
template <typename T>
void conv_depthwise(const ConvPlan& p, const T* x, const T* w, T* y) {
  const int64_t rows = p.out_batch * p.positions;
  const int64_t o = p.o, og = p.og, c = p.c;
  parallel_for(rows, std::max<int64_t>(1, 4096 / (p.taps * o)), [&](int64_t b, int64_t e) {
    int64_t index[8];
    for (int64_t r = b; r < e; ++r) {
      const T* img = x + (r / p.positions) * p.image;
      T* out = y + r * o;
      std::fill(out, out + o, T(0));
      for_each_tap(p, r % p.positions, index, [&](int64_t t, int64_t offset) {
        if (offset < 0) return;
        const T* in = img + offset;
        const T* wt = w + t * o;
        if (og == 1) {
          for (int64_t j = 0; j < o; ++j) out[j] += in[j] * wt[j];
        } else {
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t j = 0; j < og; ++j) out[ch * og + j] += in[ch] * wt[ch * og + j];
          }
        }
      });
    }
  });
}

// Note [channels-first convolution]
// For x [N, C, S...] and w [O, I, k...] row-major (no feature groups: I = C), w is the
// matrix [O, C * taps] and y of image n the matrix [O, positions]. With im2col rows ordered
// (input feature, tap) to match w's columns and one column per output position, y = w * col
// is one GEMM per image, written straight into the NCHW result: the per-call permutes of x,
// w and y that the channels-last path would need are gone. A row of col is one tap of one
// feature plane gathered along the output positions, so it is built from runs of plane
// reads (one per output row); a pointwise convolution uses the x image itself as col.

// Calls fn(position, offset, count) for the runs of output positions that tap `t` reads in
// a channels-first x plane: positions [position, position + count) read offset, offset +
// run_step, ... Positions outside every run read padding.
template <typename Fn>
inline void for_each_run(const ConvPlan& p, int64_t t, Fn&& fn) {
  const int64_t last = static_cast<int64_t>(p.out_sizes.size()) - 1;
  const int64_t inner = p.out_sizes[last];
  const int64_t outer = p.positions / inner;
  int64_t tap[8];
  for (int64_t i = last, rest = t; i >= 0; --i) {
    tap[i] = rest % p.k_sizes[i];
    rest /= p.k_sizes[i];
  }
  const int64_t begin = p.run_begin[tap[last]];
  const int64_t count = p.run_end[tap[last]] - begin;
  if (count <= 0) return;
  int64_t index[8] = {0};
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = p.run_offset[tap[last]];
    bool valid = true;
    for (int64_t i = 0; i < last; ++i) {
      const int64_t v = p.plane_tables[i][tap[i] * p.out_sizes[i] + index[i]];
      valid &= v >= 0;
      base += v;
    }
    for (int64_t i = last - 1; i >= 0 && ++index[i] == p.out_sizes[i]; --i) index[i] = 0;
    if (valid) fn(o * inner + begin, base, count);
  }
}

// The im2col rows [row_begin, row_end) of one image (rows are (feature, tap) pairs, each
// `positions` long, at col + row * positions).
template <typename T>
void im2col_rows(const ConvPlan& p, const T* img, int64_t row_begin, int64_t row_end, T* col) {
  const int64_t step = p.run_step;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const T* plane = img + (row / p.taps) * p.plane;
    T* dst = col + row * p.positions;
    int64_t next = 0;  // positions before `next` are written
    for_each_run(p, row % p.taps, [&](int64_t position, int64_t offset, int64_t count) {
      std::fill(dst + next, dst + position, T(0));
      const T* src = plane + offset;
      // A loop, not memcpy: runs are short (one output row), a library call costs more.
      if (step == 1) {
        for (int64_t j = 0; j < count; ++j) dst[position + j] = src[j];
      } else {
        for (int64_t j = 0; j < count; ++j) dst[position + j] = src[j * step];
      }
      next = position + count;
    });
    std::fill(dst + next, dst + p.positions, T(0));
  }
}

template <typename T>
void conv_channels_first(const ConvPlan& p, const T* x, const T* w, T* y) {
  const int64_t k = p.c * p.taps;
  const int64_t threads = gemm_threads();
  // The GEMM of image i: y_i [o, positions] = w [o, k] * col [k, positions].
  auto multiply = [&](int64_t i, const T* col, bool split) {
    T* yi = y + i * p.o * p.positions;
    if (split) {
      parallel_gemm(false, false, p.o, p.positions, k, w, k, col, p.positions, yi, p.positions);
    } else {
      gemm(false, false, p.o, p.positions, k, w, k, col, p.positions, yi, p.positions);
    }
  };
  if (p.pointwise) {  // col is the image itself
    if (p.n >= threads) {
      parallel_for(p.n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) multiply(i, x + i * p.image, false);
      });
    } else {
      for (int64_t i = 0; i < p.n; ++i) multiply(i, x + i * p.image, true);
    }
    return;
  }
  const DType dtype = std::is_same_v<T, float> ? DType::F32 : DType::F64;
  if (p.n >= threads) {
    // Whole images per thread, each with its own im2col scratch.
    const int64_t parts = threads;
    Array scratch = allocate(dtype, {parts * k * p.positions});
    parallel_for(parts, 1, [&](int64_t part_begin, int64_t part_end) {
      for (int64_t part = part_begin; part < part_end; ++part) {
        T* col = scratch.data<T>() + part * k * p.positions;
        for (int64_t i = p.n * part / parts; i < p.n * (part + 1) / parts; ++i) {
          im2col_rows(p, x + i * p.image, 0, k, col);
          multiply(i, col, false);
        }
      }
    });
    return;
  }
  // Fewer images than threads: each image's im2col and GEMM split over the pool.
  Array scratch = allocate(dtype, {k * p.positions});
  T* col = scratch.data<T>();
  for (int64_t i = 0; i < p.n; ++i) {
    parallel_for(k, std::max<int64_t>(1, 16384 / p.positions), [&](int64_t b, int64_t e) {
      im2col_rows(p, x + i * p.image, b, e, col);
    });
    multiply(i, col, true);
  }
}

template <typename T>
void run_conv(const ConvPlan& p, const Array& lhs, const Array& rhs, Array& result,
              DType dtype) {
  const int64_t y_size = p.out_batch * p.positions * p.o;
  if (y_size == 0) return;
  T* y = result.data<T>();
  if (p.c == 0) {
    std::fill(y, y + y_size, T(0));
    return;
  }
  if (p.channels_first) {
    conv_channels_first(p, lhs.data<T>(), rhs.data<T>(), y);
    return;
  }
  Array x_scratch, w_scratch, y_scratch;
  const T* x = lhs.data<T>();
  const T* w = rhs.data<T>();
  if (!p.x_in_place) {
    x_scratch = allocate(dtype, {p.n * p.image});
    p.x_pack.run(x, x_scratch.data<T>());
    x = x_scratch.data<T>();
  }
  if (!p.w_in_place) {
    w_scratch = allocate(dtype, {p.taps * p.cg * p.o});
    p.w_pack.run(w, w_scratch.data<T>());
    w = w_scratch.data<T>();
  }
  if (!p.y_in_place) {
    y_scratch = allocate(dtype, {y_size});
    y = y_scratch.data<T>();
  }
  if (p.depthwise) {
    conv_depthwise(p, x, w, y);
  } else {
    conv_gemm(p, x, w, y);
  }
  if (!p.y_in_place) p.y_unpack.run(static_cast<const T*>(y), result.data<T>());
}

std::vector<int64_t> spatial_ints(const std::optional<std::vector<int64_t>>& given,
                                  const char* name, size_t dims) {
  auto values = given.value_or(std::vector<int64_t>(dims, 1));
  require(values.size() == dims, std::string(name) + " does not match the spatial rank");
  for (int64_t v : values) require(v > 0, std::string(name) + " must be positive");
  return values;
}

ConvPlan plan_conv(const OpSpec& spec) {
  const ConvolutionAttrs a = ConvolutionAttrs::decode(spec);
  const Shape& xs = spec.operands[0].shape;
  const Shape& ws = spec.operands[1].shape;
  const Shape& ys = spec.results[0].shape;
  const size_t rank = xs.size();
  require(rank >= 2 && ws.size() == rank && ys.size() == rank, "operand ranks differ");
  const size_t dims = rank - 2;
  require(dims <= 8, "more than 8 spatial dimensions");
  const std::vector<int64_t> x_perm = concat({{a.input_batch_dimension},
                                              a.input_spatial_dimensions,
                                              {a.input_feature_dimension}});
  const std::vector<int64_t> w_perm = concat({a.kernel_spatial_dimensions,
                                              {a.kernel_input_feature_dimension},
                                              {a.kernel_output_feature_dimension}});
  const std::vector<int64_t> y_perm = concat({{a.output_batch_dimension},
                                              a.output_spatial_dimensions,
                                              {a.output_feature_dimension}});
  for (const auto* perm : {&x_perm, &w_perm, &y_perm}) {
    std::vector<int64_t> sorted = *perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < rank; ++i) {
      require(sorted.size() == rank && sorted[i] == static_cast<int64_t>(i),
              "dimension_numbers is not a permutation");
    }
  }
  const auto strides = spatial_ints(a.window_strides, "window_strides", dims);
  const auto lhs_dilation = spatial_ints(a.lhs_dilation, "lhs_dilation", dims);
  const auto rhs_dilation = spatial_ints(a.rhs_dilation, "rhs_dilation", dims);
  std::vector<int64_t> reversal = a.window_reversal.value_or(std::vector<int64_t>(dims, 0));
  require(reversal.size() == dims, "window_reversal does not match the spatial rank");
  std::vector<int64_t> pad_low, pad_high;
  split_padding(a.padding, dims, pad_low, pad_high);

  ConvPlan p;
  p.feature_groups = a.feature_group_count;
  p.batch_groups = a.batch_group_count;
  require(p.feature_groups >= 1 && p.batch_groups >= 1 &&
              (p.feature_groups == 1 || p.batch_groups == 1),
          "invalid group counts");
  p.n = xs[x_perm[0]];
  p.c = xs[x_perm[rank - 1]];
  p.cg = ws[w_perm[dims]];
  p.o = ws[w_perm[dims + 1]];
  require(p.c == p.cg * p.feature_groups, "input features do not match the kernel's groups");
  require(p.o % (p.feature_groups * p.batch_groups) == 0 && p.n % p.batch_groups == 0,
          "output features and batch do not divide into the groups");
  p.og = p.o / (p.feature_groups * p.batch_groups);
  p.out_batch = p.n / p.batch_groups;

  // x image strides of the spatial dims in the canonical layout.
  std::vector<int64_t> x_stride(dims);
  int64_t stride = p.c;
  for (size_t i = dims; i-- > 0;) {
    x_stride[i] = stride;
    stride *= xs[x_perm[1 + i]];
  }
  p.image = stride;
  p.plane = p.image / std::max<int64_t>(1, p.c);
  // x plane strides of the spatial dims in the channels-first layout.
  std::vector<int64_t> plane_stride(dims);
  for (size_t i = 0; i < dims; ++i) plane_stride[i] = p.c > 0 ? x_stride[i] / p.c : 0;
  Shape expected(rank);
  expected[y_perm[0]] = p.out_batch;
  expected[y_perm[rank - 1]] = p.o;
  bool pointwise = true;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t size = xs[x_perm[1 + i]];
    const int64_t k = ws[w_perm[i]];
    require(k >= 1, "empty kernel window");
    const int64_t dilated = size == 0 ? 0 : (size - 1) * lhs_dilation[i] + 1;
    const int64_t padded = pad_low[i] + dilated + pad_high[i];
    const int64_t span = (k - 1) * rhs_dilation[i] + 1;
    const int64_t out = (padded <= 0 || span > padded) ? 0 : (padded - span) / strides[i] + 1;
    expected[y_perm[1 + i]] = out;
    p.out_sizes.push_back(out);
    p.k_sizes.push_back(k);
    p.positions *= out;
    p.taps *= k;
    std::vector<int64_t> table(out * k), plane_table(out * k);
    for (int64_t pos = 0; pos < out; ++pos) {
      for (int64_t t = 0; t < k; ++t) {
        const int64_t tap = reversal[i] ? k - 1 - t : t;
        const int64_t q = pos * strides[i] + tap * rhs_dilation[i] - pad_low[i];
        const bool valid = q >= 0 && q < dilated && q % lhs_dilation[i] == 0;
        table[pos * k + t] = valid ? q / lhs_dilation[i] * x_stride[i] : -1;
        plane_table[t * out + pos] = valid ? q / lhs_dilation[i] * plane_stride[i] : -1;
      }
    }
    p.tables.push_back(std::move(table));
    p.plane_tables.push_back(std::move(plane_table));
    pointwise &= k == 1 && strides[i] == 1 && lhs_dilation[i] == 1 && pad_low[i] == 0 &&
                 pad_high[i] == 0;
  }
  require(expected == ys, "unexpected convolution result shape");
  for (int64_t v : {p.out_batch * p.positions, p.taps * p.cg, p.o, p.c}) {
    require_blas_size(v, "convolution dimension");
  }
  p.pointwise = pointwise;
  p.depthwise = p.cg == 1 && p.feature_groups > 1;
  // im2col blocks of about 512 KiB: packed, then multiplied while in L2.
  p.block_rows = std::max<int64_t>(
      32, (int64_t{512} << 10) / (std::max<int64_t>(1, p.taps * p.cg) * dtype_size(
                                      spec.operands[0].dtype)));

  // Channels-first in place: x [b, f, 0, 1...], w [o, i, 0, 1...], y [b, f, 0, 1...].
  std::vector<int64_t> ordered(rank);
  for (size_t i = 0; i < rank; ++i) ordered[i] = static_cast<int64_t>(i);
  auto first = [&](int64_t a0, int64_t a1, const std::vector<int64_t>& spatial) {
    return concat({{a0, a1}, spatial}) == ordered;
  };
  const bool no_lhs_dilation = std::all_of(lhs_dilation.begin(), lhs_dilation.end(),
                                           [](int64_t d) { return d == 1; });
  // Grouped and depthwise convolutions stay channels-last (copies and all): per (image,
  // group) GEMMs of a few features each measured up to 2x slower than the channels-last
  // GEMMs over all images, and a per-plane depthwise loop 2-10x slower on small planes
  // than the loop vectorized over features.
  p.channels_first = dims >= 1 && p.feature_groups == 1 && p.batch_groups == 1 &&
                     no_lhs_dilation &&
                     first(a.input_batch_dimension, a.input_feature_dimension,
                           a.input_spatial_dimensions) &&
                     first(a.kernel_output_feature_dimension, a.kernel_input_feature_dimension,
                           a.kernel_spatial_dimensions) &&
                     first(a.output_batch_dimension, a.output_feature_dimension,
                           a.output_spatial_dimensions);
  if (p.channels_first) {
    require_blas_size(p.positions, "convolution dimension");
    const int64_t k = p.k_sizes[dims - 1], out = p.out_sizes[dims - 1];
    const std::vector<int64_t>& table = p.plane_tables[dims - 1];
    p.run_step = strides[dims - 1];
    for (int64_t t = 0; t < k; ++t) {
      int64_t begin = 0;
      while (begin < out && table[t * out + begin] < 0) ++begin;
      int64_t end = begin;
      while (end < out && table[t * out + end] >= 0) ++end;
      p.run_begin.push_back(begin);
      p.run_end.push_back(end);
      p.run_offset.push_back(begin < out ? table[t * out + begin] : 0);
    }
    return p;
  }
  p.x_pack = Permute(xs, x_perm);
  p.w_pack = Permute(ws, w_perm);
  p.x_in_place = p.x_pack.identity();
  p.w_in_place = p.w_pack.identity();
  Shape y_canonical;
  for (int64_t d : y_perm) y_canonical.push_back(ys[d]);
  p.y_unpack = Permute(y_canonical, inverse(y_perm));
  p.y_in_place = p.y_unpack.identity();
  return p;
}

Step make_convolution(const OpSpec& spec) {
  require(spec.operands.size() == 2 && spec.results.size() == 1, "expected two operands");
  const DType dtype = spec.operands[0].dtype;
  require(dtype == DType::F32 || dtype == DType::F64,
          std::string("no native convolution on ") + dtype_name(dtype));
  require(spec.operands[1].dtype == dtype && spec.results[0].dtype == dtype,
          "mixed convolution element types");
  auto plan = std::make_shared<const ConvPlan>(plan_conv(spec));
  TensorSpec result = spec.results[0];
  return [plan, result](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(result.dtype, result.shape);
    if (result.dtype == DType::F32) {
      run_conv<float>(*plan, operands[0], operands[1], results[0], result.dtype);
    } else {
      run_conv<double>(*plan, operands[0], operands[1], results[0], result.dtype);
    }
  };
}

OPENHLO_KERNEL(stablehlo_convolution, "stablehlo.convolution", make_convolution);

}  // namespace
}  // namespace openhlo::cpu
