"""An RMS norm written in C++ against pjrt/native/openhlo_ffi.h, declared once with its numpy
reference and its VJP kernel: the kernel the custom-kernel tests run from every frontend
(a support module, imported by the JAX and PyTorch tests too)."""
import numpy as np

from pjrt.custom_kernels import CUSTOM_KERNELS, Source, TensorSpec, define_kernel

SOURCE = r"""
struct RmsRows { const float* x; const float* w; const float* g; float* y; int64_t n; float eps; };

static float inv_rms(const float* x, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
  return 1.0f / __builtin_sqrtf(ss / (float)n + eps);
}

static void forward_rows(void* p, int64_t begin, int64_t end) {
  const RmsRows* r = (const RmsRows*)p;
  for (int64_t i = begin; i < end; ++i) {
    const float* x = r->x + i * r->n;
    float* y = r->y + i * r->n;
    const float scale = inv_rms(x, r->n, r->eps);
    for (int64_t j = 0; j < r->n; ++j) y[j] = x[j] * scale * r->w[j];
  }
}

// dx = r * g * w - x * r^3 * mean(g * w * x), per row
static void backward_rows(void* p, int64_t begin, int64_t end) {
  const RmsRows* r = (const RmsRows*)p;
  for (int64_t i = begin; i < end; ++i) {
    const float* x = r->x + i * r->n;
    const float* g = r->g + i * r->n;
    float* dx = r->y + i * r->n;
    const float scale = inv_rms(x, r->n, r->eps);
    float dot = 0.0f;
    for (int64_t j = 0; j < r->n; ++j) dot += g[j] * r->w[j] * x[j];
    const float k = scale * scale * scale * dot / (float)r->n;
    for (int64_t j = 0; j < r->n; ++j) dx[j] = scale * g[j] * r->w[j] - x[j] * k;
  }
}

static XLA_FFI_Error* check_f32(XLA_FFI_CallFrame* frame, int64_t args) {
  for (int64_t i = 0; i < args; ++i) {
    if (ohlo_arg(frame, i)->dtype != XLA_FFI_DataType_F32) {
      return ohlo_error(frame, "rms_norm takes f32 operands");
    }
  }
  return 0;
}

extern "C" XLA_FFI_Error* rms_norm(XLA_FFI_CallFrame* frame) {
  if (XLA_FFI_Error* error = check_f32(frame, 2)) return error;
  XLA_FFI_Buffer* x = ohlo_arg(frame, 0);
  const int64_t n = x->dims[x->rank - 1];
  RmsRows rows = {(const float*)x->data, (const float*)ohlo_arg(frame, 1)->data, 0,
                  (float*)ohlo_ret(frame, 0)->data, n,
                  (float)ohlo_attr_scalar(frame, "eps", 1e-6)};
  ohlo_parallel_for(frame, ohlo_num_elements(x) / n, 8, forward_rows, &rows);
  return 0;
}

extern "C" XLA_FFI_Error* rms_norm_vjp(XLA_FFI_CallFrame* frame) {
  if (XLA_FFI_Error* error = check_f32(frame, 3)) return error;
  XLA_FFI_Buffer* x = ohlo_arg(frame, 0);
  const int64_t n = x->dims[x->rank - 1];
  const int64_t rows = ohlo_num_elements(x) / n;
  const float eps = (float)ohlo_attr_scalar(frame, "eps", 1e-6);
  RmsRows grad = {(const float*)x->data, (const float*)ohlo_arg(frame, 1)->data,
                  (const float*)ohlo_arg(frame, 2)->data, (float*)ohlo_ret(frame, 0)->data, n,
                  eps};
  ohlo_parallel_for(frame, rows, 8, backward_rows, &grad);
  float* dw = (float*)ohlo_ret(frame, 1)->data;  // dw = sum over rows of g * x * r
  for (int64_t j = 0; j < n; ++j) dw[j] = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = grad.x + i * n;
    const float* gi = grad.g + i * n;
    const float scale = inv_rms(xi, n, eps);
    for (int64_t j = 0; j < n; ++j) dw[j] += gi[j] * xi[j] * scale;
  }
  return 0;
}
"""


def reference(x, w, eps):
    x64 = x.astype(np.float64)
    return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w).astype(x.dtype)


def reference_vjp(x, w, g, eps):
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    r = 1.0 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)
    dot = (g64 * w64 * x64).mean(-1, keepdims=True)
    dx = r * g64 * w64 - x64 * r ** 3 * dot
    dw = (g64 * x64 * r).reshape(-1, x.shape[-1]).sum(0)
    return dx.astype(x.dtype), dw.astype(w.dtype)


def define() -> None:
    """Register ``rms_norm`` and ``rms_norm_vjp`` (once per process)."""
    if "rms_norm" in CUSTOM_KERNELS:
        return
    define_kernel("rms_norm_vjp", Source(SOURCE, "rms_norm_vjp"), attrs={"eps": "f32"},
                  shape_fn=lambda x, w, g, eps: [x, w], reference=reference_vjp,
                  vmap_method="sequential", num_outputs=2)
    define_kernel("rms_norm", Source(SOURCE, "rms_norm"), attrs={"eps": "f32"},
                  shape_fn=lambda x, w, eps: [TensorSpec(x.shape, x.dtype)],
                  reference=reference, vjp="rms_norm_vjp", vmap_method="sequential")


define()  # importing the module registers the kernels (``openhlo kernel-check --module``)
