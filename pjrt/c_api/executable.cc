// Compile and Execute through the Python callbacks, and the executables' metadata (served from
// the manifest decoded at compile time, never from Python).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "counters.h"
#include "impl.h"

namespace openhlo {
namespace {

template <typename T>
T* Args(void* a) { return static_cast<T*>(a); }

PJRT_Executable* AsExe(void* exe) { return static_cast<PJRT_Executable*>(exe); }

}  // namespace

PJRT_Error* Detached(const char* fn) {
  return MakeError(PJRT_FAILED_PRECONDITION,
                   std::string("openhlo ") + fn +
                       ": no Python runtime attached (frameworks.jax.plugin.initialize() was not "
                       "run, or the interpreter is exiting)");
}

PJRT_Error* Reported(const CallResult& result, const char* fn) {
  if (!result.reported)
    return MakeError(PJRT_INTERNAL, std::string("openhlo ") + fn + ": the Python callback failed "
                                                                   "without reporting an error");
  if (result.code != PJRT_OK)
    return MakeError(static_cast<PJRT_Error_Code>(result.code), result.data);
  return nullptr;
}

PJRT_Error* ClientCompile(void* p) {
  auto* a = Args<PJRT_Client_Compile_Args>(p);
  Callbacks& cb = GetCallbacks();
  if (cb.compile == nullptr) return Detached("PJRT_Client_Compile");
  CallResult result;
  const PJRT_Program* program = a->program;
  // The Python client is known by its backend and this process's device count.
  int64_t handle = cb.compile(&result, a->client->backend.data(), a->client->backend.size(),
                              program->code, program->code_size, program->format,
                              program->format_size, a->compile_options, a->compile_options_size,
                              static_cast<int64_t>(a->client->addressable.size()));
  if (PJRT_Error* error = Reported(result, "PJRT_Client_Compile")) return error;
  auto compiled = std::make_shared<Compiled>();
  compiled->handle = handle;  // released by ~Compiled from here on, even on a bad manifest
  compiled->InstallFastPath(std::move(result.fast));
  if (!DecodeManifest(result.data, compiled.get()))
    return MakeError(PJRT_INTERNAL, "openhlo PJRT_Client_Compile: malformed compile manifest");
  auto* loaded = new PJRT_LoadedExecutable;
  loaded->compiled = compiled;
  loaded->client = a->client;
  for (size_t k = 0; k < compiled->device_ids.size(); ++k) {
    int64_t id = compiled->device_ids[k];
    if (id < 0 || static_cast<size_t>(id) >= a->client->devices.size()) {
      delete loaded;
      return MakeError(PJRT_INVALID_ARGUMENT, "openhlo PJRT_Client_Compile: device id " +
                                                  std::to_string(id) + " is not a device of the client");
    }
    PJRT_Device* device = a->client->devices[id];
    if (!device->addressable) continue;  // another process runs it
    loaded->devices.push_back(device);
    loaded->logical_ids.push_back({static_cast<int>(k / compiled->num_partitions),
                                   static_cast<int>(k % compiled->num_partitions)});
  }
  a->executable = loaded;
  return nullptr;
}

// ---- Executable metadata ----------------------------------------------------------------------
PJRT_Error* ExecutableDestroy(void* p) { delete Args<PJRT_Executable_Destroy_Args>(p)->executable; return nullptr; }
PJRT_Error* ExecutableName(void* p) {
  auto* a = Args<PJRT_Executable_String_Args>(p);
  a->value = a->executable->compiled->name.data();
  a->value_size = a->executable->compiled->name.size();
  return nullptr;
}
PJRT_Error* ExecutableFingerprint(void* p) {
  auto* a = Args<PJRT_Executable_String_Args>(p);
  a->value = a->executable->compiled->fingerprint.data();
  a->value_size = a->executable->compiled->fingerprint.size();
  return nullptr;
}
PJRT_Error* ExecutableNumReplicas(void* p) {
  auto* a = Args<PJRT_Executable_Count_Args>(p);
  a->value = static_cast<size_t>(a->executable->compiled->num_replicas);
  return nullptr;
}
PJRT_Error* ExecutableNumPartitions(void* p) {
  auto* a = Args<PJRT_Executable_Count_Args>(p);
  a->value = static_cast<size_t>(a->executable->compiled->num_partitions);
  return nullptr;
}
PJRT_Error* ExecutableNumOutputs(void* p) {
  auto* a = Args<PJRT_Executable_Count_Args>(p);
  a->value = a->executable->compiled->output_types.size();
  return nullptr;
}
PJRT_Error* ExecutableCodeSize(void* p) {
  Args<PJRT_Executable_SizeOfGeneratedCodeInBytes_Args>(p)->size_in_bytes = 0;  // no machine code image
  return nullptr;
}
PJRT_Error* ExecutableOutputElementTypes(void* p) {
  auto* a = Args<PJRT_Executable_OutputElementTypes_Args>(p);
  a->output_types = a->executable->compiled->output_types.data();
  a->num_output_types = a->executable->compiled->output_types.size();
  return nullptr;
}
PJRT_Error* ExecutableOutputDimensions(void* p) {
  auto* a = Args<PJRT_Executable_OutputDimensions_Args>(p);
  const Compiled& c = *a->executable->compiled;
  a->num_outputs = c.ranks.size();
  a->dims = c.flat_dims.data();
  a->dim_sizes = c.ranks.data();
  return nullptr;
}
PJRT_Error* ExecutableOutputMemoryKinds(void* p) {
  auto* a = Args<PJRT_Executable_MemoryKinds_Args>(p);
  const Compiled& c = *a->executable->compiled;
  a->num_values = c.kind_ptrs.size();
  a->memory_kinds = c.kind_ptrs.data();
  a->memory_kind_sizes = c.kind_sizes.data();
  return nullptr;
}
PJRT_Error* ExecutableOutputShardings(PJRT_Shardings_Args* a) {
  const Compiled& c = *AsExe(a->executable)->compiled;
  a->num_values = c.sharding_ptrs.size();
  a->shardings = c.sharding_ptrs.data();
  a->sharding_sizes = c.sharding_sizes.data();
  return nullptr;
}
PJRT_Error* ExecutableParameterShardings(PJRT_Shardings_Args* a) {
  const Compiled& c = *AsExe(a->executable)->compiled;
  a->num_values = c.parameter_sharding_ptrs.size();
  a->shardings = c.parameter_sharding_ptrs.data();
  a->sharding_sizes = c.parameter_sharding_sizes.data();
  return nullptr;
}

// ---- Introspection: asked of Python once per executable, then served from C ----------------
// Fills c.described[what] (with its payload decoded) unless already done; the error otherwise.
// Python runs without describe_mutex held: a caller holding the GIL may be waiting for it.
static PJRT_Error* Describe(Compiled& c, DescribeWhat what, const char* fn) {
  {
    std::lock_guard<std::mutex> lock(c.describe_mutex);
    if (c.described[what]) return nullptr;
  }
  Callbacks& cb = GetCallbacks();
  if (cb.describe == nullptr) return Detached(fn);
  CallResult result;
  cb.describe(&result, c.handle, what);
  if (PJRT_Error* error = Reported(result, fn)) return error;
  std::lock_guard<std::mutex> lock(c.describe_mutex);
  if (c.described[what]) return nullptr;  // another caller answered meanwhile
  bool ok = true;
  if (what == kDescribeProgram) c.optimized_program = std::move(result.data);
  if (what == kDescribeCost) ok = DecodeCostAnalysis(result.data, &c);
  if (what == kDescribeMemory) ok = DecodeMemoryStats(result.data, &c);
  if (!ok)
    return MakeError(PJRT_INTERNAL, std::string("openhlo ") + fn + ": malformed answer from Python");
  c.described[what] = true;
  return nullptr;
}

// The optimized program as StableHLO text, format "mlir" (jaxlib parses it and converts it to
// an HloModule for `hlo_modules()` and `as_text()`). Called twice: code == NULL asks the size.
PJRT_Error* ExecutableOptimizedProgram(void* p) {
  auto* a = Args<PJRT_Executable_OptimizedProgram_Args>(p);
  Compiled& c = *a->executable->compiled;
  if (PJRT_Error* error = Describe(c, kDescribeProgram, "PJRT_Executable_OptimizedProgram"))
    return error;
  static const char kFormat[] = "mlir";
  PJRT_Program* program = a->program;
  program->format = kFormat;
  program->format_size = sizeof(kFormat) - 1;
  if (program->code == nullptr) {
    program->code_size = c.optimized_program.size();
    return nullptr;
  }
  if (program->code_size < c.optimized_program.size())
    return MakeError(PJRT_INVALID_ARGUMENT,
                     "openhlo PJRT_Executable_OptimizedProgram: code buffer of " +
                         std::to_string(program->code_size) + " bytes, " +
                         std::to_string(c.optimized_program.size()) + " needed");
  std::memcpy(program->code, c.optimized_program.data(), c.optimized_program.size());
  program->code_size = c.optimized_program.size();
  return nullptr;
}

// Properties owned by the executable ("flops", "transcendentals", "bytes accessed",
// "optimal_seconds"; see pjrt/executable_analysis.py).
PJRT_Error* ExecutableCostAnalysis(void* p) {
  auto* a = Args<PJRT_Executable_GetCostAnalysis_Args>(p);
  Compiled& c = *a->executable->compiled;
  if (PJRT_Error* error = Describe(c, kDescribeCost, "PJRT_Executable_GetCostAnalysis"))
    return error;
  a->num_properties = c.cost_properties.size();
  a->properties = c.cost_properties.data();
  return nullptr;
}

PJRT_Error* ExecutableCompiledMemoryStats(void* p) {
  auto* a = Args<PJRT_Executable_GetCompiledMemoryStats_Args>(p);
  Compiled& c = *a->executable->compiled;
  if (PJRT_Error* error = Describe(c, kDescribeMemory, "PJRT_Executable_GetCompiledMemoryStats"))
    return error;
  a->generated_code_size_in_bytes = c.memory_stats[0];
  a->argument_size_in_bytes = c.memory_stats[1];
  a->output_size_in_bytes = c.memory_stats[2];
  a->alias_size_in_bytes = c.memory_stats[3];
  a->temp_size_in_bytes = c.memory_stats[4];
  a->host_generated_code_size_in_bytes = 0;
  a->host_argument_size_in_bytes = 0;
  a->host_output_size_in_bytes = 0;
  a->host_alias_size_in_bytes = 0;
  a->host_temp_size_in_bytes = 0;
  return nullptr;
}

// ---- LoadedExecutable -------------------------------------------------------------------------
PJRT_Error* LoadedDestroy(void* p) { delete Args<PJRT_LoadedExecutable_Destroy_Args>(p)->executable; return nullptr; }
PJRT_Error* LoadedDelete(void* p) { Args<PJRT_LoadedExecutable_Destroy_Args>(p)->executable->deleted = true; return nullptr; }
PJRT_Error* LoadedIsDeleted(void* p) {
  auto* a = Args<PJRT_LoadedExecutable_IsDeleted_Args>(p);
  a->is_deleted = a->executable->deleted;
  return nullptr;
}
PJRT_Error* LoadedGetExecutable(void* p) {
  // A new object the caller destroys, sharing the compiled program.
  auto* a = Args<PJRT_LoadedExecutable_GetExecutable_Args>(p);
  a->executable = new PJRT_Executable{a->loaded_executable->compiled};
  return nullptr;
}
PJRT_Error* LoadedAddressableDevices(void* p) {
  auto* a = Args<PJRT_LoadedExecutable_AddressableDevices_Args>(p);
  a->addressable_devices = a->executable->devices.data();
  a->num_addressable_devices = a->executable->devices.size();
  return nullptr;
}
PJRT_Error* LoadedLogicalIds(void* p) {
  auto* a = Args<PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args>(p);
  a->logical_ids = a->executable->logical_ids.data();
  a->num_logical_ids = a->executable->logical_ids.size();
  return nullptr;
}
static void NoDelete(void*) {}
PJRT_Error* LoadedGetDeviceAssignment(void* p) {
  // The serialized DeviceAssignmentProto lives as long as the executable; nothing to free.
  auto* a = Args<PJRT_LoadedExecutable_GetDeviceAssignment_Args>(p);
  const std::string& bytes = a->executable->compiled->device_assignment;
  a->serialized_bytes = bytes.data();
  a->serialized_bytes_size = bytes.size();
  a->serialized_device_assignment = nullptr;
  a->serialized_device_assignment_deleter = NoDelete;
  return nullptr;
}

// Donated arguments are consumed by the execution, as PJRT defines donation: their memory is
// freed and the framework sees them deleted. (Results get fresh memory rather than the donor's:
// the executors may still read an argument after writing a result.)
static void ReleaseDonated(const Compiled& c, const PJRT_LoadedExecutable_Execute_Args* a) {
  if (c.donors.empty()) return;
  const PJRT_ExecuteOptions* options = a->options;
  const int64_t* kept = nullptr;
  size_t num_kept = 0;
  if (options != nullptr &&
      options->struct_size >= OPENHLO_STRUCT_SIZE(PJRT_ExecuteOptions, num_non_donatable_input_indices)) {
    kept = options->non_donatable_input_indices;
    num_kept = options->num_non_donatable_input_indices;
  }
  for (int64_t index : c.donors) {
    if (index < 0 || static_cast<size_t>(index) >= a->num_args ||
        std::find(kept, kept + num_kept, index) != kept + num_kept)
      continue;
    for (size_t d = 0; d < a->num_devices; ++d) {
      PJRT_Buffer* donated = a->argument_lists[d][index];
      donated->Free();
      donated->deleted = true;
    }
  }
}

// Runs a native path on the inputs' memory (defined by now), hands its results to `out` and
// records how long it took.
static PJRT_Error_Code RunFast(Compiled& c, const FastPath& fast,
                               const std::vector<std::shared_ptr<Contents>>& in,
                               const std::vector<std::shared_ptr<Contents>>& out,
                               std::string* message) {
  std::vector<void*> inputs, memory(out.size()), owners(out.size());
  for (const std::shared_ptr<Contents>& contents : in) inputs.push_back(contents->data);
  char text[4096];
  auto start = std::chrono::steady_clock::now();
  int code = fast.run(fast.ctx, static_cast<int64_t>(inputs.size()), inputs.data(), memory.data(),
                      owners.data(), text, sizeof text);
  c.last_run_nanos.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - start).count(),
                         std::memory_order_relaxed);
  Count(kFastExecutions);
  if (code != PJRT_OK) {
    *message = std::string("openhlo execute: ") + text;
    return static_cast<PJRT_Error_Code>(code);
  }
  for (size_t j = 0; j < out.size(); ++j) out[j]->Adopt(memory[j], fast.free_result, owners[j]);
  return PJRT_OK;
}

