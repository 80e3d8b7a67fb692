// Python bindings of the executor: building Programs (from lowering.py) and running them
// synchronously (the numpy fast path).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "executor.h"
#include "ffi_call.h"
#include "generated_env.h"
#include "numpy_bridge.h"

namespace openhlo::cpu {

namespace {

// An argument that is not exactly the array the executable expects (dtype, shape, layout):
// Python then checks and converts it with the contract's clear errors.
struct ArgumentMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TensorSpec spec_from_python(const py::handle& item) {
  auto pair = item.cast<py::tuple>();
  return {dtype_from_name(pair[0].cast<std::string>()), pair[1].cast<std::vector<int64_t>>()};
}

// A type from the lowering: ("f32", [2, 3]) for a tensor, None for a token.
void add_type(const py::handle& item, std::vector<TensorSpec>& specs, std::vector<bool>& tokens) {
  if (item.is_none()) {
    specs.push_back({DType::PRED, {}});
    tokens.push_back(true);
  } else {
    specs.push_back(spec_from_python(item));
    tokens.push_back(false);
  }
}

using ProgramPtr = std::shared_ptr<Program>;

Instr& add(Program& p, InstrKind kind, std::string where, std::vector<int32_t> in,
           std::vector<int32_t> out) {
  Instr instr;
  instr.kind = kind;
  instr.where = std::move(where);
  instr.in = std::move(in);
  instr.out = std::move(out);
  set_release(instr, {});
  p.instrs.push_back(std::move(instr));
  return p.instrs.back();
}

// A loop lends its carried values to the condition's parameters for the condition's run and
// takes them back (executor.cc run_while), so the condition must never release a parameter:
// its last use would otherwise move the value out of its slot, where a kernel could even take
// its storage over. Called once the condition's release lists are set.
void lend_params(Program& cond) {
  for (Instr& instr : cond.instrs) {
    auto lent = [&](int32_t s) {
      return std::find(cond.params.begin(), cond.params.end(), s) != cond.params.end();
    };
    std::vector<int32_t> kept = instr.release;
    kept.erase(std::remove_if(kept.begin(), kept.end(), lent), kept.end());
    set_release(instr, std::move(kept));
  }
}

std::vector<std::shared_ptr<const Program>> const_programs(const std::vector<ProgramPtr>& programs) {
  return {programs.begin(), programs.end()};
}

// An exact-match argument as the executor's array: C-contiguous, aligned memory is borrowed
// (kernels never write into borrowed storage; run_sync holds the array for the call),
// anything else is copied.
Array argument_array(const py::array& arr, DType dtype) {
  constexpr int kBorrowable = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                              py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((arr.flags() & kBorrowable) != kBorrowable) return array_from_numpy(arr, dtype);
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  const size_t nbytes = num_bytes(dtype, shape);
  return Array{dtype, std::move(shape), borrow_storage(const_cast<void*>(arr.data()), nbytes)};
}

// The numpy fast path: exact-match arguments are borrowed, the program runs on the calling
// thread without the GIL, and results come back as numpy arrays sharing the result memory
// (each result's storage is the caller's alone: Note [Results own their storage]).
py::list run_sync(const std::shared_ptr<const Executable>& exe, const py::sequence& args,
                  py::object host_state, int64_t replica_id, int64_t partition_id) {
  const size_t n = exe->param_specs.size();
  if (static_cast<size_t>(py::len(args)) != n) throw ArgumentMismatch("argument count");
  std::vector<Array> arrays(n);
  // The arguments whose memory is borrowed stay alive while the GIL is released, even if the
  // caller's sequence changes meanwhile.
  std::vector<py::object> held;
  held.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    py::object item = args[i];
    if (exe->param_is_token[i]) {  // a token carries no data: the executor's empty Array
      if (!is_token_object(item)) throw ArgumentMismatch("token argument");
      held.push_back(std::move(item));
      continue;
    }
    if (!py::isinstance<py::array>(item)) throw ArgumentMismatch("not an array");
    auto arr = py::reinterpret_borrow<py::array>(item);
    const TensorSpec& spec = exe->param_specs[i];
    if (!arr.dtype().is(numpy_dtype(spec.dtype)) && !arr.dtype().equal(numpy_dtype(spec.dtype))) {
      throw ArgumentMismatch("dtype");
    }
    if (static_cast<size_t>(arr.ndim()) != spec.shape.size()) throw ArgumentMismatch("rank");
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      if (arr.shape(d) != spec.shape[d]) throw ArgumentMismatch("shape");
    }
    arrays[i] = argument_array(arr, spec.dtype);
    held.push_back(std::move(item));
  }
  std::vector<Array> results;
  {
    SharedPyObject state(std::move(host_state));
    py::gil_scoped_release release;
    ExecContext ctx;
    ctx.replica_id = replica_id;
    ctx.partition_id = partition_id;
    results = run_executable(*exe, std::move(arrays), ctx, state);
  }
  py::list out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (exe->result_is_token[i]) {  // the token object a token parameter takes back
      out.append(py::module_::import("stablehlo.interpreter.values").attr("TOKEN"));
    } else {
      out.append(array_to_numpy(results[i]));
    }
  }
  return out;
}

