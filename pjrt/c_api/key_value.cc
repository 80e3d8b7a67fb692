// The framework's key-value callbacks (PJRT_Client_Create) as Python calls them: the store
// through which the processes of a multi-process client meet (pjrt/c_api/kv_store.py).
//
// Each export returns a PJRT_Error_Code and hands over a malloc'ed copy (*out, *out_size;
// freed with openhlo_kv_free): the value on PJRT_OK, the callback's error message otherwise.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "objects.h"

#define OPENHLO_EXPORT extern "C" __attribute__((visibility("default")))

namespace openhlo {
namespace {

// How the callbacks report a failure: an error of ours, read and destroyed by Failed.
PJRT_Error* CallbackError(PJRT_Error_Code code, const char* message, size_t message_size) {
  return MakeError(code, std::string(message != nullptr ? message : "", message_size));
}
PJRT_CallbackError g_callback_error = CallbackError;

void Give(const char* data, size_t size, char** out, size_t* out_size) {
  *out = static_cast<char*>(std::malloc(size + 1));  // never null for an empty value
  if (size != 0) std::memcpy(*out, data, size);
  *out_size = size;
}

int Failed(PJRT_Error* error, char** out, size_t* out_size) {
  const Error* e = reinterpret_cast<const Error*>(error);
  int code = e->code;
  Give(e->message.data(), e->message.size(), out, out_size);
  error->vtable->destroy(error);
  return code;
}

int Get(KeyValueCallbacks* kv, const char* key, size_t key_size, int64_t timeout_ms, char** out,
        size_t* out_size) {
  PJRT_KeyValueGetCallback_Args args{};
  args.struct_size = OPENHLO_STRUCT_SIZE(PJRT_KeyValueGetCallback_Args, value_deleter_callback);
  args.key = key;
  args.key_size = key_size;
  args.timeout_in_ms = static_cast<int>(std::clamp<int64_t>(timeout_ms, 0, INT_MAX));
  args.callback_error = &g_callback_error;
  args.user_arg = kv->get_arg;
  if (PJRT_Error* error = kv->get(&args)) return Failed(error, out, out_size);
  Give(args.value, args.value_size, out, out_size);
  if (args.value_deleter_callback != nullptr) args.value_deleter_callback(args.value);
  return PJRT_OK;
}

}  // namespace
}  // namespace openhlo

using openhlo::KeyValueCallbacks;

OPENHLO_EXPORT int openhlo_kv_get(void* store, const char* key, size_t key_size,
                                  int64_t timeout_ms, char** out, size_t* out_size) {
  return openhlo::Get(static_cast<KeyValueCallbacks*>(store), key, key_size, timeout_ms, out,
                      out_size);
}

// PJRT_NOT_FOUND when the key is not set. Callers older than PJRT 0.61 give no try-get: a
// get that waits 0 ms stands in (its deadline error meaning "not set").
OPENHLO_EXPORT int openhlo_kv_try_get(void* store, const char* key, size_t key_size, char** out,
                                      size_t* out_size) {
  auto* kv = static_cast<KeyValueCallbacks*>(store);
  if (kv->try_get == nullptr) {
    int code = openhlo::Get(kv, key, key_size, 0, out, out_size);
    return code == PJRT_DEADLINE_EXCEEDED ? PJRT_NOT_FOUND : code;
  }
  PJRT_KeyValueTryGetCallback_Args args{};
  args.struct_size = OPENHLO_STRUCT_SIZE(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback);
  args.key = key;
  args.key_size = key_size;
  args.callback_error = &openhlo::g_callback_error;
  args.user_arg = kv->try_get_arg;
  if (PJRT_Error* error = kv->try_get(&args)) return openhlo::Failed(error, out, out_size);
  openhlo::Give(args.value, args.value_size, out, out_size);
  if (args.value_deleter_callback != nullptr) args.value_deleter_callback(args.value);
  return PJRT_OK;
}

OPENHLO_EXPORT int openhlo_kv_put(void* store, const char* key, size_t key_size,
                                  const char* value, size_t value_size, char** out,
                                  size_t* out_size) {
  auto* kv = static_cast<KeyValueCallbacks*>(store);
  PJRT_KeyValuePutCallback_Args args{};
  args.struct_size = OPENHLO_STRUCT_SIZE(PJRT_KeyValuePutCallback_Args, user_arg);
  args.key = key;
  args.key_size = key_size;
  args.value = value;
  args.value_size = value_size;
  args.callback_error = &openhlo::g_callback_error;
  args.user_arg = kv->put_arg;
  if (PJRT_Error* error = kv->put(&args)) return openhlo::Failed(error, out, out_size);
  openhlo::Give("", 0, out, out_size);
  return PJRT_OK;
}

OPENHLO_EXPORT void openhlo_kv_free(char* memory) { std::free(memory); }
