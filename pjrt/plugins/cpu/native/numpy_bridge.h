// Conversions between Python values and native ones (GIL held): numpy arrays and Arrays,
// attribute records (kernel_attrs.py) and AttrRecords.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "array.h"
#include "kernel.h"

namespace openhlo::cpu {

namespace py = pybind11;

// Python gives the numpy dtype of every element type once, at import (ml_dtypes for bf16...).
void set_numpy_dtypes(const py::dict& by_name);
py::dtype numpy_dtype(DType dtype);

// A copy of `array` (any numpy array of the right element size and shape) as an Array.
Array array_from_numpy(const py::handle& array, DType dtype);
// A numpy array that shares the Array's storage (kept alive by a capsule).
py::array array_to_numpy(const Array& array);

// A record from kernel_attrs.encode: None, bool, int, str, a list of ints or a list of int
// lists per field. Anything else is a TypeError (encode produces none).
AttrRecord record_from_python(const py::list& record);

}  // namespace openhlo::cpu
