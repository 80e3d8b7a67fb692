// The native kernel registry of the cpu backend.
//
// A kernel is registered once per StableHLO op name with a *factory*. At compile time the
// lowering (pjrt/plugins/cpu/lowering.py) calls the factory with the op's OpSpec: its name,
// its attribute record (below) and the exact types of its operands and results.
// The factory checks what it supports (throwing Unsupported with a reason otherwise, so the
// op falls back to the interpreter) and returns a Step: a closure over everything it could
// precompute (strides, typed loops), which the executor calls with the operand arrays and
// fills the result arrays. Nothing here depends on Python: the bindings convert to OpSpec.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "array.h"

namespace openhlo::cpu {

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

// One field of an op's attribute record: pjrt/plugins/cpu/kernel_attrs.py encodes the
// attributes an op's kernel reads into a flat list by the op's schema; monostate is an
// absent optional field. (An empty Python list arrives as empty ints; int_rows accepts it.)
using AttrValue = std::variant<std::monostate, int64_t, bool, double, std::string,
                               std::vector<int64_t>, std::vector<std::vector<int64_t>>>;
using AttrRecord = std::vector<AttrValue>;

struct OpSpec {
  std::string name;      // "stablehlo.add"
  AttrRecord attrs;      // decoded by the op's struct in _generated/kernel_attrs.h
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

// Reads the fields of a record for the decoders in _generated/kernel_attrs.h. A record that
// does not fit its struct (a header not regenerated, a library not rebuilt) is a
// std::logic_error: a bug of the build, not an op the kernel cannot handle.
class AttrReader {
 public:
  AttrReader(const OpSpec& spec, const char* op, size_t fields);
  bool absent(size_t i) const { return std::holds_alternative<std::monostate>(record_[i]); }
  int64_t integer(size_t i, const char* member) const { return get<int64_t>(i, member); }
  bool boolean(size_t i, const char* member) const { return get<bool>(i, member); }
  double real(size_t i, const char* member) const { return get<double>(i, member); }
  const std::string& string(size_t i, const char* member) const {
    return get<std::string>(i, member);
  }
  const std::vector<int64_t>& ints(size_t i, const char* member) const {
    return get<std::vector<int64_t>>(i, member);
  }
  std::vector<std::vector<int64_t>> int_rows(size_t i, const char* member) const;

 private:
  template <typename T>
  const T& get(size_t i, const char* member) const {
    if (const T* value = std::get_if<T>(&record_[i])) return *value;
    mismatch(member);
  }
  [[noreturn]] void mismatch(const char* member) const;
  const AttrRecord& record_;
  const char* op_;
};

// Helpers for factories.
inline void require(bool condition, const std::string& reason) {
  if (!condition) throw Unsupported(reason);
}

// The low and high edge padding of `rank` dimensions from a [rank, 2] padding attribute
// (reduce_window, select_and_scatter, convolution); zeros where it is absent.
void split_padding(const std::optional<std::vector<std::vector<int64_t>>>& padding, size_t rank,
                   std::vector<int64_t>& low, std::vector<int64_t>& high);

}  // namespace openhlo::cpu
