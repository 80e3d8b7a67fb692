// The objects behind the PJRT handles of libopenhlo_pjrt, and the callbacks into Python.
//
// Everything a metadata call returns is computed once (at client creation or compile) and
// stored here, so that the ~20 metadata calls of a jit dispatch never cross into Python.
// Buffers are host memory: the backends behind the plugin are CPU ones.
#ifndef OPENHLO_PJRT_C_API_OBJECTS_H_
#define OPENHLO_PJRT_C_API_OBJECTS_H_

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dispatch.h"
#include "pjrt_abi.h"

namespace openhlo {

// ---- errors --------------------------------------------------------------------------------
struct Error {
  PJRT_Error base;  // vtable first: jaxlib calls through it directly on some paths
  PJRT_Error_Code code;
  std::string message;
};
PJRT_Error* MakeError(PJRT_Error_Code code, std::string message);

// ---- callbacks into Python (installed by openhlo_set_callbacks) ----------------------------
// Results travel back through openhlo_report(ctx, code, data, size): code 0 with the payload
// (a compile manifest), or an error code with its message.
// A backend's native path for one executable: runs it on raw host pointers without Python
// (the cpu backend's is pjrt/plugins/cpu/native/executor_bindings.cc `c_run`). `run` reads the
// arguments in place (never writing them) and hands over each result as memory plus an owner
// (no copy): results[j] stays valid until free_result(owners[j]). It returns a PJRT_Error_Code
// and on failure writes a NUL-terminated message (and hands over nothing); `release(ctx)` is
// called once, when the executable dies.
typedef int (*FastRunFn)(void* ctx, int64_t num_args, void* const* inputs, void** results,
                         void** owners, char* message, size_t message_size);
typedef void (*FastReleaseFn)(void* ctx);
typedef void (*FastFreeResultFn)(void* owner);
struct FastPath {
  FastRunFn run;
  FastReleaseFn release;
  FastFreeResultFn free_result;
  void* ctx;
  ~FastPath() { release(ctx); }
};

struct CallResult {
  bool reported = false;
  int code = PJRT_INTERNAL;
  std::string data;
  std::unique_ptr<FastPath> fast;  // offered during the call (openhlo_offer_fast_path)
};
typedef int64_t (*CompileFn)(void* ctx, const char* backend, size_t backend_size,
                             const char* code, size_t code_size, const char* format,
                             size_t format_size, const char* options, size_t options_size,
                             int64_t num_devices);
// One call runs every device of a launch at once (collectives need them all running):
// inputs[d * num_args + i], outputs[d * num_outputs + j]. `launch_id` (0: none) is the
// framework's PJRT_ExecuteOptions.launch_id for a multi-process client: the same in every
// process for the same execution, it keys the execution's cross-process meetings.
typedef void (*ExecuteFn)(void* ctx, int64_t handle, int64_t num_devices, int64_t num_args,
                          void* const* inputs, void* const* outputs, int64_t launch_id);
typedef void (*ReleaseFn)(int64_t handle);
// What the framework's introspection calls ask of a compiled program (pjrt/c_api/loader.py
// `_describe` answers; payloads as DecodeCostAnalysis / DecodeMemoryStats read them).
enum DescribeWhat : int { kDescribeProgram = 0, kDescribeCost = 1, kDescribeMemory = 2 };
typedef void (*DescribeFn)(void* ctx, int64_t handle, int what);
// Joins a multi-process job (PJRT_Client_Create with num_nodes > 1): Python makes its client
// over every process's devices, meeting the other processes through `store` (the caller's
// key-value callbacks, a KeyValueCallbacks), and reports every process's device count, in
// process order, as int64s. `hostname` (may be empty) is where this process's collectives
// listen.
typedef void (*ConnectFn)(void* ctx, const char* backend, size_t backend_size,
                          int64_t num_devices, int64_t node_id, int64_t num_nodes,
                          const char* hostname, size_t hostname_size, void* store);
// The FFI extension's PJRT_FFI_Register_Handler: registers the typed XLA FFI handler at
// `handler` as custom-call target `name` in the custom-kernel registry
// (pjrt/custom_kernels); reports nothing but success or the error.
typedef void (*RegisterFfiFn)(void* ctx, const char* name, size_t name_size, void* handler);
struct Callbacks {
  CompileFn compile = nullptr;
  ExecuteFn execute = nullptr;
  ReleaseFn release = nullptr;
  DescribeFn describe = nullptr;
  ConnectFn connect = nullptr;
  RegisterFfiFn register_ffi = nullptr;
};

// The key-value callbacks a framework gave PJRT_Client_Create, called by Python through the
// openhlo_kv_* exports (key_value.cc). Never freed: the Python client that uses them lives
// as long as the process, and a late call must find a valid object (the framework's own
// callback data may be gone by then; it is only called while the framework's client lives).
struct KeyValueCallbacks {
  PJRT_KeyValueGetCallback get = nullptr;
  void* get_arg = nullptr;
  PJRT_KeyValueTryGetCallback try_get = nullptr;  // absent before PJRT 0.61
  void* try_get_arg = nullptr;
  PJRT_KeyValuePutCallback put = nullptr;
  void* put_arg = nullptr;
};
Callbacks& GetCallbacks();

// ---- devices and memories ------------------------------------------------------------------
struct Memory {
  PJRT_Memory base;  // vtable first
  int id = 0;
  std::string kind = "device";
  std::string debug_string, to_string;
  std::vector<PJRT_Device*> devices;
  std::map<const void*, std::pair<void*, void (*)(void*)>> user_data;
  ~Memory();
};

}  // namespace openhlo

