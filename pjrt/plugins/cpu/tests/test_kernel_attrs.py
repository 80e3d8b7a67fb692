"""The typed attribute boundary of the native kernels (kernel_attrs.py, native/kernel.h).

The generated headers must be current, the built library must decode the schemas' fields in
the schemas' order, the kernels must build without Python, and the encoder must turn an
op's attributes into exactly the record its schema says (defaults, absent optional fields,
and errors naming the op and the attribute).
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

import numpy as np
import pytest

from pjrt.plugins.cpu.codegen import headers
from pjrt.plugins.cpu.kernel_attrs import SCHEMAS, encode
from pjrt.plugins.cpu.native_module import NATIVE_DTYPES, RAW_STORAGE, native
from pjrt.plugins.cpu.tests.kernel_check import run_kernel
from stablehlo.errors import VerificationError

NATIVE = os.path.join(os.path.dirname(headers.__file__), "..", "native")


@pytest.mark.parametrize("name", sorted(headers.HEADERS))
def test_generated_header_is_current(name):
    with open(os.path.join(headers.GENERATED, name)) as f:
        assert f.read() == headers.HEADERS[name](), (
            f"native/_generated/{name} is stale: run python -m pjrt.plugins.cpu.codegen.headers"
            " and rebuild the native library")


def test_built_library_decodes_the_python_schemas():
    compiled = native().kernel_attr_schemas()
    assert compiled == {op: [f.member for f in s.fields] for op, s in SCHEMAS.items()}, (
        "the built library's attribute structs differ from kernel_attrs.py: regenerate the "
        "headers and rebuild")


def test_every_schema_belongs_to_a_native_kernel():
    assert set(SCHEMAS) <= set(native().kernel_names())


def test_dtype_table_follows_the_python_element_facts():
    from stablehlo.ir.types import ELEMENT_TYPES
    text = headers.dtypes_header()
    for ident, name in NATIVE_DTYPES:
        size = int(name[1:]) // 8 if name in RAW_STORAGE else \
            ELEMENT_TYPES[name].numpy_dtype.itemsize
        assert f'{{"{name}", {size}}}' in text
    # The enum's order is the table's: element i of kDTypeInfo describes DType i.
    idents = [ident for ident, _ in NATIVE_DTYPES]
    assert f"enum class DType : uint8_t {{ {', '.join(idents)} }};" in text


def test_kernels_build_without_python():
    """kernel.h and the kernel translation units include no pybind11 or Python header: they
    compile with only the native folder and the BLAS headers on the include path."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++")
    openblas = pytest.importorskip("scipy_openblas32")
    probe = subprocess.run([compiler, "-fsyntax-only", "-x", "c++", "-"],
                           input="#include <pybind11/pybind11.h>\n", capture_output=True,
                           text=True)
    if probe.returncode == 0:
        pytest.skip("pybind11 is on the compiler's default include path")
    units = sorted(glob.glob(os.path.join(NATIVE, "kernels_*.cc"))) + [
        os.path.join(NATIVE, name) for name in ("kernel.cc", "collectives.cc", "rendezvous.cc", "array.cc")]
    result = subprocess.run(
        [compiler, "-std=c++17", "-fsyntax-only", "-I", NATIVE,
         "-I", openblas.get_include_dir(), *units], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


# -- encode


def test_encode_follows_the_schema_order_with_defaults():
    attrs = {"dimension_numbers": {"offset_dims": [1], "collapsed_slice_dims": [0],
                                   "start_index_map": [0], "index_vector_dim": 1},
             "slice_sizes": np.array([1, 3])}
    assert encode("stablehlo.gather", "here", attrs) == [[1], [0], [], [], [0], 1, [1, 3]]


def test_encode_absent_optional_fields_and_region_paths():
    record = encode("stablehlo.reduce_window", "here",
                    {"combiner": "stablehlo.add", "window_dimensions": [2, 2],
                     "padding": np.array([[0, 1], [1, 0]], np.int64)})
    assert record == ["stablehlo.add", [], [2, 2], None, None, None, [[0, 1], [1, 0]]]
    assert encode("stablehlo.sort", "here", {"comparator": ["LT", None]}) == [-1, "LT", ""]
    assert encode("stablehlo.sort", "here", {}) == [-1, None, ""]


def test_encode_turns_bool_arrays_into_ints_and_presence_into_bools():
    conv = encode("stablehlo.convolution", "here", {
        "dimension_numbers": {"input_batch_dimension": 0, "input_feature_dimension": 3,
                              "input_spatial_dimensions": [1, 2],
                              "kernel_input_feature_dimension": 2,
                              "kernel_output_feature_dimension": 3,
                              "kernel_spatial_dimensions": [0, 1], "output_batch_dimension": 0,
                              "output_feature_dimension": 3,
                              "output_spatial_dimensions": [1, 2]},
        "window_reversal": [True, False]})
    assert conv[12] == [1, 0] and conv[-2:] == [1, 1]
    dims = {"dot_dimension_numbers": {}}
    assert encode("stablehlo.dot_general", "here", dims)[-1] is False
    assert encode("stablehlo.dot_general", "here", {**dims, "algorithm": "x"})[-1] is True


def test_encode_of_an_op_without_schema_is_empty():
    assert encode("stablehlo.add", "here", {"anything": 1}) == []


def test_missing_attribute_is_unsupported_naming_op_and_attribute():
    with pytest.raises(native().Unsupported,
                       match=r"^at here: stablehlo.iota has no attribute iota_dimension$"):
        encode("stablehlo.iota", "at here", {})


def test_ill_kinded_attribute_is_a_verification_error():
    with pytest.raises(VerificationError, match="here: attribute dimension_numbers.offset_dims"
                                                " of stablehlo.gather is 'x', not a list"):
        encode("stablehlo.gather", "here", {"dimension_numbers": {"offset_dims": "x"}})
    with pytest.raises(VerificationError, match="iota_dimension .* is True, not an integer"):
        encode("stablehlo.iota", "here", {"iota_dimension": True})


def test_kernel_reads_the_record_it_is_given():
    # slice with explicit strides against the default (all ones)
    x = np.arange(10, dtype=np.float32)
    attrs = {"start_indices": [1], "limit_indices": [9]}
    strided, = run_kernel("stablehlo.slice", {**attrs, "strides": [3]}, [("f32", [10])],
                          [("f32", [3])], [x])
    np.testing.assert_array_equal(strided, x[1:9:3])
    dense, = run_kernel("stablehlo.slice", attrs, [("f32", [10])], [("f32", [8])], [x])
    np.testing.assert_array_equal(dense, x[1:9])


def test_a_record_of_the_wrong_shape_is_a_build_error_not_a_fallback():
    with pytest.raises(RuntimeError, match="regenerate native/_generated and rebuild"):
        native().run_kernel("stablehlo.iota", [], [], [("f32", [3])], [])
    with pytest.raises(RuntimeError, match="iota_dimension has the wrong kind"):
        native().run_kernel("stablehlo.iota", ["0"], [], [("f32", [3])], [])
