// Fused scaled-dot-product attention: the `openhlo.attention` composite and its gradient
// `openhlo.attention_grad` (stablehlo/attention.py defines both and their decompositions).
//
// Forward (flash-attention style): per (leading index, query head, block of queries) the
// scores of one block of keys at a time are computed with a register-tiled product
// (small_gemm; k transposed once into panels of 32-key strips), scaled, biased and masked,
// and folded into the output with an online softmax (a running row max and row sum; the
// partial output is rescaled whenever the max grows). No [L, S] matrix ever exists: the
// scratch is one block of scores per task, so memory is linear in the sequence length.
// Each (head, query block) is its own task for the thread pool (parallel_for_each), unless
// the whole product is too small to wake a pool thread for (for_each_task).
// The row logsumexp (max + log(sum)) is the optional second result, for the backward.
//
// Backward: the probabilities are recomputed block by block from the saved logsumexp,
// P = exp(scale * q k^T + bias - lse). Two sweeps avoid write races without atomics:
// one over query blocks (dQ = sum over key blocks of dS K), one over key blocks (dK and dV
// summed over the query blocks of every query head that reads this key head), with
// dS = P * (dO V^T - rowsum(dO * O)) * scale; its products go to BLAS.
//
// Grouped-query / multi-query heads: query head h reads key/value head h / group, where
// group = Hq / Hkv. Everything is computed in f32; f16/bf16 operands are widened on the way in
// and the results rounded once on the way out.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "_generated/kernel_attrs.h"
#include "blas.h"
#include "kernel.h"
#include "kernels_elementwise.h"
#include "thread_pool.h"

namespace openhlo::cpu {
namespace {

using elementwise::float_to_bf16;
using elementwise::float_to_f16;
using elementwise::to_float;

// Block sizes (queries x keys), as PyTorch's CPU flash kernel picks them: small query blocks
// for short sequences keep every thread busy, long ones amortize the key block's loads.
int64_t query_block(int64_t length) { return length < 192 ? 32 : (length < 768 ? 64 : 256); }
constexpr int64_t kKeyBlock = 512;
// Keys per strip of the transposed k: the columns of one register tile (2 x Lanes).
constexpr int64_t kStrip = 32;
// Multiply-adds of a whole attention below which it runs on the calling thread: waking a pool
// thread costs several microseconds, and on a loaded machine a scheduler quantum, more than a
// small ViT's 6 heads of 17 tokens x 64 (0.2M) take.
constexpr int64_t kSplitWork = int64_t{1} << 18;
// Elements of k a task of its transpose copies at least (as widen's chunks).
constexpr int64_t kSplitCopy = int64_t{1} << 16;

// Row loops over one vector register's lanes at a time (GCC/Clang vector extensions): plain
// loops of reductions do not vectorize under strict IEEE semantics. The vector is the
// machine's own: 16 floats on AVX-512, else 8 (AVX2). A 64-byte vector on AVX2 is two
// registers each, and the register tiles below then need twice the 16 registers there are:
// their accumulators spill to the stack on every multiply-add (13x slower on an AVX2 EPYC).
#ifdef __AVX512F__
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 32;
#endif
typedef float Lanes __attribute__((vector_size(kVectorBytes)));
constexpr int kLanes = sizeof(Lanes) / sizeof(float);

typedef int32_t IntLanes __attribute__((vector_size(kVectorBytes)));

// exp of the softmax's arguments (x <= 0, or NaN), lane by lane: Cody-Waite reduction by
// ln 2 and Cephes' degree-6 polynomial, FMA allowed, about 1 ulp (mathlib's ohm_exp keeps the
// interpreter's rounding at several times the cost). Below -87 the result is 0, as
// exp(-inf) is. Rounding to the nearest integer adds and subtracts 1.5 * 2^23.
__attribute__((optimize("fp-contract=fast"))) Lanes exp_lanes(Lanes x) {
  const Lanes low = -87.f - Lanes{};
  const Lanes xc = x < low ? low : x;
  const Lanes shifted = xc * 1.44269504088896341f + 0x1.8p23f;
  const IntLanes n = (IntLanes)shifted - 0x4b400000;
  const Lanes nf = shifted - 0x1.8p23f;
  const Lanes r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  Lanes p = 1.9875691500e-4f - Lanes{};
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const Lanes y = p * (Lanes)((n + 127) << 23);
  return x < low ? Lanes{} : (x != x ? x : y);
}

// x[j] = exp(x[j] - shift) over a row; returns their sum (in lanes: its order is not the
// decomposition's anyway, the kernel is compared with a tolerance). The same optimize
// attribute as exp_lanes: GCC inlines no function whose optimization options differ from
// its caller's, and a call per vector costs a tenth of the forward.
__attribute__((optimize("fp-contract=fast"))) float exp_shifted(float* x, int64_t n, float shift) {
  Lanes total = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof v);
    v = exp_lanes(v - shift);
    total += v;
    std::memcpy(x + j, &v, sizeof v);
  }
  if (j < n) {  // the tail, through one vector padded with -inf (whose exp adds 0)
    Lanes v = -std::numeric_limits<float>::infinity() - Lanes{};
    std::memcpy(&v, x + j, (n - j) * sizeof(float));
    v = exp_lanes(v - shift);
    total += v;
    std::memcpy(x + j, &v, (n - j) * sizeof(float));
  }
  float sum = 0.f;
  for (int l = 0; l < kLanes; ++l) sum += total[l];
  return sum;
}