struct PJRT_DeviceDescription {
  int id = 0;
  int process_index = 0;
  std::string kind, debug_string, to_string;
};

struct PJRT_Device {
  PJRT_DeviceDescription description;
  int local_hardware_id = 0;  // its index among its process's devices
  bool addressable = true;    // one of this process's devices
  openhlo::Memory* memory = nullptr;
  std::vector<PJRT_Memory*> memories;
};

struct PJRT_Client {
  std::string backend;
  std::string platform_version;
  int process_index = 0;  // node_id of a multi-process client
  std::vector<std::unique_ptr<PJRT_Device>> device_store;
  std::vector<std::unique_ptr<openhlo::Memory>> memory_store;
  std::vector<PJRT_Device*> devices;      // every process's, ids dense in process order
  std::vector<PJRT_Device*> addressable;  // this process's, by local_hardware_id
  std::vector<PJRT_Memory*> memories;     // of the addressable devices
  // The last PJRT_Client_UpdateGlobalProcessInfo: (task id, incarnation id, state) per
  // process; recorded only (collectives notice dead peers themselves).
  std::mutex process_info_mutex;
  std::vector<std::tuple<int, uint64_t, int>> process_infos;
};

// ---- events: a handle on the Signal of the work they stand for ------------------------------
struct PJRT_Event {
  std::shared_ptr<openhlo::Signal> signal;
};

// ---- buffers ---------------------------------------------------------------------------------
namespace openhlo {
// A buffer's memory: dense row-major bytes, 64-byte aligned when we allocate them. Shared with
// queued executions that read it or fill it in (a result is handed over when it is computed),
// so deleting the buffer (Delete, Destroy, donation) never pulls memory from under them.
struct Contents {
  std::shared_ptr<char> storage;
  char* data = nullptr;
  void Adopt(void* memory, FastFreeResultFn free_result, void* owner);
};
}  // namespace openhlo

struct PJRT_Buffer {
  PJRT_Buffer_Type type = PJRT_T_INVALID;
  std::vector<int64_t> dims;
  size_t nbytes = 0;
  std::shared_ptr<openhlo::Contents> contents;  // null once deleted
  PJRT_Device* device = nullptr;
  bool deleted = false;
  // Set when the contents are defined; null for buffers defined at creation. Read `data()`
  // only once defined (AwaitDefined).
  std::shared_ptr<openhlo::Signal> defined;
  char* data() const { return contents != nullptr ? contents->data : nullptr; }
  void Free() { contents.reset(); }
};

