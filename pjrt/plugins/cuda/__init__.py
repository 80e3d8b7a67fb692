"""The cuda backend: a C++ runtime over the CUDA driver API, loaded at run time (README.md)."""
