#include "numpy_bridge.h"

#include <pybind11/stl.h>

#include <cstring>
#include <iterator>
#include <stdexcept>

namespace openhlo::cpu {

namespace {
constexpr int kNumDTypes = static_cast<int>(std::size(kDTypeInfo));
py::object* g_dtypes[kNumDTypes] = {};
}  // namespace

void set_numpy_dtypes(const py::dict& by_name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const char* name = dtype_name(static_cast<DType>(i));
    if (by_name.contains(name)) {
      // Leaked on purpose: dtype objects live for the process and must not be released
      // after the interpreter has finalized.
      delete g_dtypes[i];
      g_dtypes[i] = new py::object(by_name[name]);
    }
  }
}

py::dtype numpy_dtype(DType dtype) {
  py::object* d = g_dtypes[static_cast<int>(dtype)];
  if (d == nullptr) throw std::runtime_error(std::string("no numpy dtype for ") + dtype_name(dtype));
  return py::reinterpret_borrow<py::dtype>(*d);
}

Array array_from_numpy(const py::handle& handle, DType dtype) {
  auto arr = py::array::ensure(handle, py::array::c_style);
  if (!arr) throw std::invalid_argument("expected an array");
  if (static_cast<size_t>(arr.itemsize()) != dtype_size(dtype)) {
    throw std::invalid_argument(std::string("element size does not match ") + dtype_name(dtype));
  }
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Array out = allocate(dtype, shape);
  std::memcpy(out.raw(), arr.data(), out.nbytes());
  return out;
}

py::array array_to_numpy(const Array& array) {
  auto* keep = new StorageRef(array.storage);
  py::capsule owner(keep, [](void* p) { delete static_cast<StorageRef*>(p); });
  std::vector<py::ssize_t> shape(array.shape.begin(), array.shape.end());
  return py::array(numpy_dtype(array.dtype), shape, {}, array.raw(), owner);
}

AttrRecord record_from_python(const py::list& record) {
  AttrRecord out;
  for (const py::handle& item : record) {
    if (item.is_none()) {
      out.emplace_back(std::monostate{});
    } else if (py::isinstance<py::bool_>(item)) {  // before int: bool is an int in Python
      out.emplace_back(item.cast<bool>());
    } else if (py::isinstance<py::int_>(item)) {
      out.emplace_back(item.cast<int64_t>());
    } else if (py::isinstance<py::float_>(item)) {
      out.emplace_back(item.cast<double>());
    } else if (py::isinstance<py::str>(item)) {
      out.emplace_back(item.cast<std::string>());
    } else if (py::isinstance<py::list>(item) && py::len(item) > 0 &&
               py::isinstance<py::list>(item.cast<py::list>()[0])) {
      out.emplace_back(item.cast<std::vector<std::vector<int64_t>>>());
    } else if (py::isinstance<py::list>(item)) {
      out.emplace_back(item.cast<std::vector<int64_t>>());
    } else {
      throw py::type_error("an attribute record field is " +
                           py::repr(item).cast<std::string>());
    }
  }
  return out;
}

}  // namespace openhlo::cpu
