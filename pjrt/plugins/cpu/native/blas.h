// The BLAS the cpu backend links: OpenBLAS from the scipy-openblas32 wheel, whose symbols
// carry a `scipy_` prefix. Kernels call these wrappers rather than the prefixed names so the
// BLAS can be swapped in one place.
#pragma once

#include <cblas.h>

namespace openhlo::cpu::blas {

inline void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  scipy_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                    c, ldc);
}

inline void dgemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha,
                  const double* a, int lda, const double* b, int ldb, double beta, double* c,
                  int ldc) {
  scipy_cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                    c, ldc);
}

// Threads OpenBLAS itself uses (blas.py sets 1: kernels parallelize over our pool).
inline int num_threads() { return scipy_openblas_get_num_threads(); }

}  // namespace openhlo::cpu::blas
