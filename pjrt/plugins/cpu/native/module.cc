// pybind11 bindings of the cpu backend: `pjrt.plugins.cpu._native`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "_generated/kernel_attrs.h"
#include "array.h"
#include "executor.h"
#include "runtime.h"
#include "kernel.h"
#include "numpy_bridge.h"
#include "process_group.h"
#include "profiler.h"
#include "thread_pool.h"

namespace py = pybind11;
using namespace openhlo::cpu;

namespace openhlo::cpu {
// `_native.HAVE_GLOO` and `_native.ProcessGroups(...)` (process_group.cc); declared here, not
// in process_group.h, which the pybind11-free collectives include.
void bind_process_groups(py::module_& m);
// `_native.lowp` (lowp_bindings.cc): the low-precision GEMMs for tests and benchmarks.
void bind_lowp(py::module_& parent);
}  // namespace openhlo::cpu

namespace {

std::vector<TensorSpec> specs_from_python(const py::list& types) {
  std::vector<TensorSpec> specs;
  for (auto item : types) {
    auto pair = item.cast<py::tuple>();
    specs.push_back({dtype_from_name(pair[0].cast<std::string>()),
                     pair[1].cast<std::vector<int64_t>>()});
  }
  return specs;
}

// Compiles one op with its native kernel and runs it once: the unit-test entry point of the
// kernels (the executor uses the same factories).
py::list run_kernel(const std::string& name, py::list record, py::list operand_types,
                    py::list result_types, py::list inputs) {
  const KernelFactory* factory = find_kernel(name);
  if (factory == nullptr) throw Unsupported("no native kernel for " + name);
  OpSpec spec{name, record_from_python(record), specs_from_python(operand_types),
              specs_from_python(result_types)};
  Step step = (*factory)(spec);
  std::vector<Array> operands;
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    operands.push_back(array_from_numpy(inputs[i], spec.operands[i].dtype));
  }
  std::vector<Array> results(spec.results.size());
  {
    py::gil_scoped_release release;
    ExecContext ctx;
    step(ctx, operands.data(), results.data());
  }
  py::list out;
  for (const Array& r : results) out.append(array_to_numpy(r));
  return out;
}

// Each op's attribute struct as compiled: {op: [member, ...]} in record order.
py::dict kernel_attr_schemas() {
  py::dict out;
  for (const AttrSchemaInfo& info : kAttrSchemas) {
    out[py::str(info.op)] = py::str(info.members).attr("split")();
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native runtime of the OpenHLO cpu backend (see pjrt/plugins/cpu/README.md).";
  py::register_exception<Unsupported>(m, "Unsupported");
  py::register_exception<ExecError>(m, "ExecError");
  m.def("set_numpy_dtypes", &set_numpy_dtypes);
  m.def("kernel_names", &kernel_names);
  m.def("run_kernel", &run_kernel, py::arg("name"), py::arg("record"), py::arg("operand_types"),
        py::arg("result_types"), py::arg("inputs"));
  m.def("kernel_attr_schemas", &kernel_attr_schemas);
  m.def("live_storage_count", &live_storage_count);
  m.def("live_storage_bytes", &live_storage_bytes);
  m.def("peak_storage_bytes", &peak_storage_bytes);
  m.def("reset_peak_storage_bytes", &reset_peak_storage_bytes);
  m.def("parallel_width", &parallel_width);
  m.def("set_profiling", &set_profiling, py::arg("on"), py::arg("timeline") = false);
  m.def("profile_snapshot", &profile_snapshot);
  m.def("profile_timeline", &profile_timeline);
  m.def("profile_reset", &profile_reset);
  m.def("prepare_exit", [] {
    // From an atexit hook, before finalization: queued executions finish (their fallbacks
    // may still take the GIL, released here), then native threads stop taking it for good
    // (see executor.h).
    bool idle;
    {
      py::gil_scoped_release release;
      idle = wait_until_idle(60.0);
    }
    mark_python_exiting();
    return idle;
  });
  bind_executor(m);
  bind_runtime(m);
  bind_process_groups(m);
  bind_lowp(m);
}
