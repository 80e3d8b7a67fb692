"""Paged-attention decode: one query token per sequence against a KV cache kept in
fixed-size blocks, the blocks of each sequence found through a block table (vLLM's
PagedAttention layout), as the custom kernel ``paged_attention_decode``.

    define()                                          # registers it (once per process)
    out = run_kernel("paged_attention_decode", q, k_new, v_new, k_cache, v_cache,
                     block_tables, context_lens, scale=d ** -0.5)

Operands (f32 unless said):

* ``q``: ``[batch, heads, head_dim]``, the current token's queries;
* ``k_new``, ``v_new``: ``[batch, kv_heads, head_dim]``, the current token's keys and values
  (attended to after the cached ones; the caller writes them into the cache after the step,
  so the compiled step is a pure function and the cache is never copied);
* ``k_cache``, ``v_cache``: ``[num_blocks, block_size, kv_heads, head_dim]``;
* ``block_tables``: i32 ``[batch, max_blocks]``: sequence b's token t is in slot
  ``t % block_size`` of block ``block_tables[b, t // block_size]``;
* ``context_lens``: i32 ``[batch]``: how many cached tokens sequence b has (0: only the new
  token; a padding row of a batch gives 0 and any block table).

Result ``[batch, heads, head_dim]``: softmax(q.k * scale) . v over the cached tokens then the
new one. Query head h reads kv head ``h / (heads / kv_heads)`` (grouped- and multi-query
attention). One pass over the keys with an online softmax (a running maximum and sum,
rescaling the accumulated output when the maximum grows), so nothing of length
``context_len`` is stored; (sequence, head) pairs run in parallel on the runtime's threads.
A block id outside the cache or a context longer than the block table is an error naming
the kernel.
"""
from __future__ import annotations

import numpy as np

from pjrt.custom_kernels.registry import CUSTOM_KERNELS, TensorSpec, define_kernel
from pjrt.custom_kernels.implementation import Source

NAME = "paged_attention_decode"

