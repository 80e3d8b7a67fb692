"""Checks of exported StableHLO against upstream: MLIR's verifier and XLA, both from jaxlib.

    verify(text)                                   # parse + verify in upstream MLIR
    outputs = run_on_xla(text, arrays)             # compile with XLA's cpu client, run

A program with ``?`` dims runs as JAX runs shape-polymorphic exports: a static ``main`` of
the arrays' shapes calls it (``stablehlo.convert`` to and from the dynamic types), JAX's
``refine_polymorphic_shapes`` makes every shape static, then XLA compiles; ``result_shapes``
(the expected output shapes) are needed for that wrapper.
"""
from __future__ import annotations

import re

import numpy as np

_ELEMENTS = {np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("int64"): "i64",
             np.dtype("int32"): "i32", np.dtype("bool"): "i1"}


def verify(text: str) -> None:
    """Parse and verify ``text`` in upstream MLIR; raises MLIRError / AssertionError."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    with mlir.make_ir_context():
        assert ir.Module.parse(text).operation.verify()


def _static(shape, element: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def _wrap_dynamic(text: str, arrays, result_shapes) -> str:
    header = re.search(r"func\.func @main\((.*)\) -> (.*) \{", text)
    params = re.findall(r"%arg\d+: (tensor<[^>]*>)", header.group(1))
    results = re.findall(r"tensor<[^>]*>", header.group(2))
    body = text.replace("func.func @main(", "func.func private @openhlo_dynamic(", 1)
    statics = [_static(np.shape(a), _ELEMENTS[np.asarray(a).dtype]) for a in arrays]
    outs = [_static(shape, t[:-1].rsplit("x", 1)[-1]) for shape, t in zip(result_shapes,
                                                                             results)]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(statics))
    lines = [f"  func.func public @main({args}) -> ({', '.join(outs)}) {{"]
    for i, (s, d) in enumerate(zip(statics, params)):
        lines.append(f'    %c{i} = "stablehlo.convert"(%a{i}) : ({s}) -> {d}')
    call = f"%r:{len(results)}" if len(results) > 1 else "%r"
    operands = ", ".join(f"%c{i}" for i in range(len(params)))
    lines.append(f"    {call} = func.call @openhlo_dynamic({operands}) : "
                 f"({', '.join(params)}) -> ({', '.join(results)})")
    for i, (d, s) in enumerate(zip(results, outs)):
        name = f"%r#{i}" if len(results) > 1 else "%r"
        lines.append(f'    %o{i} = "stablehlo.convert"({name}) : ({d}) -> {s}')
    lines.append(f"    return {', '.join(f'%o{i}' for i in range(len(outs)))} : "
                 f"{', '.join(outs)}")
    lines.append("  }")
    return body.rstrip().rstrip("}") + "\n".join(lines) + "\n}\n"


def run_on_xla(text: str, arrays, result_shapes=None) -> list:
    """Compile ``text`` with XLA's cpu client (jaxlib) and run it on numpy ``arrays``."""
    import jax
    import jax.extend.backend
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client
    from jaxlib.mlir import ir
    header = re.search(r"func\.func @main\(.*\{", text).group(0)
    with mlir.make_ir_context():
        if "?" in header:
            if result_shapes is None:
                raise ValueError("a program with ? dims needs result_shapes")
            module = mlir.refine_polymorphic_shapes(
                ir.Module.parse(_wrap_dynamic(text, arrays, result_shapes)))
        else:
            module = ir.Module.parse(text)
        code = mlir.module_to_bytecode(module)
    backend = jax.extend.backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.local_devices()[:1]))
    executable = backend.compile_and_load(code, devices, xla_client.CompileOptions())
    with jax.enable_x64(True):  # int64 token ids stay int64
        buffers = [jax.device_put(np.asarray(a), devices[0]) for a in arrays]
        return [np.asarray(r) for r in executable.execute(buffers)]
