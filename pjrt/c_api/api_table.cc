// GetPjrtApi: the 138-slot table (every slot a named UNIMPLEMENTED stub, then the implemented
// functions over them), the Shardings, Layouts and FFI extensions, optional per-call tracing
// (OPENHLO_PJRT_TRACE=1 prints each slot's name to stderr) and the exported entry points
// through which Python installs its callbacks.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "impl.h"

#define OPENHLO_EXPORT extern "C" __attribute__((visibility("default")))

namespace openhlo {
namespace {

enum Slot : int {
#define OPENHLO_SLOT_ENUM(name) k##name,
  PJRT_SLOTS(OPENHLO_SLOT_ENUM)
#undef OPENHLO_SLOT_ENUM
  kNumSlots
};
static_assert(kNumSlots == 138, "PJRT 0.112 has 138 function slots");

const char* const kSlotNames[kNumSlots] = {
#define OPENHLO_SLOT_NAME(name) "PJRT_" #name,
    PJRT_SLOTS(OPENHLO_SLOT_NAME)
#undef OPENHLO_SLOT_NAME
};

// A stub per slot, naming it, so a crash on an unimplemented function explains itself.
template <int I>
PJRT_Error* Stub(void*) {
  return MakeError(PJRT_UNIMPLEMENTED, std::string("openhlo: unimplemented ") + kSlotNames[I]);
}

PJRT_Slot g_impl[kNumSlots];  // what the traced trampolines forward to

template <int I>
PJRT_Error* Traced(void* args) {
  std::fprintf(stderr, "openhlo-pjrt: %s\n", kSlotNames[I]);
  return g_impl[I](args);
}

template <int... I>
void FillStubs(PJRT_Slot* slots, std::integer_sequence<int, I...>) {
  ((slots[I] = Stub<I>), ...);
}

template <int... I>
void InstallTrace(PJRT_Slot* slots, std::integer_sequence<int, I...>) {
  // The two void error functions (slots 0 and 1) are not traced: the trampoline returns a value.
  ((g_impl[I] = slots[I], slots[I] = (I < 2 ? slots[I] : Traced<I>)), ...);
}

PJRT_Shardings_Extension g_shardings;
PJRT_Api g_api;

const PJRT_Api* BuildApi() {
  g_api.struct_size = sizeof(PJRT_Api);
  g_api.pjrt_api_version.struct_size = sizeof(PJRT_Api_Version);
  g_api.pjrt_api_version.major_version = kPjrtApiMajor;
  g_api.pjrt_api_version.minor_version = kPjrtApiMinor;
  auto* slots = reinterpret_cast<PJRT_Slot*>(&g_api.PJRT_Error_Destroy);
  auto all = std::make_integer_sequence<int, kNumSlots>{};
  FillStubs(slots, all);
  g_api.PJRT_Error_Destroy = reinterpret_cast<PJRT_Slot>(reinterpret_cast<void (*)()>(&ErrorDestroyImpl));
  g_api.PJRT_Error_Message = reinterpret_cast<PJRT_Slot>(reinterpret_cast<void (*)()>(&ErrorMessageImpl));
#define OPENHLO_INSTALL(slot, fn) g_api.PJRT_##slot = fn;
  OPENHLO_IMPLEMENTED(OPENHLO_INSTALL)
#undef OPENHLO_INSTALL
  const char* trace = std::getenv("OPENHLO_PJRT_TRACE");
  if (trace != nullptr && trace[0] != '\0' && trace[0] != '0') InstallTrace(slots, all);
  g_shardings.base.struct_size = sizeof(PJRT_Shardings_Extension);
  g_shardings.base.type = kExtensionShardings;
  g_shardings.base.next = LayoutsExtension(FfiExtension(nullptr));
  g_shardings.parameter_shardings = ExecutableParameterShardings;
  g_shardings.output_shardings = ExecutableOutputShardings;
  g_api.extension_start = &g_shardings.base;
  return &g_api;
}

}  // namespace
}  // namespace openhlo

OPENHLO_EXPORT const PJRT_Api* GetPjrtApi(void) {
  static const PJRT_Api* api = openhlo::BuildApi();
  return api;
}

// Installed by pjrt/c_api/loader.py; all NULL detaches Python (at interpreter exit), after
// which compile/execute/introspection fail cleanly and releases are skipped.
OPENHLO_EXPORT void openhlo_set_callbacks(openhlo::CompileFn compile, openhlo::ExecuteFn execute,
                                          openhlo::ReleaseFn release,
                                          openhlo::DescribeFn describe,
                                          openhlo::ConnectFn connect,
                                          openhlo::RegisterFfiFn register_ffi) {
  openhlo::Callbacks& cb = openhlo::GetCallbacks();
  cb.compile = compile;
  cb.execute = execute;
  cb.release = release;
  cb.describe = describe;
  cb.connect = connect;
  cb.register_ffi = register_ffi;
}

// Called by a Python callback, before it returns, with its result (code 0) or its error.
OPENHLO_EXPORT void openhlo_report(void* ctx, int code, const char* data, size_t size) {
  auto* result = static_cast<openhlo::CallResult*>(ctx);
  result->reported = true;
  result->code = code;
  result->data.assign(data, size);
}

// Called by the compile or execute callback, before it returns: the executable may from now on
// run through `run` without Python (see FastPath in objects.h).
OPENHLO_EXPORT void openhlo_offer_fast_path(void* ctx, openhlo::FastRunFn run,
                                            openhlo::FastReleaseFn release, void* fast_ctx,
                                            openhlo::FastFreeResultFn free_result) {
  static_cast<openhlo::CallResult*>(ctx)->fast.reset(
      new openhlo::FastPath{run, release, free_result, fast_ctx});
}