float max_of(const float* x, int64_t n) {
  const float low = -std::numeric_limits<float>::infinity();
  Lanes m = low - Lanes{};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof v);
    m = v > m ? v : m;
  }
  float r = low;
  for (int l = 0; l < kLanes; ++l) r = m[l] > r ? m[l] : r;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  return r;
}

// C (M x N) = alpha * A B, or C += A B (`accumulate`): A row-major (M x K, row stride lda),
// B row-major (K x N, row stride ldb). The forward's two products are thin (K or N is the
// head dim, 64 or so), where a BLAS call spends much of its time packing and on the edges of
// its tiles; this tiles C by kTileRows rows x 32 columns held in registers (R x C vectors
// of Lanes) and reads A and B where they lie. Multiply-adds may fuse (FMA): attention is compared
// with its decomposition within a tolerance, never bit for bit.
template <int R, int C>
__attribute__((optimize("fp-contract=fast"))) void tile(
    int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
    int64_t ldc, float alpha, bool accumulate) {
  Lanes acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < C; ++v) {
      if (accumulate) {
        std::memcpy(&acc[r][v], c + r * ldc + v * kLanes, sizeof(Lanes));
      } else {
        acc[r][v] = Lanes{};
      }
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    Lanes row[C];
    for (int v = 0; v < C; ++v) std::memcpy(&row[v], b + k * ldb + v * kLanes, sizeof(Lanes));
    for (int r = 0; r < R; ++r) {
      const float x = a[r * lda + k];
      for (int v = 0; v < C; ++v) acc[r][v] += x * row[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < C; ++v) {
      if (!accumulate) acc[r][v] *= alpha;
      std::memcpy(c + r * ldc + v * kLanes, &acc[r][v], sizeof(Lanes));
    }
  }
}

template <int R>
void row_panel(int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
               float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t j = 0;
  for (; j + 2 * kLanes <= N; j += 2 * kLanes) {
    tile<R, 2>(K, a, lda, b + j, ldb, c + j, ldc, alpha, accumulate);
  }
  for (; j + kLanes <= N; j += kLanes) tile<R, 1>(K, a, lda, b + j, ldb, c + j, ldc, alpha,
                                                  accumulate);
  for (; j < N; ++j) {  // the last columns of a block that is no multiple of the lanes
    for (int r = 0; r < R; ++r) {
      float sum = 0.f;
      for (int64_t k = 0; k < K; ++k) sum += a[r * lda + k] * b[k * ldb + j];
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + sum : alpha * sum;
    }
  }
}

// Rows of C per register tile: with 32 vector registers (AVX-512) 12 rows x 2 vectors of
// accumulators leave room for B's two vectors and A's broadcast, and load B 1.5 times less
// often than 8 rows do; with 16 (AVX2) 6 rows x 2 accumulators + 2 + 1 is 15.
#ifdef __AVX512F__
constexpr int kTileRows = 12;
constexpr int kMidRows = 8;
#else
constexpr int kTileRows = 6;
constexpr int kMidRows = 4;
#endif

void small_gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t i = 0;
  for (; i + kTileRows <= M; i += kTileRows) {
    row_panel<kTileRows>(N, K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, alpha, accumulate);
  }
  for (; i + kMidRows <= M; i += kMidRows) {
    row_panel<kMidRows>(N, K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, alpha, accumulate);
  }
  for (; i + 2 <= M; i += 2) {
    row_panel<2>(N, K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, alpha, accumulate);
  }
  for (; i < M; ++i) {
    row_panel<1>(N, K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, alpha, accumulate);
  }
}

