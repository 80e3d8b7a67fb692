"""The cuda backend: CUDA C kernels compiled ahead of time to sm_90a cubins (aot.py), run by a
C++ runtime over the CUDA driver API, loaded at run time (see README.md)."""
