"""The cuda backend's code generator: its ``KernelTarget`` (target.py), its fusion hook
(hook.py) and the translation unit of a program's kernels (source.py)."""