// The operands widened to f32 (a view when they already are) and the index maths of one call.
struct Problem {
  int64_t lead = 1, heads = 0, kv_heads = 0, group = 1, L = 0, S = 0, D = 0, Dv = 0;
  float scale = 1.f, fill = -std::numeric_limits<float>::infinity();
  bool causal = false;
  const float *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  // k transposed per (lead, key/value head), key block and strip of kStrip keys:
  // [blocks, panel_keys() / kStrip, D, kStrip] (transpose_keys), so the forward's q k^T reads
  // each strip's D x kStrip values contiguously (from L1, for every row tile of the queries)
  const float* kt = nullptr;
  const bool* mask = nullptr;
  // Element offsets of bias/mask per (lead, head) and strides over queries and keys (0 where
  // the operand broadcasts that dimension).
  std::vector<int64_t> bias_base, mask_base;
  int64_t bias_q = 0, bias_k = 0, mask_q = 0, mask_k = 0;
  std::vector<std::vector<float>> widened;  // storage of widened operands

  // Keys per panel of kt: a whole key block, or all keys rounded up to a strip when they fit
  // in one (17 keys take one strip, not a 512-key panel to allocate and zero on every call).
  int64_t panel_keys() const { return std::min(kKeyBlock, (S + kStrip - 1) / kStrip * kStrip); }
  const float* q_at(int64_t zh) const { return q + zh * L * D; }
  const float* k_at(int64_t zh) const { return k + kv_row(zh) * S * D; }
  const float* v_at(int64_t zh) const { return v + kv_row(zh) * S * Dv; }
  // The key/value (lead, head) row that query (lead, head) row `zh` reads.
  int64_t kv_row(int64_t zh) const { return (zh / heads) * kv_heads + (zh % heads) / group; }
  // May the key block starting at `k0` be skipped for queries [q0, q1)? Only for causal
  // masking alone, where every entry there is `fill` and adds exactly nothing: an infinite
  // fill, or (JAX's) a finite one far below any score, each row's max being at least its
  // score of key 0 (no bias could lower that).
  bool skipped(int64_t q1, int64_t k0) const {
    const bool nothing = std::isinf(fill) || (!bias && fill <= -1e30f);
    return causal && nothing && !mask && k0 > q1 - 1;
  }

  // scores[i, j] (queries q0.., keys k0..) = scale * q k^T + bias, masked with `fill`.
  void scores(int64_t zh, int64_t q0, int64_t nq, int64_t k0, int64_t nk, float* s) const {
    if (kt) {
      const int64_t blocks = (S + kKeyBlock - 1) / kKeyBlock;
      const float* panel = kt + ((kv_row(zh) * blocks + k0 / kKeyBlock) * D) * panel_keys();
      for (int64_t j = 0; j < nk; j += kStrip) {
        small_gemm(nq, std::min(kStrip, nk - j), D, q_at(zh) + q0 * D, D, panel + j * D,
                   kStrip, s + j, nk, scale, false);
      }
    } else {
      blas::sgemm(false, true, nq, nk, D, scale, q_at(zh) + q0 * D, D, k_at(zh) + k0 * D, D,
                  0.f, s, nk);
    }
    for (int64_t i = 0; i < nq; ++i) {
      float* row = s + i * nk;
      if (bias) {
        const float* b = bias + bias_base[zh] + (q0 + i) * bias_q + k0 * bias_k;
        for (int64_t j = 0; j < nk; ++j) row[j] += b[j * bias_k];
      }
      if (mask) {
        const bool* m = mask + mask_base[zh] + (q0 + i) * mask_q + k0 * mask_k;
        for (int64_t j = 0; j < nk; ++j) row[j] = m[j * mask_k] ? row[j] : fill;
      }
      if (causal) {
        for (int64_t j = std::max<int64_t>(0, q0 + i + 1 - k0); j < nk; ++j) row[j] = fill;
      }
    }
  }
};

template <typename T>
const float* widen(const Array& a, std::vector<std::vector<float>>& keep) {
  if constexpr (std::is_same_v<T, float>) {
    keep.emplace_back();
    return a.data<float>();
  } else {
    const int64_t n = a.size();
    keep.emplace_back(n);
    float* out = keep.back().data();
    const T* in = a.data<T>();
    parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = to_float(in[i]);
    });
    return out;
  }
}

