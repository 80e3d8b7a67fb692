"""Our verifier against upstream MLIR on mutated conformance programs.

Each case parses a conformance program, perturbs one thing (an integer in an
op's attribute, or one dimension / the element type of an op result, which
changes the producer and all its users), prints it, and asks both verifiers.
They must agree, except where jaxlib's bundled StableHLO 1.17 is known to be
more lenient than the spec (listed below): then we must be the one rejecting.
The seed is fixed, so a failure reproduces.
"""
from __future__ import annotations

import pathlib
import random

import pytest

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import DenseArrayAttr, DenseElementsAttr, IntegerAttr, StructAttr
from stablehlo.ir.types import F32, F64, I1, I32, BF16, TensorType
from stablehlo.verify import verify_module

pytest.importorskip("jaxlib")
from stablehlo.tests.mlir_oracle import mlir_verify  # noqa: E402

TESTDATA = pathlib.Path("/work/shared/conformance/stablehlo/testdata")

# Spec constraints that MLIR 1.17 does not check (we reject, it accepts).
MLIR_LENIENT = (
    "lhs and rhs must have the same element type",  # dot_general C13
)
_SKIP_OPS = ("stablehlo.constant", "stablehlo.custom_call", "func.func", "func.call",
             "builtin.module")


def _programs() -> list:
    if not TESTDATA.exists():
        pytest.skip("no conformance data")
    return [p for p in sorted(TESTDATA.glob("*.mlir")) if "RUN-DISABLED" not in p.read_text()]


def _bump_attribute(rng: random.Random, op, name: str) -> bool:
    attr = op.attributes[name]
    step = rng.choice([-1, 1, 2])
    if isinstance(attr, DenseArrayAttr) and attr.values and not isinstance(attr.values[0], bool):
        values = list(attr.values)
        values[rng.randrange(len(values))] += step
        op.attributes[name] = DenseArrayAttr(attr.element_type, tuple(values))
    elif isinstance(attr, IntegerAttr) and not isinstance(attr.value, bool):
        op.attributes[name] = IntegerAttr(attr.value + step, attr.type)
    elif isinstance(attr, DenseElementsAttr) and attr.array.dtype.kind == "i" and attr.array.size:
        array = attr.array.copy()
        array.reshape(-1)[rng.randrange(array.size)] += step
        op.attributes[name] = DenseElementsAttr(attr.type, array)
    elif isinstance(attr, StructAttr):
        fields = list(attr.fields)
        numeric = [i for i, (_, v) in enumerate(fields)
                   if (isinstance(v, tuple) and v) or (type(v) is int)]
        if not numeric:
            return False
        i = rng.choice(numeric)
        key, value = fields[i]
        if isinstance(value, tuple):
            value = list(value)
            value[rng.randrange(len(value))] += step
            value = tuple(value)
        else:
            value += step
        fields[i] = (key, value)
        op.attributes[name] = StructAttr(attr.kind, tuple(fields), attr.dialect)
    else:
        return False
    return True


def _mutate_attribute(rng, module) -> bool:
    sites = [(op, name) for op in module.walk() if op.name not in _SKIP_OPS
             and op.dialect in ("stablehlo", "chlo") for name in op.attributes]
    return bool(sites) and _bump_attribute(rng, *rng.choice(sites))


def _mutate_result_type(rng, module) -> bool:
    sites = [r for op in module.walk() if op.name not in _SKIP_OPS for r in op.results
             if isinstance(r.type, TensorType) and r.type.rank and r.type.is_static]
    if not sites:
        return False
    value = rng.choice(sites)
    t = value.type
    if rng.random() < 0.7:
        shape = list(t.shape)
        i = rng.randrange(len(shape))
        shape[i] = max(0, shape[i] + rng.choice([-1, 1]))
        value.type = t.with_shape(shape)
    else:
        value.type = t.with_element_type(rng.choice([e for e in (F32, F64, I32, I1, BF16)
                                                     if e != t.element_type]))
    return value.type != t


def _verdicts(module) -> tuple:
    text = str(module)
    try:
        verify_module(module)
        ours = None
    except VerificationError as exc:
        ours = str(exc)
    return ours, mlir_verify(text)


@pytest.mark.slow
@pytest.mark.parametrize("kind,seed", [("attribute", 11), ("result_type", 12)])
def test_mutated_programs_agree_with_mlir(kind, seed):
    from stablehlo.text.parser import parse_module
    rng = random.Random(seed)
    programs = _programs()
    mutate = _mutate_attribute if kind == "attribute" else _mutate_result_type
    done, rejected, disagreements = 0, 0, []
    while done < 120:
        path = rng.choice(programs)
        module = parse_module(path.read_text(), path.name)
        if not mutate(rng, module):
            continue
        ours, theirs = _verdicts(module)
        done += 1
        rejected += ours is not None
        if (ours is None) != (theirs is None):
            if ours is not None and any(reason in ours for reason in MLIR_LENIENT):
                continue
            disagreements.append(f"{path.name}: ours={ours} | mlir={theirs and theirs[:300]}")
    assert not disagreements, "\n".join(disagreements)
    assert rejected > 30  # the mutations really do break programs
