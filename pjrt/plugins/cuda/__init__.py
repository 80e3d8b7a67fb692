"""The cuda backend: CUDA C kernels compiled ahead of time to sm_90a cubins (aot.py) and the
executable description a GPU runtime loads (see README.md)."""
