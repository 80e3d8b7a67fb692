"""The cuda backend's code generator: its ``KernelTarget`` (target.py), its fusion hook
(hook.py), the kernels of the indexing ops fusion keeps out (indexing.py) and the translation
unit of a program's kernels (source.py)."""