// ---- the C entry for the PJRT plugin library (pjrt/c_api) ----------------------------------
// The plugin runs an executable on raw host pointers through these two functions, without
// Python and without the GIL; their addresses reach it as integers (Executable.c_entry), so
// neither library links the other. Only programs that never call back into Python qualify.

// The step of native kernel `name` for these attributes and types (Unsupported when there
// is none); `result_specs`, when given, receives the result types.
Step kernel_step(const std::string& name, py::list record, py::list operand_types,
                 py::list result_types, std::vector<TensorSpec>* result_specs) {
  const KernelFactory* factory = find_kernel(name);
  if (factory == nullptr) throw Unsupported("no native kernel");
  OpSpec spec{name, record_from_python(record), {}, {}};
  for (auto t : operand_types) spec.operands.push_back(spec_from_python(t));
  for (auto t : result_types) spec.results.push_back(spec_from_python(t));
  Step step;
  try {
    step = (*factory)(spec);
  } catch (Unsupported&) {
    throw;
  } catch (std::exception& e) {  // e.g. dispatch_real on a type without arithmetic
    throw Unsupported(e.what());
  }
  if (result_specs != nullptr) *result_specs = std::move(spec.results);
  return step;
}

bool runs_without_python(const Program& program) {
  for (const Instr& instr : program.instrs) {
    if (instr.kind == InstrKind::CALLBACK || instr.kind == InstrKind::RUN_PARALLEL) return false;
    for (const auto& region : instr.regions)
      if (!runs_without_python(*region)) return false;
  }
  return true;
}

// Status codes as PJRT_Error_Code: 0 ok, 3 invalid argument, 13 internal.
// Zero-copy both ways: arguments are borrowed (the caller's memory, never written: in-place
// kernels take over owned storage only), and results are handed over as they are, each with
// an owner the caller frees with c_free_result once done with the memory. A result that is an
// argument, a constant or returned twice is a copy (Note [Results own their storage]), since
// the caller may free or donate either one first.
int c_run(void* ctx, int64_t num_args, void* const* inputs, void** results, void** owners,
          char* message, size_t message_size) {
  const Executable& exe = **static_cast<const std::shared_ptr<const Executable>*>(ctx);
  auto fail = [&](int code, const std::string& text) {
    std::snprintf(message, message_size, "%s", text.c_str());
    return code;
  };
  if (static_cast<size_t>(num_args) != exe.param_specs.size())
    return fail(3, exe.name + " takes " + std::to_string(exe.param_specs.size()) +
                       " argument(s), got " + std::to_string(num_args));
  try {
    std::vector<Array> args(exe.param_specs.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const TensorSpec& spec = exe.param_specs[i];
      size_t nbytes = num_bytes(spec.dtype, spec.shape);
      args[i] = Array{spec.dtype, spec.shape, borrow_storage(inputs[i], nbytes)};
    }
    std::vector<Array> out = run_executable(exe, std::move(args), ExecContext{},
                                            SharedPyObject());
    std::vector<std::unique_ptr<Array>> handed(out.size());
    for (size_t j = 0; j < out.size(); ++j) handed[j] = std::make_unique<Array>(std::move(out[j]));
    for (size_t j = 0; j < handed.size(); ++j) {
      results[j] = handed[j]->raw();
      owners[j] = handed[j].release();
    }
    return 0;
  } catch (const ExecError& e) {  // worded as the Python path reports it (ExecutionError)
    return fail(13, std::string("ExecutionError: ") + e.what());
  } catch (const std::exception& e) {
    return fail(13, exe.name + ": " + e.what());
  }
}

