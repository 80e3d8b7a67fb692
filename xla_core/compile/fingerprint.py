"""Structural fingerprints of modules, and the compilation cache key built from them.

A ``Module`` handed to the compiler is never printed back to text to be keyed: printing
large constants costs more than compiling a small program. ``module_fingerprint`` walks the
ops instead (names, operands as definition numbers, attributes, result types, regions and
block arguments) and hashes what it meets; locations are left out, as the printer leaves
them out. Two modules that print the same get the same fingerprint.

``cache_key`` is the one key every persistent compilation cache uses: the program (its text
as given, else its fingerprint), the compile options as given, and the backend's identity
(name, version and every setting that changes what it generates).
"""
from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from stablehlo.ir.attributes import DenseElementsAttr, splat_bytes
from stablehlo.ir.core import Block, Module, Operation


def module_fingerprint(module: Module) -> str:
    """sha256 (hex) of the structure of ``module``."""
    digest = hashlib.sha256()
    _Walker(digest).operation(module.op)
    return digest.hexdigest()


def cache_key(program: str | Module, options, backend_identity: str) -> str:
    """The key of ``program`` (its text as given, or a Module) compiled with ``options`` (the
    runtime's CompileOptions as given: entry, replica and partition counts, option
    overrides; not the device assignment, which does not change the program) by the backend
    that ``backend_identity`` names."""
    digest = hashlib.sha256(backend_identity.encode())
    overrides = sorted((k, repr(v)) for k, v in options.env_option_overrides.items())
    digest.update(f"\0{options.entry}\0{options.num_replicas}\0{options.num_partitions}\0"
                  f"{overrides}\0".encode())
    if isinstance(program, str):
        digest.update(b"text\0" + program.encode())
    else:
        digest.update(b"module\0" + module_fingerprint(program).encode())
    return digest.hexdigest()[:40]


class _Walker:
    """Feeds one module into a hash. Values are numbered in definition order, so operands
    name what they use without names or identities."""

    def __init__(self, digest):
        self._digest = digest
        self._numbers: dict = {}

    def _text(self, text: str) -> None:
        # Length-prefixed, so that neighbouring strings cannot run into each other.
        data = text.encode()
        self._digest.update(b"%d:" % len(data) + data)

    def _number(self, value) -> int:
        return self._numbers.setdefault(id(value), len(self._numbers))

    def operation(self, op: Operation) -> None:
        self._text(op.name)
        self._text(" ".join(str(self._number(v)) for v in op.operands))
        for name in sorted(op.attributes):
            self._text(name)
            self.attribute(op.attributes[name])
        for result in op.results:
            self._number(result)
            self.attribute(result.type)
        self._text(f"regions {len(op.regions)}")
        for region in op.regions:
            self._text(f"blocks {len(region.blocks)}")
            for block in region.blocks:
                self._block(block)

    def _block(self, block: Block) -> None:
        self._text(f"arguments {len(block.arguments)}")
        for argument in block.arguments:
            self._number(argument)
            self.attribute(argument.type)
        self._text(f"operations {len(block.operations)}")
        for op in block.operations:
            self.operation(op)

    def attribute(self, value) -> None:
        """An attribute, a type, or a field of one (attributes and types are dataclasses)."""
        if isinstance(value, DenseElementsAttr):
            self._text("dense")
            self.attribute(value.type)
            splat = splat_bytes(value.array)  # a splat hashes alike however it is held
            self._digest.update(b"splat" + splat if splat is not None else
                                b"array" + np.ascontiguousarray(value.array).tobytes())
        elif dataclasses.is_dataclass(value):
            self._text(type(value).__name__)
            for f in dataclasses.fields(value):
                self.attribute(getattr(value, f.name))
        elif isinstance(value, (tuple, list)):
            self._text(f"[{len(value)}")
            for item in value:
                self.attribute(item)
        elif isinstance(value, dict):
            self._text(f"{{{len(value)}")
            for key in sorted(value, key=str):
                self._text(str(key))
                self.attribute(value[key])
        else:  # str, int, float, bool, None, enums: repr tells them and their type apart
            self._text(f"{type(value).__name__} {value!r}")