template <typename T>
void narrow(const float* in, const Array& out) {
  T* o = out.data<T>();
  const int64_t n = out.size();
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if constexpr (std::is_same_v<T, float>) o[i] = in[i];
      else if constexpr (std::is_same_v<T, bf16_t>) o[i] = bf16_t{float_to_bf16(in[i])};
      else o[i] = f16_t{float_to_f16(in[i])};
    }
  });
}

// Offsets of a [lead..., heads, L, S]-broadcastable operand of shape `shape` per (lead,
// head) row, and its query and key strides.
void broadcast_offsets(const Shape& shape, const Shape& scores, std::vector<int64_t>& base,
                       int64_t& q_stride, int64_t& k_stride) {
  const size_t r = scores.size();
  require(shape.size() == r, "attention: a bias or mask must have the rank of the scores");
  std::vector<int64_t> strides = row_major_strides(shape);
  for (size_t d = 0; d < r; ++d) {
    require(shape[d] == scores[d] || shape[d] == 1,
            "attention: a bias or mask dimension is neither 1 nor the scores'");
    if (shape[d] == 1) strides[d] = 0;
  }
  q_stride = strides[r - 2];
  k_stride = strides[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 2 < r; ++d) rows *= scores[d];
  base.assign(rows, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rest = row, off = 0;
    for (size_t d = r - 2; d-- > 0;) {
      off += (rest % scores[d]) * strides[d];
      rest /= scores[d];
    }
    base[row] = off;
  }
}

// The problem of an op whose first operands are q, k, v, [bias], [mask].
Problem make_problem(const OpSpec& spec, const AttentionAttrs& a) {
  const auto& qs = spec.operands[0].shape;
  const auto& ks = spec.operands[1].shape;
  const auto& vs = spec.operands[2].shape;
  const size_t r = qs.size();
  require(r >= 3 && ks.size() == r && vs.size() == r,
          "attention: q, k and v must be [..., heads, length, dim] of one rank >= 3");
  Problem p;
  for (size_t d = 0; d + 3 < r; ++d) {
    require(qs[d] == ks[d] && qs[d] == vs[d], "attention: leading dimensions differ");
    p.lead *= qs[d];
  }
  p.heads = qs[r - 3];
  p.kv_heads = ks[r - 3];
  require(vs[r - 3] == p.kv_heads && ks[r - 2] == vs[r - 2] && qs[r - 1] == ks[r - 1],
          "attention: k and v do not fit q");
  require(p.kv_heads > 0 && p.heads % p.kv_heads == 0,
          "attention: query heads are not a multiple of key/value heads");
  p.group = p.heads / p.kv_heads;
  p.L = qs[r - 2];
  p.S = ks[r - 2];
  p.D = qs[r - 1];
  p.Dv = vs[r - 1];
  p.scale = static_cast<float>(a.scale);
  p.fill = static_cast<float>(a.fill);
  p.causal = a.causal;
  const DType dt = spec.operands[0].dtype;
  require(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
          "attention: the native kernel takes f32, bf16 and f16");
  for (size_t i = 1; i < 3; ++i) require(spec.operands[i].dtype == dt, "attention: mixed types");
  Shape scores(qs.begin(), qs.end() - 1);
  scores.push_back(p.S);
  size_t next = 3;
  if (a.has_bias) {
    require(spec.operands[next].dtype == dt, "attention: the bias has another type than q");
    broadcast_offsets(spec.operands[next++].shape, scores, p.bias_base, p.bias_q, p.bias_k);
  }
  if (a.has_mask) {
    require(spec.operands[next].dtype == DType::PRED, "attention: the mask is not i1");
    broadcast_offsets(spec.operands[next++].shape, scores, p.mask_base, p.mask_q, p.mask_k);
  }
  return p;
}

// Widens the operands of one call into `p` (q, k, v, then bias and mask where present).
template <typename T>
void bind(Problem& p, const AttentionAttrs& a, const Array* in) {
  p.widened.clear();
  p.q = widen<T>(in[0], p.widened);
  p.k = widen<T>(in[1], p.widened);
  p.v = widen<T>(in[2], p.widened);
  size_t next = 3;
  if (a.has_bias) p.bias = widen<T>(in[next++], p.widened);
  if (a.has_mask) p.mask = in[next++].data<bool>();
}

