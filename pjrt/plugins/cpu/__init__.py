"""The cpu backend: a C++ executor with native and BLAS kernels (see README.md)."""
