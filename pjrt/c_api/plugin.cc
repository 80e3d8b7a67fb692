// The implemented PJRT functions: plugin, errors, events, client, devices, memories,
// buffers. Executables live in executable.cc; the table, stubs and tracing in api_table.cc.
#include <cstring>
#include <string>

#include "impl.h"

namespace openhlo {
namespace {

template <typename T>
T* Args(void* a) { return static_cast<T*>(a); }

}  // namespace

// ---- errors (slots 0-2, 132): must always succeed, jaxlib calls them for every error -------
// jaxlib's error deleters also run on a null error (an OK status): nothing to free.
void ErrorDestroyImpl(PJRT_Error_Destroy_Args* a) {
  if (a->error != nullptr) a->error->vtable->destroy(a->error);
}
void ErrorMessageImpl(PJRT_Error_Message_Args* a) {
  a->error->vtable->message(a->error, &a->message, &a->message_size);
}
PJRT_Error* ErrorGetCode(void* p) {
  auto* a = Args<PJRT_Error_GetCode_Args>(p);
  a->code = a->error->vtable->get_code(a->error);
  return nullptr;
}
PJRT_Error* ErrorForEachPayload(void*) { return nullptr; }  // we attach no payloads

// ---- plugin ----------------------------------------------------------------------------------
PJRT_Error* PluginInitialize(void*) { return nullptr; }

PJRT_Error* PluginAttributes(void* p) {
  // JAX serializes programs for min(our StableHLO version, its own): report the newest we
  // parse, else it down-converts to a 12-week-old version.
  static const int64_t kCurrent[] = {1, 17, 0};
  static const int64_t kMinimum[] = {0, 9, 0};
  static PJRT_NamedValue attrs[2];
  static bool init = [] {
    const char* names[] = {"stablehlo_current_version", "stablehlo_minimum_version"};
    const int64_t* values[] = {kCurrent, kMinimum};
    for (int i = 0; i < 2; ++i) {
      attrs[i].struct_size = sizeof(PJRT_NamedValue);
      attrs[i].name = names[i];
      attrs[i].name_size = std::strlen(names[i]);
      attrs[i].type = PJRT_NV_INT64_LIST;
      attrs[i].int64_array_value = values[i];
      attrs[i].value_size = 3;
    }
    return true;
  }();
  (void)init;
  auto* a = Args<PJRT_Plugin_Attributes_Args>(p);
  a->attributes = attrs;
  a->num_attributes = 2;
  return nullptr;
}

// ---- events ----------------------------------------------------------------------------------
PJRT_Event* NewEvent(PJRT_Error_Code code, std::string message) {
  return NewEvent(Signal::Done(code, std::move(message)));
}
PJRT_Event* NewEvent(std::shared_ptr<Signal> signal) {
  auto* event = new PJRT_Event;
  event->signal = std::move(signal);
  return event;
}
static PJRT_Error* StatusError(PJRT_Error_Code code, const std::string& message) {
  return code == PJRT_OK ? nullptr : MakeError(code, message);
}
static PJRT_Error* EventStatus(PJRT_Event* event) {
  event->signal->Wait();
  return StatusError(event->signal->code(), event->signal->message());
}
PJRT_Error* EventDestroy(void* p) { delete Args<PJRT_Event_Destroy_Args>(p)->event; return nullptr; }
PJRT_Error* EventIsReady(void* p) {
  auto* a = Args<PJRT_Event_IsReady_Args>(p);
  a->is_ready = a->event->signal->IsSet();
  return nullptr;
}
PJRT_Error* EventError(void* p) { return EventStatus(Args<PJRT_Event_Destroy_Args>(p)->event); }
PJRT_Error* EventAwait(void* p) { return EventStatus(Args<PJRT_Event_Destroy_Args>(p)->event); }
PJRT_Error* EventOnReady(void* p) {
  // Fires exactly once: inline when already set, else on the thread that sets it (the
  // dispatch thread); the callback owns the error it is given.
  auto* a = Args<PJRT_Event_OnReady_Args>(p);
  auto callback = a->callback;
  void* user_arg = a->user_arg;
  a->event->signal->OnSet([callback, user_arg](PJRT_Error_Code code, const std::string& message) {
    callback(StatusError(code, message), user_arg);
  });
  return nullptr;
}
// A framework-made event: unset until the framework sets it with Event_Set.
PJRT_Error* EventCreate(void* p) {
  Args<PJRT_Event_Create_Args>(p)->event = NewEvent(std::make_shared<Signal>());
  return nullptr;
}
PJRT_Error* EventSet(void* p) {
  auto* a = Args<PJRT_Event_Set_Args>(p);
  a->event->signal->Set(a->error_code,
                        std::string(a->error_message ? a->error_message : "", a->error_message_size));
  return nullptr;
}

// ---- client ----------------------------------------------------------------------------------
static std::string NamedValueName(const PJRT_NamedValue& v) { return std::string(v.name, v.name_size); }

PJRT_Error* ClientCreate(void* p) {
  auto* a = Args<PJRT_Client_Create_Args>(p);
  int64_t num_devices = 1;
  std::string backend = "cpu";
  for (size_t i = 0; i < a->num_options; ++i) {
    const PJRT_NamedValue& v = a->create_options[i];
    std::string name = NamedValueName(v);
    if (name == "num_devices") {
      if (v.type != PJRT_NV_INT64 || v.int64_value < 1)
        return MakeError(PJRT_INVALID_ARGUMENT,
                         "openhlo PJRT_Client_Create: option num_devices must be a positive int");
      num_devices = v.int64_value;
    } else if (name == "backend") {
      if (v.type != PJRT_NV_STRING)
        return MakeError(PJRT_INVALID_ARGUMENT,
                         "openhlo PJRT_Client_Create: option backend must be a string");
      backend.assign(v.string_value, v.value_size);
    }  // other options (e.g. distributed node ids) do not apply to a single-process CPU client
  }
  auto* client = new PJRT_Client;
  client->backend = backend;
  client->platform_version = "openhlo 0.1 (" + backend + ")";
  for (int64_t i = 0; i < num_devices; ++i) {
    auto device = std::make_unique<PJRT_Device>();
    auto memory = std::make_unique<Memory>();
    int id = static_cast<int>(i);
    device->description.id = id;
    device->description.kind = "openhlo-" + backend;
    device->description.debug_string = "OpenHLO " + backend + " device " + std::to_string(id);
    device->description.to_string = "OpenHloDevice(id=" + std::to_string(id) + ")";
    device->local_hardware_id = id;
    memory->base.vtable = &kMemoryTable;
    memory->id = id;
    memory->debug_string = "OpenHLO device memory of device " + std::to_string(id);
    memory->to_string = "MemorySpace(id=" + std::to_string(id) + ", kind=device)";
    memory->devices.push_back(device.get());
    device->memory = memory.get();
    device->memories.push_back(&memory->base);
    client->devices.push_back(device.get());
    client->memories.push_back(&memory->base);
    client->device_store.push_back(std::move(device));
    client->memory_store.push_back(std::move(memory));
  }
  a->client = client;
  return nullptr;
}
PJRT_Error* ClientDestroy(void* p) { delete Args<PJRT_Client_Destroy_Args>(p)->client; return nullptr; }
PJRT_Error* ClientPlatformName(void* p) {
  auto* a = Args<PJRT_Client_String_Args>(p);
  a->value = "openhlo";
  a->value_size = 7;
  return nullptr;
}
PJRT_Error* ClientPlatformVersion(void* p) {
  auto* a = Args<PJRT_Client_String_Args>(p);
  a->value = a->client->platform_version.data();
  a->value_size = a->client->platform_version.size();
  return nullptr;
}
PJRT_Error* ClientProcessIndex(void* p) { Args<PJRT_Client_ProcessIndex_Args>(p)->process_index = 0; return nullptr; }
PJRT_Error* ClientDevices(void* p) {
  // All devices are addressable: one process.
  auto* a = Args<PJRT_Client_Devices_Args>(p);
  a->devices = a->client->devices.data();
  a->num_devices = a->client->devices.size();
  return nullptr;
}
PJRT_Error* ClientAddressableMemories(void* p) {
  auto* a = Args<PJRT_Client_Memories_Args>(p);
  a->memories = a->client->memories.data();
  a->num_memories = a->client->memories.size();
  return nullptr;
}
PJRT_Error* ClientLookupDevice(void* p) {
  // Device ids and local hardware ids coincide in a single-process client.
  auto* a = Args<PJRT_Client_LookupDevice_Args>(p);
  if (a->id < 0 || static_cast<size_t>(a->id) >= a->client->devices.size())
    return MakeError(PJRT_INVALID_ARGUMENT, "openhlo PJRT_Client_LookupDevice: no device with id " +
                                                std::to_string(a->id) + " (the client has " +
                                                std::to_string(a->client->devices.size()) + ")");
  a->device = a->client->devices[a->id];
  return nullptr;
}
PJRT_Error* ClientDefaultDeviceAssignment(void* p) {
  auto* a = Args<PJRT_Client_DefaultDeviceAssignment_Args>(p);
  size_t needed = static_cast<size_t>(a->num_replicas) * a->num_partitions;
  if (needed > a->client->devices.size() || needed > a->default_assignment_size)
    return MakeError(PJRT_INVALID_ARGUMENT,
                     "openhlo PJRT_Client_DefaultDeviceAssignment: " + std::to_string(a->num_replicas) +
                         " replica(s) x " + std::to_string(a->num_partitions) + " partition(s) need " +
                         std::to_string(needed) + " devices; the client has " +
                         std::to_string(a->client->devices.size()));
  for (size_t i = 0; i < needed; ++i) a->default_assignment[i] = static_cast<int>(i);
  return nullptr;
}

// ---- device descriptions, devices, memories ---------------------------------------------------
PJRT_Error* DescriptionId(void* p) {
  auto* a = Args<PJRT_DeviceDescription_Int_Args>(p);
  a->value = a->device_description->id;
  return nullptr;
}
PJRT_Error* DescriptionProcessIndex(void* p) {
  auto* a = Args<PJRT_DeviceDescription_Int_Args>(p);
  a->value = a->device_description->process_index;
  return nullptr;
}
PJRT_Error* DescriptionAttributes(void* p) {
  auto* a = Args<PJRT_DeviceDescription_Attributes_Args>(p);
  a->num_attributes = 0;
  a->attributes = nullptr;
  return nullptr;
}
#define OPENHLO_DESCRIPTION_STRING(fn, field)                    \
  PJRT_Error* fn(void* p) {                                      \
    auto* a = Args<PJRT_DeviceDescription_String_Args>(p);       \
    a->value = a->device_description->field.data();              \
    a->value_size = a->device_description->field.size();         \
    return nullptr;                                              \
  }
OPENHLO_DESCRIPTION_STRING(DescriptionKind, kind)
OPENHLO_DESCRIPTION_STRING(DescriptionDebugString, debug_string)
OPENHLO_DESCRIPTION_STRING(DescriptionToString, to_string)
#undef OPENHLO_DESCRIPTION_STRING

PJRT_Error* DeviceGetDescription(void* p) {
  auto* a = Args<PJRT_Device_GetDescription_Args>(p);
  a->device_description = &a->device->description;
  return nullptr;
}
PJRT_Error* DeviceIsAddressable(void* p) { Args<PJRT_Device_IsAddressable_Args>(p)->is_addressable = true; return nullptr; }
PJRT_Error* DeviceLocalHardwareId(void* p) {
  auto* a = Args<PJRT_Device_LocalHardwareId_Args>(p);
  a->local_hardware_id = a->device->local_hardware_id;
  return nullptr;
}
PJRT_Error* DeviceAddressableMemories(void* p) {
  auto* a = Args<PJRT_Device_AddressableMemories_Args>(p);
  a->memories = a->device->memories.data();
  a->num_memories = a->device->memories.size();
  return nullptr;
}
PJRT_Error* DeviceDefaultMemory(void* p) {
  auto* a = Args<PJRT_Device_DefaultMemory_Args>(p);
  a->memory = &a->device->memory->base;
  return nullptr;
}
static void NoAttributes(void*) {}
PJRT_Error* DeviceGetAttributes(void* p) {
  auto* a = Args<PJRT_Device_GetAttributes_Args>(p);
  a->attributes = nullptr;
  a->num_attributes = 0;
  a->attributes_handle = nullptr;
  a->attributes_deleter = NoAttributes;
  return nullptr;
}

static Memory* AsMemory(PJRT_Memory* m) { return reinterpret_cast<Memory*>(m); }
PJRT_Error* MemoryId(void* p) { auto* a = Args<PJRT_Memory_Int_Args>(p); a->value = AsMemory(a->memory)->id; return nullptr; }
PJRT_Error* MemoryKindId(void* p) { Args<PJRT_Memory_Int_Args>(p)->value = 0; return nullptr; }
#define OPENHLO_MEMORY_STRING(fn, field)               \
  PJRT_Error* fn(void* p) {                            \
    auto* a = Args<PJRT_Memory_String_Args>(p);        \
    a->value = AsMemory(a->memory)->field.data();      \
    a->value_size = AsMemory(a->memory)->field.size(); \
    return nullptr;                                    \
  }
OPENHLO_MEMORY_STRING(MemoryKind, kind)
OPENHLO_MEMORY_STRING(MemoryDebugString, debug_string)
OPENHLO_MEMORY_STRING(MemoryToString, to_string)
#undef OPENHLO_MEMORY_STRING
PJRT_Error* MemoryAddressableByDevices(void* p) {
  auto* a = Args<PJRT_Memory_AddressableByDevices_Args>(p);
  a->devices = AsMemory(a->memory)->devices.data();
  a->num_devices = AsMemory(a->memory)->devices.size();
  return nullptr;
}

}  // namespace openhlo