void c_free_result(void* owner) { delete static_cast<Array*>(owner); }

void c_release(void* ctx) { delete static_cast<std::shared_ptr<const Executable>*>(ctx); }

}  // namespace

void bind_executor(py::module_& m) {
  py::register_exception<ArgumentMismatch>(m, "ArgumentMismatch");
  m.def("set_token_object", &set_token_object);

  py::class_<Program, ProgramPtr>(m, "Program")
      .def(py::init([](std::vector<int32_t> params) {
        auto p = std::make_shared<Program>();
        p->params = std::move(params);
        return p;
      }), py::arg("params"))
      .def_readwrite("results", &Program::results)
      .def_property_readonly("num_instructions", [](const Program& p) { return p.instrs.size(); })
      .def("add_kernel", [](Program& p, std::string where, std::string name, py::list record,
                            py::list operand_types, py::list result_types,
                            std::vector<int32_t> in, std::vector<int32_t> out) {
        // on Unsupported nothing is added
        Step step = kernel_step(name, record, operand_types, result_types, nullptr);
        add(p, InstrKind::KERNEL, std::move(where), std::move(in), std::move(out)).step =
            std::move(step);
      })
      .def("add_generated", [](Program& p, std::string where, const std::string& library,
                               const std::string& symbol, py::list result_types,
                               std::vector<int32_t> in, std::vector<int32_t> out,
                               std::vector<std::pair<int, int>> inplace) {
        // A fusion kernel generated at compile time (codegen/), see generated_env.h.
        std::vector<TensorSpec> specs;
        for (auto t : result_types) specs.push_back(spec_from_python(t));
        Step step = make_generated_step(library, symbol, std::move(specs), std::move(inplace),
                                        in.size());
        add(p, InstrKind::KERNEL, std::move(where), std::move(in), std::move(out)).step =
            std::move(step);
      })
      .def("add_ffi_call", [](Program& p, std::string where, const std::string& target,
                              uintptr_t handler, py::list operand_types, py::list result_types,
                              py::list attrs, std::vector<int32_t> in, std::vector<int32_t> out) {
        // A custom kernel's XLA FFI handler (ffi_call.h); attrs: (name, kind, dtype, bytes).
        std::vector<TensorSpec> operands, results;
        for (auto t : operand_types) operands.push_back(spec_from_python(t));
        for (auto t : result_types) results.push_back(spec_from_python(t));
        std::vector<FfiAttr> decoded;
        for (auto item : attrs) {
          auto t = item.cast<py::tuple>();
          decoded.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(),
                             t[2].cast<std::string>(), t[3].cast<std::string>()});
        }
        Step step = make_ffi_call_step(target, handler, std::move(operands), std::move(results),
                                       std::move(decoded));
        add(p, InstrKind::KERNEL, std::move(where), std::move(in), std::move(out)).step =
            std::move(step);
      })
      .def("add_alias", [](Program& p, std::string where, std::vector<int32_t> in,
                           std::vector<int32_t> out) {
        add(p, InstrKind::ALIAS, std::move(where), std::move(in), std::move(out));
      })
      .def("add_while", [](Program& p, std::string where, ProgramPtr cond, ProgramPtr body,
                           std::vector<int32_t> in, std::vector<int32_t> out) {
        lend_params(*cond);
        add(p, InstrKind::WHILE, std::move(where), std::move(in), std::move(out)).regions =
            const_programs({cond, body});
      })
      .def("add_if", [](Program& p, std::string where, std::vector<ProgramPtr> branches,
                        std::vector<int32_t> in, std::vector<int32_t> out) {
        add(p, InstrKind::IF, std::move(where), std::move(in), std::move(out)).regions =
            const_programs(branches);
      })
      .def("add_case", [](Program& p, std::string where, std::vector<ProgramPtr> branches,
                          std::vector<int32_t> in, std::vector<int32_t> out) {
        add(p, InstrKind::CASE, std::move(where), std::move(in), std::move(out)).regions =
            const_programs(branches);
      })
      .def("add_callback", [](Program& p, std::string where, py::object fn,
                              std::vector<int32_t> in, std::vector<int32_t> out,
                              py::list result_types) {
        Instr& instr = add(p, InstrKind::CALLBACK, std::move(where), std::move(in), std::move(out));
        instr.callback = SharedPyObject(std::move(fn));
        for (auto t : result_types) add_type(t, instr.out_specs, instr.out_is_token);
      })
      .def("add_replica_id", [](Program& p, std::string where, int32_t out) {
        add(p, InstrKind::REPLICA_ID, std::move(where), {}, {out});
      })
      .def("add_partition_id", [](Program& p, std::string where, int32_t out) {
        add(p, InstrKind::PARTITION_ID, std::move(where), {}, {out});
      })
      .def("add_token", [](Program& p, std::string where, int32_t out) {
        add(p, InstrKind::TOKEN, std::move(where), {}, {out});
      })
      .def("add_run_parallel", [](Program& p, std::string where,
                                  std::vector<std::shared_ptr<const Executable>> executables,
                                  int64_t num_partitions, py::object make_host_states,
                                  std::vector<int32_t> in, std::vector<int32_t> out) {
        Instr& instr = add(p, InstrKind::RUN_PARALLEL, std::move(where), std::move(in),
                           std::move(out));
        instr.parallel = std::move(executables);
        instr.num_partitions = num_partitions;
        instr.make_host_states = SharedPyObject(std::move(make_host_states));
      })
      .def("add_async_start", [](Program& p, std::string where, std::string name,
                                 py::list record, py::list operand_types,
                                 py::list result_types, std::vector<int32_t> in,
                                 int32_t handle) {
        // The collective's kernel, as add_kernel builds it, run by the frame's
        // communication thread (async_comm.h); its results wait there for the done.
        std::vector<TensorSpec> results;
        Step step = kernel_step(name, record, operand_types, result_types, &results);
        Instr& instr = add(p, InstrKind::ASYNC_START, std::move(where), std::move(in), {handle});
        instr.step = std::move(step);
        instr.out_specs = std::move(results);
      })
      .def("add_async_done", [](Program& p, std::string where, int32_t handle,
                                std::vector<int32_t> out) {
        add(p, InstrKind::ASYNC_DONE, std::move(where), {handle}, std::move(out));
      })
      .def("set_communicates", [](Program& p, size_t index) {
        p.instrs.at(index).communicates = true;
      })
      .def("set_release", [](Program& p, size_t index, std::vector<int32_t> slots) {
        set_release(p.instrs.at(index), std::move(slots));
      });

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable")
      .def(py::init([](std::string name, int32_t num_slots, ProgramPtr main, py::list params,
                       py::list results, py::list constants) {
        auto exe = std::make_shared<Executable>();
        exe->name = std::move(name);
        exe->num_slots = num_slots;
        exe->main = main;
        for (auto t : params) add_type(t, exe->param_specs, exe->param_is_token);
        for (auto t : results) add_type(t, exe->result_specs, exe->result_is_token);
        for (auto item : constants) {  // (slot, array, element type name)
          auto c = item.cast<py::tuple>();
          exe->constants.emplace_back(
              c[0].cast<int32_t>(),
              array_from_numpy(c[1], dtype_from_name(c[2].cast<std::string>())));
        }
        return exe;
      }), py::arg("name"), py::arg("num_slots"), py::arg("main"), py::arg("params"),
         py::arg("results"), py::arg("constants") = py::list())
      .def_readonly("name", &Executable::name)
      .def("c_entry", [](std::shared_ptr<const Executable> exe) -> py::object {
        // (run, release, context, free_result) as addresses for the PJRT plugin library,
        // which must call release(context) once and free_result on each result owner; None when the program needs Python (callbacks, tokens).
        for (bool token : exe->param_is_token) if (token) return py::none();
        for (bool token : exe->result_is_token) if (token) return py::none();
        if (!runs_without_python(*exe->main)) return py::none();
        auto* ctx = new std::shared_ptr<const Executable>(std::move(exe));
        return py::make_tuple(reinterpret_cast<uintptr_t>(&c_run),
                              reinterpret_cast<uintptr_t>(&c_release),
                              reinterpret_cast<uintptr_t>(ctx),
                              reinterpret_cast<uintptr_t>(&c_free_result));
      })
      .def("run", [](std::shared_ptr<Executable> exe, py::sequence args, py::object host_state,
                     int64_t replica_id, int64_t partition_id) {
        return run_sync(exe, args, std::move(host_state), replica_id, partition_id);
      }, py::arg("args"), py::arg("host_state") = py::none(), py::arg("replica_id") = 0,
         py::arg("partition_id") = 0);
}

}  // namespace openhlo::cpu
