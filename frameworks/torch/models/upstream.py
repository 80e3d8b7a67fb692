"""Checks of exported StableHLO against upstream: MLIR's verifier and XLA, both from jaxlib.

    verify(text)                                   # parse + verify in upstream MLIR
    outputs = run_on_xla(module, arrays)           # compile with XLA's cpu client, run

A program with ``?`` dims runs as JAX runs shape-polymorphic exports: a static ``main`` of
the arrays' shapes calls it (``stablehlo.convert`` to and from the dynamic types), JAX's
``refine_polymorphic_shapes`` makes every shape static, then XLA compiles; ``result_shapes``
(the expected output shapes) are needed for that wrapper, which is built on a copy of the
Module and printed for jaxlib.
"""
from __future__ import annotations

import numpy as np

import stablehlo
from stablehlo.builder import Builder
from stablehlo.ir.attributes import StringAttr
from stablehlo.ir.core import Module
from stablehlo.ir.types import TensorType, element_type_for_dtype


def verify(text: str) -> None:
    """Parse and verify ``text`` in upstream MLIR; raises MLIRError / AssertionError."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    with mlir.make_ir_context():
        assert ir.Module.parse(text).operation.verify()


def _wrap_dynamic(module: Module, arrays, result_shapes) -> Module:
    """A copy of ``module`` whose ``main`` (renamed ``openhlo_dynamic``) is called by a
    static ``main`` of the arrays' shapes and ``result_shapes``."""
    wrapped = stablehlo.parse(str(module))
    dynamic = wrapped.lookup("main")
    dynamic.op.attributes["sym_name"] = StringAttr("openhlo_dynamic")
    dynamic.op.attributes["sym_visibility"] = StringAttr("private")
    params, results = dynamic.type.inputs, dynamic.type.results
    statics = [TensorType(np.shape(a), element_type_for_dtype(np.asarray(a).dtype))
               for a in arrays]
    outs = [t.with_shape(shape) for t, shape in zip(results, result_shapes)]
    b = Builder(wrapped)
    b.record_locations = False
    with b.function("main", statics, outs) as (_, args):
        converted = [b.op("stablehlo.convert", [a], [d]).result for a, d in zip(args, params)]
        called = b.call("openhlo_dynamic", converted)
        called = [called] if len(results) == 1 else called
        b.return_(*(b.op("stablehlo.convert", [r], [s]).result for r, s in zip(called, outs)))
    return wrapped


def run_on_xla(module: Module, arrays, result_shapes=None) -> list:
    """Compile ``module`` with XLA's cpu client (jaxlib) and run it on numpy ``arrays``."""
    import jax
    import jax.extend.backend
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client
    from jaxlib.mlir import ir
    main = module.lookup("main").type
    with mlir.make_ir_context():
        if not all(t.is_static for t in (*main.inputs, *main.results)):
            if result_shapes is None:
                raise ValueError("a program with ? dims needs result_shapes")
            parsed = mlir.refine_polymorphic_shapes(
                ir.Module.parse(str(_wrap_dynamic(module, arrays, result_shapes))))
        else:
            parsed = ir.Module.parse(str(module))
        code = mlir.module_to_bytecode(parsed)
    backend = jax.extend.backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.local_devices()[:1]))
    executable = backend.compile_and_load(code, devices, xla_client.CompileOptions())
    with jax.enable_x64(True):  # int64 token ids stay int64
        buffers = [jax.device_put(np.asarray(a), devices[0]) for a in arrays]
        return [np.asarray(r) for r in executable.execute(buffers)]
