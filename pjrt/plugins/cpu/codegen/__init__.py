"""Generated C++ kernels of the cpu backend (see README: "Generated kernels")."""
