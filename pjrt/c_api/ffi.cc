// The FFI extension: a client of the C API registers an XLA FFI handler (built against XLA's
// typed FFI C API, or ours in pjrt/native/openhlo_ffi.h: the same ABI) for the openhlo
// platform, and a `stablehlo.custom_call` of that name runs it natively, as handlers
// registered from Python do. Registration goes to the custom-kernel registry, in Python.
// User types and per-execution user data are not supported: the plugin has no execute
// contexts to carry them (pjrt/custom_kernels/README.md).
#include <cctype>
#include <string>

#include "impl.h"

namespace openhlo {
namespace {

constexpr char kPlatform[] = "openhlo";

bool IsOurPlatform(const char* name, size_t size) {
  if (size != sizeof(kPlatform) - 1) return false;
  for (size_t i = 0; i < size; ++i)
    if (std::tolower(static_cast<unsigned char>(name[i])) != kPlatform[i]) return false;
  return true;
}

PJRT_Error* RegisterHandler(PJRT_FFI_Register_Handler_Args* a) {
  const char* fn = "PJRT_FFI_Register_Handler";
  if (a->struct_size < OPENHLO_STRUCT_SIZE(PJRT_FFI_Register_Handler_Args, traits))
    return MakeError(PJRT_INVALID_ARGUMENT,
                     std::string("openhlo ") + fn + ": struct_size " +
                         std::to_string(a->struct_size) + " is below the 60 bytes of "
                         "extension version 2 (with api_version)");
  std::string name(a->target_name, a->target_name_size);
  std::string where = std::string("openhlo ") + fn + " '" + name + "': ";
  if (name.empty() || a->handler == nullptr)
    return MakeError(PJRT_INVALID_ARGUMENT, where + "needs a target name and a handler");
  if (!IsOurPlatform(a->platform_name, a->platform_name_size))
    return MakeError(PJRT_INVALID_ARGUMENT,
                     where + "platform '" + std::string(a->platform_name, a->platform_name_size) +
                         "' is not this plugin's ('openhlo')");
  if (a->api_version != 1)
    return MakeError(PJRT_UNIMPLEMENTED, where + "only typed FFI handlers (api_version 1) run "
                                                 "on openhlo; got api_version " +
                                                 std::to_string(a->api_version));
  // The traits only concern command buffers (GPU graphs): nothing to honor on a host backend.
  Callbacks& cb = GetCallbacks();
  if (cb.register_ffi == nullptr) return Detached(fn);
  CallResult result;
  cb.register_ffi(&result, name.data(), name.size(), a->handler);
  return Reported(result, fn);
}

PJRT_Error* TypeIdRegister(PJRT_FFI_TypeID_Register_Args*) {
  return MakeError(PJRT_UNIMPLEMENTED,
                   "openhlo PJRT_FFI_TypeID_Register: user types are not supported (handlers "
                   "take buffers and attributes only)");
}

PJRT_Error* UserDataAdd(PJRT_FFI_UserData_Add_Args*) {
  return MakeError(PJRT_UNIMPLEMENTED,
                   "openhlo PJRT_FFI_UserData_Add: the plugin has no execute contexts to carry "
                   "user data");
}

}  // namespace

PJRT_Extension_Base* FfiExtension(PJRT_Extension_Base* next) {
  static PJRT_FFI_Extension extension = {
      {sizeof(PJRT_FFI_Extension), kExtensionFfi, nullptr}, TypeIdRegister, UserDataAdd,
      RegisterHandler};
  extension.base.next = next;
  return &extension.base;
}

}  // namespace openhlo