// Native executions run inline on the caller's thread when they are small: at most this many
// bytes, and their previous run took at most kInlineNanos. Handing such work to the dispatch
// thread would cost more than the work (a few microseconds); a long loop over small arrays
// is not small, and goes asynchronous from its second run on.
constexpr size_t kInlineBytes = 64 << 10;
constexpr int64_t kInlineNanos = 50'000;

PJRT_Error* LoadedExecute(void* p) {
  auto* a = Args<PJRT_LoadedExecutable_Execute_Args>(p);
  PJRT_LoadedExecutable* exe = a->executable;
  Compiled& c = *exe->compiled;
  if (exe->deleted)
    return MakeError(PJRT_FAILED_PRECONDITION, "openhlo PJRT_LoadedExecutable_Execute: executable " +
                                                   c.name + " was deleted");
  if (Dispatcher::Get().Closed()) {
    Dispatcher::Get().CountRefused();
    return MakeError(PJRT_FAILED_PRECONDITION,
                     "openhlo PJRT_LoadedExecutable_Execute: " + c.name +
                         " not run: the process is exiting (the plugin's exit hook ran)");
  }
  Callbacks& cb = GetCallbacks();
  if (cb.execute == nullptr) return Detached("PJRT_LoadedExecutable_Execute");
  size_t expected = a->execute_device != nullptr ? 1 : exe->devices.size();
  if (a->num_devices != expected)
    return MakeError(PJRT_INVALID_ARGUMENT,
                     "openhlo PJRT_LoadedExecutable_Execute: " + c.name + " runs on " +
                         std::to_string(expected) + " device(s), got " +
                         std::to_string(a->num_devices) + " argument list(s)");
  const size_t num_devices = a->num_devices, num_args = a->num_args;
  const size_t num_outputs = c.output_types.size();
  FastPath* fast = num_devices == 1 ? c.fast.load(std::memory_order_acquire) : nullptr;
  std::vector<std::shared_ptr<Contents>> in(num_devices * num_args), out;
  std::vector<std::shared_ptr<Signal>> inputs_defined;  // producers of the inputs
  std::vector<std::unique_ptr<PJRT_Buffer>> results;
  size_t bytes = 0;
  bool inputs_pending = false;
  for (size_t d = 0; d < num_devices; ++d) {
    PJRT_Device* device = a->execute_device != nullptr ? a->execute_device : exe->devices[d];
    for (size_t i = 0; i < num_args; ++i) {
      PJRT_Buffer* arg = a->argument_lists[d][i];
      if (arg->deleted)
        return MakeError(PJRT_FAILED_PRECONDITION, "openhlo PJRT_LoadedExecutable_Execute: argument " +
                                                       std::to_string(i) + " of " + c.name +
                                                       " was deleted");
      in[d * num_args + i] = arg->contents;
      bytes += arg->nbytes;
      if (arg->defined != nullptr) {
        inputs_defined.push_back(arg->defined);
        inputs_pending |= !arg->defined->IsSet();
      }
    }
    for (size_t j = 0; j < num_outputs; ++j) {
      // A native run hands its results over; the Python path writes into memory we allocate.
      results.emplace_back(NewBuffer(c.output_types[j], c.output_dims[j].data(),
                                     c.output_dims[j].size(), device, /*allocate=*/fast == nullptr));
      out.push_back(results.back()->contents);
      bytes += results.back()->nbytes;
    }
  }
  std::shared_ptr<Signal> done;
  bool small = bytes <= kInlineBytes &&
               c.last_run_nanos.load(std::memory_order_relaxed) <= kInlineNanos;
  if (fast != nullptr && (inputs_pending || !small || !Dispatcher::Get().Idle())) {
    done = std::make_shared<Signal>();
    Dispatcher::Get().Push([compiled = exe->compiled, fast, in, out, inputs_defined, done] {
      for (const std::shared_ptr<Signal>& input : inputs_defined) {
        input->Wait();
        if (input->code() != PJRT_OK)
          return done->Set(input->code(), "openhlo execute: an input's execution failed: " +
                                              input->message());
      }
      std::string message;
      PJRT_Error_Code code = RunFast(*compiled, *fast, in, out, &message);
      done->Set(code, std::move(message));
    });
    for (std::unique_ptr<PJRT_Buffer>& result : results) result->defined = done;
  } else {
    for (size_t d = 0; d < num_devices; ++d)
      for (size_t i = 0; i < num_args; ++i)
        if (PJRT_Error* failed = AwaitDefined(a->argument_lists[d][i], "PJRT_LoadedExecutable_Execute"))
          return failed;
    if (fast != nullptr) {
      std::string message;
      PJRT_Error_Code code = RunFast(c, *fast, in, out, &message);
      if (code != PJRT_OK) return MakeError(code, message);
    } else {
      // All devices in one call: their instances must run at once to meet in collectives.
      std::vector<void*> inputs, outputs;
      for (const std::shared_ptr<Contents>& contents : in) inputs.push_back(contents->data);
      for (const std::shared_ptr<Contents>& contents : out) outputs.push_back(contents->data);
      // Only a multi-process client's executions need a key the processes agree on.
      const PJRT_ExecuteOptions* options = a->options;
      int64_t launch_id = 0;
      if (exe->client->addressable.size() != exe->client->devices.size() && options != nullptr &&
          options->struct_size >= OPENHLO_STRUCT_SIZE(PJRT_ExecuteOptions, launch_id))
        launch_id = options->launch_id;
      CallResult result;
      cb.execute(&result, c.handle, static_cast<int64_t>(num_devices),
                 static_cast<int64_t>(num_args), inputs.data(), outputs.data(), launch_id);
      if (PJRT_Error* error = Reported(result, "PJRT_LoadedExecutable_Execute"))
        return error;  // `results` frees the output buffers
      c.InstallFastPath(std::move(result.fast));
    }
  }
  ReleaseDonated(c, a);
  for (size_t d = 0; d < num_devices; ++d) {
    for (size_t j = 0; j < num_outputs; ++j)
      a->output_lists[d][j] = results[d * num_outputs + j].release();
    if (a->device_complete_events != nullptr)
      a->device_complete_events[d] = done != nullptr ? NewEvent(done) : NewEvent(PJRT_OK, "");
  }
  return nullptr;
}

}  // namespace openhlo
