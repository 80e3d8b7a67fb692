// The native kernel registry of the cpu backend.
//
// A kernel is registered once per StableHLO op name with a *factory*. At compile time the
// lowering (pjrt/plugins/cpu/lowering.py) calls the factory with the op's OpSpec: its name,
// its attributes as plain Python values, and the exact types of its operands and results.
// The factory checks what it supports (throwing Unsupported with a reason otherwise, so the
// op falls back to the interpreter) and returns a Step: a closure over everything it could
// precompute (strides, typed loops), which the executor calls with the operand arrays and
// fills the result arrays. Steps run without the GIL and must not touch Python objects.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "array.h"

namespace openhlo::cpu {

namespace py = pybind11;

// A kernel cannot handle this op (element type, attribute, region shape...): the lowering
// falls back to the interpreter for it and logs the reason.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A run-time failure of a step (e.g. an out-of-range index that the spec makes an error).
struct ExecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorSpec {
  DType dtype;
  Shape shape;
};

// Attribute access for factories (compile time, GIL held). Values are what
// pjrt/plugins/cpu/lowering.py:plain_attrs produces: int, float, bool, str, list of ints,
// dict for structured attributes, numpy arrays for dense constants.
class Attrs {
 public:
  explicit Attrs(py::dict dict) : dict_(std::move(dict)) {}
  bool has(const char* name) const { return dict_.contains(name) && !dict_[name].is_none(); }
  int64_t get_int(const char* name) const;
  int64_t get_int(const char* name, int64_t fallback) const;
  double get_float(const char* name) const;
  bool get_bool(const char* name, bool fallback = false) const;
  std::string get_str(const char* name) const;
  std::string get_str(const char* name, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const char* name) const;
  std::vector<int64_t> get_ints(const char* name, std::vector<int64_t> fallback) const;
  // A nested dict (e.g. dot_dimension_numbers) as Attrs.
  Attrs get_dict(const char* name) const;
  // A dense constant: a copy of the numpy array under `name` as an Array of `dtype`.
  Array get_array(const char* name, DType dtype) const;
  py::dict dict() const { return dict_; }

 private:
  py::handle item(const char* name) const;
  py::dict dict_;
};

struct OpSpec {
  std::string name;      // "stablehlo.add"
  Attrs attrs;
  std::vector<TensorSpec> operands;
  std::vector<TensorSpec> results;
};

class Rendezvous;  // collectives.h

// Per-execution context visible to steps (which replica/partition is running).
struct ExecContext {
  int64_t replica_id = 0;
  int64_t partition_id = 0;
  int64_t device_ordinal = 0;
  // The grid of the execution this instance belongs to, and where its instances meet in
  // collectives (shared by all of them; nullptr when the execution runs one instance).
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  Rendezvous* rendezvous = nullptr;
};

// Called with operands[0..n) and results[0..m) (undefined Arrays to be filled: allocate
// them with the result specs' types).
using Step = std::function<void(ExecContext& ctx, const Array* operands, Array* results)>;
using KernelFactory = std::function<Step(const OpSpec& spec)>;

// Registers `factory` for op `name`; a second registration of a name aborts at load time.
bool register_kernel(const std::string& name, KernelFactory factory);
// The factory for `name`, or nullptr.
const KernelFactory* find_kernel(const std::string& name);
std::vector<std::string> kernel_names();

// Register at static-initialization time, once per translation unit and op:
//   OPENHLO_KERNEL(stablehlo_add, "stablehlo.add", make_add_step);
#define OPENHLO_KERNEL(ident, name, factory) \
  static const bool openhlo_kernel_registered_##ident = \
      ::openhlo::cpu::register_kernel(name, factory)

// Helpers for factories.
inline void require(bool condition, const std::string& reason) {
  if (!condition) throw Unsupported(reason);
}

}  // namespace openhlo::cpu
