#include "kernel.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <cstdlib>
#include <map>

namespace openhlo::cpu {

namespace {
std::map<std::string, KernelFactory>& registry() {
  static auto* r = new std::map<std::string, KernelFactory>();
  return *r;
}
}  // namespace

bool register_kernel(const std::string& name, KernelFactory factory) {
  auto [it, inserted] = registry().emplace(name, std::move(factory));
  if (!inserted) {
    std::fprintf(stderr, "openhlo cpu: native kernel %s registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

const KernelFactory* find_kernel(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

py::handle Attrs::item(const char* name) const {
  if (!has(name)) throw Unsupported(std::string("missing attribute ") + name);
  return dict_[name];
}

int64_t Attrs::get_int(const char* name) const { return item(name).cast<int64_t>(); }
int64_t Attrs::get_int(const char* name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
double Attrs::get_float(const char* name) const { return item(name).cast<double>(); }
bool Attrs::get_bool(const char* name, bool fallback) const {
  return has(name) ? item(name).cast<bool>() : fallback;
}
std::string Attrs::get_str(const char* name) const { return item(name).cast<std::string>(); }
std::string Attrs::get_str(const char* name, const std::string& fallback) const {
  return has(name) ? get_str(name) : fallback;
}
std::vector<int64_t> Attrs::get_ints(const char* name) const {
  return item(name).cast<std::vector<int64_t>>();
}
std::vector<int64_t> Attrs::get_ints(const char* name, std::vector<int64_t> fallback) const {
  return has(name) ? get_ints(name) : fallback;
}
Attrs Attrs::get_dict(const char* name) const {
  return Attrs(py::reinterpret_borrow<py::dict>(item(name)));
}

Array Attrs::get_array(const char* name, DType dtype) const {
  auto arr = py::array::ensure(item(name), py::array::c_style);
  if (!arr) throw Unsupported(std::string("attribute ") + name + " is not an array");
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Array out = allocate(dtype, shape);
  if (static_cast<size_t>(arr.nbytes()) != out.nbytes()) {
    throw Unsupported(std::string("attribute ") + name + " has the wrong element size");
  }
  std::memcpy(out.raw(), arr.data(), out.nbytes());
  return out;
}

}  // namespace openhlo::cpu