// out[zh, q0 .. q0+nq) and its logsumexp, with an online softmax over key blocks.
void forward_block(const Problem& p, int64_t zh, int64_t q0, int64_t nq, float* out, float* lse,
                   std::vector<float>& scratch) {
  const int64_t bk = std::min(kKeyBlock, p.S);
  scratch.resize(nq * bk + nq * p.Dv + 2 * nq);
  float* s = scratch.data();
  float* acc = s + nq * bk;
  float* row_max = acc + nq * p.Dv;
  float* row_sum = row_max + nq;
  std::fill(acc, acc + nq * p.Dv, 0.f);
  std::fill(row_max, row_max + nq, -std::numeric_limits<float>::infinity());
  std::fill(row_sum, row_sum + nq, 0.f);
  for (int64_t k0 = 0; k0 < p.S; k0 += bk) {
    if (p.skipped(q0 + nq, k0)) break;  // later blocks are masked too
    const int64_t nk = std::min(bk, p.S - k0);
    p.scores(zh, q0, nq, k0, nk, s);
    for (int64_t i = 0; i < nq; ++i) {
      float* row = s + i * nk;
      const float m = std::max(row_max[i], max_of(row, nk));
      // exp(-inf - -inf) would be NaN: a row that is all -inf so far keeps its (zero) state
      const float shift = std::isinf(m) && m < 0 ? 0.f : m;
      const float rescale = exp_lanes((row_max[i] - shift) - Lanes{})[0];
      row_sum[i] = row_sum[i] * rescale + exp_shifted(row, nk, shift);
      row_max[i] = m;
      if (rescale != 1.f) {
        for (int64_t d = 0; d < p.Dv; ++d) acc[i * p.Dv + d] *= rescale;
      }
    }
    small_gemm(nq, p.Dv, nk, s, nk, p.v_at(zh) + k0 * p.Dv, p.Dv, acc, p.Dv, 1.f, true);
  }
  for (int64_t i = 0; i < nq; ++i) {
    const float inv = 1.f / row_sum[i];  // a fully masked row: 0 / 0, NaN, as the math gives
    for (int64_t d = 0; d < p.Dv; ++d) out[(q0 + i) * p.Dv + d] = acc[i * p.Dv + d] * inv;
    if (lse) lse[q0 + i] = row_max[i] + std::log(row_sum[i]);
  }
}

// k as [lead, kv heads, key blocks, panel_keys() / kStrip, D, kStrip] (Problem::kt): linear
// in S like k itself.
void transpose_keys(Problem& p) {
  const int64_t blocks = (p.S + kKeyBlock - 1) / kKeyBlock, D = p.D, S = p.S;
  const int64_t panels = p.lead * p.kv_heads * blocks, panel_keys = p.panel_keys();
  p.widened.emplace_back(panels * D * panel_keys);
  float* kt = p.widened.back().data();
  const int64_t chunk = kSplitCopy / std::max<int64_t>(1, D * panel_keys);
  parallel_for(panels, chunk, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = t / blocks, k0 = (t % blocks) * kKeyBlock;
      const float* k = p.k + (row * S + k0) * D;
      float* panel = kt + t * D * panel_keys;
      for (int64_t j = 0; j < std::min(kKeyBlock, S - k0); ++j) {
        float* strip = panel + (j / kStrip) * D * kStrip + j % kStrip;
        for (int64_t d = 0; d < D; ++d) strip[d * kStrip] = k[j * D + d];
      }
    }
  });
  p.kt = kt;
}

// fn over the tasks [0, tasks), each its own block on the pool (parallel_for_each), or all on
// the caller when the `work` (multiply-adds) of all of them is below kSplitWork.
void for_each_task(int64_t tasks, int64_t work,
                   const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (work < kSplitWork) {
    fn(0, tasks);
  } else {
    parallel_for_each(tasks, fn);
  }
}