SOURCE = r"""
struct PagedDecode {
  const float *q, *k_new, *v_new, *k_cache, *v_cache;
  const int32_t *block_tables, *context_lens;
  float* out;
  int64_t heads, kv_heads, head_dim, block_size, max_blocks;
  float scale;
};

// Adds token (k, v) to the running softmax of one (sequence, head): out holds the
// unnormalized sum of p_t * v_t with p_t = exp(s_t - max).
static void attend(const PagedDecode* p, const float* q, const float* k, const float* v,
                   float* out, float* max, float* sum) {
  float s = 0.0f;
  for (int64_t j = 0; j < p->head_dim; ++j) s += q[j] * k[j];
  s *= p->scale;
  if (s > *max) {  // a new maximum: rescale what was accumulated under the old one
    const float rescale = __builtin_expf(*max - s);
    for (int64_t j = 0; j < p->head_dim; ++j) out[j] *= rescale;
    *sum *= rescale;
    *max = s;
  }
  const float w = __builtin_expf(s - *max);
  for (int64_t j = 0; j < p->head_dim; ++j) out[j] += w * v[j];
  *sum += w;
}

static void decode_heads(void* arg, int64_t begin, int64_t end) {
  const PagedDecode* p = (const PagedDecode*)arg;
  const int64_t d = p->head_dim, group = p->heads / p->kv_heads;
  const int64_t token_stride = p->kv_heads * d, block_stride = p->block_size * token_stride;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b = i / p->heads, h = i % p->heads, kvh = h / group;
    const float* q = p->q + i * d;
    float* out = p->out + i * d;
    for (int64_t j = 0; j < d; ++j) out[j] = 0.0f;
    float max = -__builtin_inff(), sum = 0.0f;
    const int32_t* table = p->block_tables + b * p->max_blocks;
    const int64_t context = p->context_lens[b];
    for (int64_t t = 0; t < context; ++t) {
      const int64_t at = table[t / p->block_size] * block_stride +
                         (t % p->block_size) * token_stride + kvh * d;
      attend(p, q, p->k_cache + at, p->v_cache + at, out, &max, &sum);
    }
    const int64_t now = (b * p->kv_heads + kvh) * d;
    attend(p, q, p->k_new + now, p->v_new + now, out, &max, &sum);
    for (int64_t j = 0; j < d; ++j) out[j] /= sum;
  }
}

static bool dims_are(const XLA_FFI_Buffer* x, int64_t rank, const int64_t* dims) {
  if (x->rank != rank) return false;
  for (int64_t i = 0; i < rank; ++i)
    if (dims[i] >= 0 && x->dims[i] != dims[i]) return false;
  return true;
}

extern "C" XLA_FFI_Error* paged_attention_decode(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Buffer *q = ohlo_arg(frame, 0), *k_new = ohlo_arg(frame, 1),
                 *v_new = ohlo_arg(frame, 2), *k_cache = ohlo_arg(frame, 3),
                 *v_cache = ohlo_arg(frame, 4), *tables = ohlo_arg(frame, 5),
                 *lens = ohlo_arg(frame, 6);
  for (int64_t i = 0; i < 5; ++i)
    if (ohlo_arg(frame, i)->dtype != XLA_FFI_DataType_F32)
      return ohlo_error(frame, "paged_attention_decode: q, k_new, v_new, k_cache and v_cache "
                               "must be f32");
  if (tables->dtype != XLA_FFI_DataType_S32 || lens->dtype != XLA_FFI_DataType_S32)
    return ohlo_error(frame, "paged_attention_decode: block_tables and context_lens must be i32");
  if (q->rank != 3 || k_cache->rank != 4)
    return ohlo_error(frame, "paged_attention_decode: q is [batch, heads, head_dim] and "
                             "k_cache [num_blocks, block_size, kv_heads, head_dim]");
  const int64_t batch = q->dims[0], heads = q->dims[1], d = q->dims[2];
  const int64_t blocks = k_cache->dims[0], block_size = k_cache->dims[1],
                kv_heads = k_cache->dims[2];
  const int64_t new_dims[3] = {batch, kv_heads, d};
  const int64_t cache_dims[4] = {blocks, block_size, kv_heads, d};
  const int64_t table_dims[2] = {batch, -1};
  const int64_t lens_dims[1] = {batch};
  if (!dims_are(k_new, 3, new_dims) || !dims_are(v_new, 3, new_dims) ||
      !dims_are(k_cache, 4, cache_dims) || !dims_are(v_cache, 4, cache_dims) ||
      !dims_are(tables, 2, table_dims) || !dims_are(lens, 1, lens_dims) ||
      kv_heads == 0 || heads % kv_heads != 0)
    return ohlo_error(frame, "paged_attention_decode: operand shapes do not agree (k_new, "
                             "v_new [batch, kv_heads, head_dim], the caches [blocks, "
                             "block_size, kv_heads, head_dim], block_tables [batch, n], "
                             "context_lens [batch], heads a multiple of kv_heads)");
  const int64_t max_blocks = tables->dims[1];
  const int32_t* table = (const int32_t*)tables->data;
  const int32_t* context = (const int32_t*)lens->data;
  for (int64_t b = 0; b < batch; ++b) {
    if (context[b] < 0 || context[b] > max_blocks * block_size)
      return ohlo_error(frame, "paged_attention_decode: a context length is negative or "
                               "longer than its block table holds");
    for (int64_t n = 0; n * block_size < context[b]; ++n)
      if (table[b * max_blocks + n] < 0 || table[b * max_blocks + n] >= blocks)
        return ohlo_error(frame, "paged_attention_decode: a block table entry in use is not "
                                 "a block of the cache");
  }
  PagedDecode p = {(const float*)q->data, (const float*)k_new->data,
                   (const float*)v_new->data, (const float*)k_cache->data,
                   (const float*)v_cache->data, table, context,
                   (float*)ohlo_ret(frame, 0)->data, heads, kv_heads, d, block_size,
                   max_blocks, (float)ohlo_attr_scalar(frame, "scale", 1.0)};
  ohlo_parallel_for(frame, batch * heads, 1, decode_heads, &p);
  return 0;
}
"""


def reference(q, k_new, v_new, k_cache, v_cache, block_tables, context_lens, scale):
    """Dense float64 attention: each sequence's keys and values gathered from its blocks
    into one array, the new token appended, then a plain softmax."""
    batch, heads, d = q.shape
    kv_heads = k_cache.shape[2]
    block_size = k_cache.shape[1]
    out = np.zeros((batch, heads, d))
    for b in range(batch):
        t = np.arange(int(context_lens[b]))
        blocks = block_tables[b][t // block_size]
        keys = np.concatenate([k_cache[blocks, t % block_size], k_new[b][None]]).astype(
            np.float64)  # [context + 1, kv_heads, d]
        values = np.concatenate([v_cache[blocks, t % block_size], v_new[b][None]]).astype(
            np.float64)
        for h in range(heads):
            kvh = h // (heads // kv_heads)
            scores = keys[:, kvh] @ q[b, h].astype(np.float64) * scale
            weights = np.exp(scores - scores.max())
            out[b, h] = weights @ values[:, kvh] / weights.sum()
    return out.astype(q.dtype)


def define() -> None:
    """Register ``paged_attention_decode`` (no-op when it already is)."""
    if NAME in CUSTOM_KERNELS:
        return
    define_kernel(NAME, Source(SOURCE, NAME), attrs={"scale": "f32"},
                  shape_fn=lambda q, k_new, v_new, k_cache, v_cache, block_tables,
                  context_lens, scale: [TensorSpec(q.shape, q.dtype)],
                  reference=reference)
