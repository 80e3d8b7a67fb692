// The plan of a dot_general shared by its kernels (kernels_linalg.cc: float GEMMs on BLAS;
// kernels_lowp_dot.cc: int8 and bf16 GEMMs): each operand brought to a batch of matrices,
// [B, M, K] and [B, K, N], in place when its layout already is one (possibly transposed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernel.h"
#include "permute.h"

namespace openhlo::cpu {

// One operand as a batch of matrices: used in place (with a transpose flag) when its layout
// allows, else packed into [B, rows, cols] scratch by `pack`.
struct MatrixOperand {
  bool in_place = false;
  bool transposed = false;
  int64_t ld = 0;
  Permute pack;
};

// `first` and `second` are the operand dims of the matrix rows and columns (M and K for the
// lhs, K and N for the rhs) after the batch dims; `same_type`: the GEMM reads the operand's
// own element type (else it is always converted into scratch).
inline MatrixOperand plan_matrix(const Shape& shape, const std::vector<int64_t>& batch,
                                 const std::vector<int64_t>& first,
                                 const std::vector<int64_t>& second, bool same_type) {
  MatrixOperand m;
  int64_t rows = 1, cols = 1;
  for (int64_t d : first) rows *= shape[d];
  for (int64_t d : second) cols *= shape[d];
  const std::vector<int64_t> normal = concat({batch, first, second});
  m.pack = Permute(shape, normal);
  if (same_type && m.pack.identity()) {
    m.in_place = true;
    m.ld = std::max<int64_t>(1, cols);
  } else if (same_type && Permute(shape, concat({batch, second, first})).identity()) {
    m.in_place = true;
    m.transposed = true;
    m.ld = std::max<int64_t>(1, rows);
  } else {
    m.ld = std::max<int64_t>(1, cols);
  }
  return m;
}

struct DotPlan {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  MatrixOperand lhs, rhs;
  bool result_in_place = true;  // result type == accumulation type
};

// The step of a dot_general whose lhs, rhs and result element types have a low-precision
// kernel (i8 x i8 -> i32; bf16 x bf16 -> f32 or bf16 where the CPU has AVX-512 BF16), the
// plan's operands planned with same_type; an empty Step for any other types.
Step make_lowp_dot(const DotPlan& plan, const TensorSpec& lhs, const TensorSpec& rhs,
                   const TensorSpec& result);

}  // namespace openhlo::cpu