template <typename T>
void run_forward(Problem& p, const AttentionAttrs& a, const Array* in, Array* results,
                 const OpSpec& spec) {
  bind<T>(p, a, in);
  transpose_keys(p);
  results[0] = allocate(spec.results[0].dtype, spec.results[0].shape);
  std::vector<float> wide_out;
  float* out = results[0].data<float>();
  if constexpr (!std::is_same_v<T, float>) {
    wide_out.resize(results[0].size());
    out = wide_out.data();
  }
  float* lse = nullptr;
  if (spec.results.size() > 1) {
    results[1] = allocate(DType::F32, spec.results[1].shape);
    lse = results[1].data<float>();
  }
  const int64_t bq = query_block(p.L);
  const int64_t blocks = (p.L + bq - 1) / bq;
  const int64_t work = p.lead * p.heads * p.L * p.S * (p.D + p.Dv);
  for_each_task(p.lead * p.heads * blocks, work, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t zh = t / blocks, q0 = (t % blocks) * bq;
      forward_block(p, zh, q0, std::min(bq, p.L - q0), out + zh * p.L * p.Dv,
                    lse ? lse + zh * p.L : nullptr, scratch);
    }
  });
  if constexpr (!std::is_same_v<T, float>) narrow<T>(out, results[0]);
}

template <typename Fn>
auto dispatch_float(DType dt, Fn&& fn) {
  if (dt == DType::BF16) return fn(TypeTag<bf16_t>{});
  if (dt == DType::F16) return fn(TypeTag<f16_t>{});
  return fn(TypeTag<float>{});
}

Step make_attention(const OpSpec& spec) {
  const AttentionAttrs a = AttentionAttrs::decode(spec);
  const Problem shape = make_problem(spec, a);
  require(spec.results.size() == 1 || spec.results[1].dtype == DType::F32,
          "attention: the logsumexp result must be f32");
  const DType dt = spec.operands[0].dtype;
  return [spec, a, shape, dt](ExecContext&, const Array* in, Array* results) {
    Problem p = shape;
    dispatch_float(dt, [&](auto tag) {
      run_forward<typename decltype(tag)::type>(p, a, in, results, spec);
    });
  };
}

// ---------------------------------------------------------------------------------------
// Backward. Operands: q, k, v, [bias], [mask], out, lse, dout; results dq, dk, dv.

struct Grad {
  const float *out, *lse, *dout;
  std::vector<float> delta;  // rowsum(dout * out) per query row
};

// P and dS of one (queries x keys) block: p = exp(s - lse); ds = p * (dO V^T - delta) * scale.
void probabilities(const Problem& p, const Grad& g, int64_t zh, int64_t q0, int64_t nq,
                   int64_t k0, int64_t nk, float* prob, float* ds) {
  p.scores(zh, q0, nq, k0, nk, prob);
  const float* lse = g.lse + zh * p.L + q0;
  for (int64_t i = 0; i < nq; ++i) {
    exp_shifted(prob + i * nk, nk, lse[i]);
  }
  blas::sgemm(false, true, nq, nk, p.Dv, 1.f, g.dout + (zh * p.L + q0) * p.Dv, p.Dv,
              p.v_at(zh) + k0 * p.Dv, p.Dv, 0.f, ds, nk);
  const float* delta = g.delta.data() + zh * p.L + q0;
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t j = 0; j < nk; ++j) {
      ds[i * nk + j] = prob[i * nk + j] * (ds[i * nk + j] - delta[i]) * p.scale;
    }
  }
}

void grad_query_block(const Problem& p, const Grad& g, int64_t zh, int64_t q0, int64_t nq,
                      float* dq, std::vector<float>& scratch) {
  const int64_t bk = std::min(kKeyBlock, p.S);
  scratch.resize(2 * nq * bk);
  float* prob = scratch.data();
  float* ds = prob + nq * bk;
  for (int64_t k0 = 0; k0 < p.S; k0 += bk) {
    if (p.skipped(q0 + nq, k0)) break;
    const int64_t nk = std::min(bk, p.S - k0);
    probabilities(p, g, zh, q0, nq, k0, nk, prob, ds);
    blas::sgemm(false, false, nq, p.D, nk, 1.f, ds, nk, p.k_at(zh) + k0 * p.D, p.D, 1.f,
                dq + (zh * p.L + q0) * p.D, p.D);
  }
}

