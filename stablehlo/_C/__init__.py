"""C++ hot paths of the IR (pybind11); each has a pure-Python reference twin.

``_native`` (built from ``native.cc``): ``decode_hex``, ``encode_hex`` and ``format_floats``
for dense literals; the references live in ``stablehlo.text.literals``.
"""