namespace openhlo {

// Byte width of a buffer type, or 0 for types the plugin cannot hold.
size_t ElementSize(PJRT_Buffer_Type type);
// A new dense buffer of `type`/`dims` on `device`: its memory allocated (uninitialized), or
// left empty for an execution to hand over (`allocate` false).
PJRT_Buffer* NewBuffer(PJRT_Buffer_Type type, const int64_t* dims, size_t rank, PJRT_Device* device,
                       bool allocate = true);
// Waits until `buffer` is defined; its producer's error (naming `fn`) if that failed.
PJRT_Error* AwaitDefined(const PJRT_Buffer* buffer, const char* fn);

}  // namespace openhlo

// ---- layouts (the Layouts extension) ---------------------------------------------------------
// Every array the plugin holds is dense row-major, so a layout is its rank. `serialized` is what
// the framework reads: the text of its minor_to_major (rank-1 ... 0), see layouts.cc.
struct PJRT_Layouts_MemoryLayout {
  std::string serialized;
  bool owned_by_executable = false;  // from an executable getter: Destroy leaves it alone
};

namespace openhlo {

PJRT_Layouts_MemoryLayout RowMajorLayout(size_t rank, bool owned_by_executable);

// ---- executables -----------------------------------------------------------------------------
// What Client_Compile learns from the Python compile callback (its manifest), decoded once.
struct Compiled {
  int64_t handle = 0;  // the Python side's key; released when the last holder dies
  std::string name, fingerprint, device_assignment;
  int64_t num_replicas = 1, num_partitions = 1;
  std::vector<int64_t> device_ids;  // replica-major, partition-minor
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<std::vector<int64_t>> output_dims;
  std::vector<std::string> output_kinds, output_shardings, parameter_shardings;
  std::vector<int64_t> parameter_ranks;
  std::vector<int64_t> donors;  // parameters the program lets the caller donate
  // Flattened views served to the metadata calls.
  std::vector<int64_t> flat_dims;
  std::vector<size_t> ranks;
  std::vector<const char*> kind_ptrs, sharding_ptrs, parameter_sharding_ptrs;
  std::vector<size_t> kind_sizes, sharding_sizes, parameter_sharding_sizes;
  // Their layouts, answered from C: without them jaxlib falls back to parsing the optimized
  // program on every compile (PjRtExecutable's default layout getters go through HLO modules).
  std::vector<PJRT_Layouts_MemoryLayout> parameter_layouts, output_layouts;
  std::vector<PJRT_Layouts_MemoryLayout*> parameter_layout_ptrs, output_layout_ptrs;
  // Set at most once (at compile, or by an execution once background codegen finished);
  // while null, executions go through Python.
  std::atomic<FastPath*> fast{nullptr};
  std::atomic<int64_t> last_run_nanos{0};  // of the native path, to choose inline or queued
  // Introspection answers (optimized program text, cost properties, memory stats): asked of
  // Python on first request only (computing them costs a module walk) and kept; under
  // describe_mutex.
  std::mutex describe_mutex;
  bool described[3] = {false, false, false};  // by DescribeWhat
  std::string optimized_program;
  std::vector<std::string> cost_names;
  std::vector<PJRT_NamedValue> cost_properties;  // point into cost_names
  int64_t memory_stats[5] = {0, 0, 0, 0, 0};    // generated code, argument, output, alias, temp
  void InstallFastPath(std::unique_ptr<FastPath> offered);
  ~Compiled();
};
// Decodes a manifest (see pjrt/c_api/loader.py, `encode_manifest`); false on malformed input.
bool DecodeManifest(const std::string& bytes, Compiled* out);
// Decode the describe callback's answers (loader.py `encode_cost_analysis`,
// `encode_memory_stats`) into `out`; false on malformed input.
bool DecodeCostAnalysis(const std::string& bytes, Compiled* out);
bool DecodeMemoryStats(const std::string& bytes, Compiled* out);

}  // namespace openhlo

struct PJRT_Executable {
  std::shared_ptr<openhlo::Compiled> compiled;
};

struct PJRT_LoadedExecutable {
  std::shared_ptr<openhlo::Compiled> compiled;
  PJRT_Client* client = nullptr;
  std::vector<PJRT_Device*> devices;  // addressable devices, replica-major
  std::vector<PJRT_LogicalDeviceIds> logical_ids;
  bool deleted = false;
};

#endif  // OPENHLO_PJRT_C_API_OBJECTS_H_