// dK and dV of key/value row `zkv`, keys [k0, k0 + nk): every query head of its group.
void grad_key_block(const Problem& p, const Grad& g, int64_t zkv, int64_t k0, int64_t nk,
                    float* dk, float* dv, std::vector<float>& scratch) {
  const int64_t bq = query_block(p.L);
  scratch.resize(2 * bq * nk);
  float* prob = scratch.data();
  float* ds = prob + bq * nk;
  const int64_t z = zkv / p.kv_heads, hk = zkv % p.kv_heads;
  for (int64_t gi = 0; gi < p.group; ++gi) {
    const int64_t zh = z * p.heads + hk * p.group + gi;
    for (int64_t q0 = 0; q0 < p.L; q0 += bq) {
      const int64_t nq = std::min(bq, p.L - q0);
      if (p.skipped(q0 + nq, k0)) continue;
      probabilities(p, g, zh, q0, nq, k0, nk, prob, ds);
      blas::sgemm(true, false, nk, p.Dv, nq, 1.f, prob, nk, g.dout + (zh * p.L + q0) * p.Dv,
                  p.Dv, 1.f, dv + (zkv * p.S + k0) * p.Dv, p.Dv);
      blas::sgemm(true, false, nk, p.D, nq, 1.f, ds, nk, p.q_at(zh) + q0 * p.D, p.D, 1.f,
                  dk + (zkv * p.S + k0) * p.D, p.D);
    }
  }
}

template <typename T>
void run_backward(Problem& p, const AttentionAttrs& a, const Array* in, Array* results,
                  const OpSpec& spec) {
  bind<T>(p, a, in);
  const size_t first = 3 + (a.has_bias ? 1 : 0) + (a.has_mask ? 1 : 0);
  Grad g;
  g.out = widen<T>(in[first], p.widened);
  g.lse = in[first + 1].data<float>();
  g.dout = widen<T>(in[first + 2], p.widened);
  const int64_t rows = p.lead * p.heads * p.L;
  g.delta.assign(rows, 0.f);
  parallel_for(rows, 256, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float sum = 0.f;
      for (int64_t d = 0; d < p.Dv; ++d) sum += g.dout[r * p.Dv + d] * g.out[r * p.Dv + d];
      g.delta[r] = sum;
    }
  });
  std::vector<float> dq(rows * p.D, 0.f), dk(p.lead * p.kv_heads * p.S * p.D, 0.f),
      dv(p.lead * p.kv_heads * p.S * p.Dv, 0.f);
  const int64_t bq = query_block(p.L);
  const int64_t q_blocks = (p.L + bq - 1) / bq;
  // each sweep recomputes the probabilities and takes two products of them
  const int64_t work = p.lead * p.heads * p.L * p.S * (2 * p.D + p.Dv);
  for_each_task(p.lead * p.heads * q_blocks, work, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t q0 = (t % q_blocks) * bq;
      grad_query_block(p, g, t / q_blocks, q0, std::min(bq, p.L - q0), dq.data(), scratch);
    }
  });
  const int64_t bk = std::min(kKeyBlock, p.S);
  const int64_t k_blocks = (p.S + bk - 1) / bk;
  for_each_task(p.lead * p.kv_heads * k_blocks, work, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t k0 = (t % k_blocks) * bk;
      grad_key_block(p, g, t / k_blocks, k0, std::min(bk, p.S - k0), dk.data(), dv.data(),
                     scratch);
    }
  });
  const float* grads[3] = {dq.data(), dk.data(), dv.data()};
  for (int i = 0; i < 3; ++i) {
    results[i] = allocate(spec.results[i].dtype, spec.results[i].shape);
    narrow<T>(grads[i], results[i]);
  }
}

Step make_attention_grad(const OpSpec& spec) {
  const AttentionGradAttrs ga = AttentionGradAttrs::decode(spec);
  const AttentionAttrs a{ga.scale, ga.causal, ga.has_bias, ga.has_mask, ga.fill};
  const Problem shape = make_problem(spec, a);
  const size_t first = 3 + (a.has_bias ? 1 : 0) + (a.has_mask ? 1 : 0);
  require(spec.operands.size() == first + 3 && spec.results.size() == 3,
          "attention_grad: operands q, k, v, [bias], [mask], out, lse, dout; results dq, dk, dv");
  require(spec.operands[first + 1].dtype == DType::F32, "attention_grad: lse must be f32");
  const DType dt = spec.operands[0].dtype;
  return [spec, a, shape, dt](ExecContext&, const Array* in, Array* results) {
    Problem p = shape;
    dispatch_float(dt, [&](auto tag) {
      run_backward<typename decltype(tag)::type>(p, a, in, results, spec);
    });
  };
}

}  // namespace

OPENHLO_KERNEL(openhlo_attention, "openhlo.attention", make_attention);
OPENHLO_KERNEL(openhlo_attention_grad, "openhlo.attention_grad", make_attention_grad);

}  // namespace openhlo::cpu
