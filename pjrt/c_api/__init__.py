"""The PJRT C-API plugin: a shared library exporting ``GetPjrtApi`` over our runtime.

C++ sources here build ``_openhlo_pjrt*.so`` (setup.py, BUILD); ``loader`` installs the
Python compile/execute callbacks into it; ``protos`` reads and writes the PJRT protobufs.
Frameworks register the library with themselves (frameworks/jax/plugin.py).
"""
