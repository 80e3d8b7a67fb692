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

static PJRT_Error* OptionError(const std::string& name, const char* expected) {
  return MakeError(PJRT_INVALID_ARGUMENT,
                   "openhlo PJRT_Client_Create: option " + name + " must be " + expected);
}

// Adds the `count` devices of process `process` to `client`, their ids from `first`.
static void AddDevices(PJRT_Client* client, int process, int64_t first, int64_t count,
                       bool multi_process) {
  const std::string& backend = client->backend;
  for (int64_t i = 0; i < count; ++i) {
    auto device = std::make_unique<PJRT_Device>();
    auto memory = std::make_unique<Memory>();
    int id = static_cast<int>(first + i);
    std::string of_process = multi_process ? " of process " + std::to_string(process) : "";
    device->description.id = id;
    device->description.process_index = process;
    device->description.kind = "openhlo-" + backend;
    device->description.debug_string = "OpenHLO " + backend + " device " + std::to_string(id) + of_process;
    device->description.to_string =
        "OpenHloDevice(id=" + std::to_string(id) +
        (multi_process ? ", process_index=" + std::to_string(process) : "") + ")";
    device->local_hardware_id = static_cast<int>(i);
    device->addressable = process == client->process_index;
    memory->base.vtable = &kMemoryTable;
    memory->id = id;
    memory->debug_string = "OpenHLO device memory of device " + std::to_string(id);
    memory->to_string = "MemorySpace(id=" + std::to_string(id) + ", kind=device)";
    memory->devices.push_back(device.get());
    device->memory = memory.get();
    device->memories.push_back(&memory->base);
    client->devices.push_back(device.get());
    if (device->addressable) {
      client->addressable.push_back(device.get());
      client->memories.push_back(&memory->base);
    }
    client->device_store.push_back(std::move(device));
    client->memory_store.push_back(std::move(memory));
  }
}

// Every process's device count, in process order, from the Python runtime, which joins the
// other processes through the framework's key-value callbacks (objects.h ConnectFn).
static PJRT_Error* Connect(const PJRT_Client_Create_Args* a, const std::string& backend,
                           int64_t num_devices, int64_t node_id, int64_t num_nodes,
                           const std::string& hostname, std::vector<int64_t>* counts) {
  if (a->kv_get_callback == nullptr || a->kv_put_callback == nullptr)
    return MakeError(PJRT_INVALID_ARGUMENT,
                     "openhlo PJRT_Client_Create: num_nodes=" + std::to_string(num_nodes) +
                         " needs the key-value store callbacks (kv_get_callback, "
                         "kv_put_callback); the caller gave none");
  Callbacks& cb = GetCallbacks();
  if (cb.connect == nullptr) return Detached("PJRT_Client_Create");
  auto* kv = new KeyValueCallbacks;  // never freed (objects.h)
  kv->get = a->kv_get_callback;
  kv->get_arg = a->kv_get_user_arg;
  kv->put = a->kv_put_callback;
  kv->put_arg = a->kv_put_user_arg;
  if (a->struct_size >= OPENHLO_STRUCT_SIZE(PJRT_Client_Create_Args, kv_try_get_user_arg)) {
    kv->try_get = a->kv_try_get_callback;
    kv->try_get_arg = a->kv_try_get_user_arg;
  }
  CallResult result;
  cb.connect(&result, backend.data(), backend.size(), num_devices, node_id, num_nodes,
             hostname.data(), hostname.size(), kv);
  if (PJRT_Error* error = Reported(result, "PJRT_Client_Create")) return error;
  if (result.data.size() != static_cast<size_t>(num_nodes) * 8)
    return MakeError(PJRT_INTERNAL, "openhlo PJRT_Client_Create: malformed topology from Python");
  counts->resize(num_nodes);
  std::memcpy(counts->data(), result.data.data(), result.data.size());
  for (int64_t count : *counts)
    if (count < 1 || count > (1 << 20))
      return MakeError(PJRT_INTERNAL, "openhlo PJRT_Client_Create: a process reported " +
                                          std::to_string(count) + " devices");
  if ((*counts)[node_id] != num_devices)
    return MakeError(PJRT_INTERNAL, "openhlo PJRT_Client_Create: the global topology gives "
                                    "this process " + std::to_string((*counts)[node_id]) +
                                        " devices, it has " + std::to_string(num_devices));
  return nullptr;
}

// Options: num_devices (this process's), backend, and for a multi-process client node_id,
// num_nodes (what jax.distributed passes) and hostname (where this process's collectives
// listen; default loopback). Options of other plugins or frameworks are ignored.
PJRT_Error* ClientCreate(void* p) {
  auto* a = Args<PJRT_Client_Create_Args>(p);
  int64_t num_devices = 1, node_id = 0, num_nodes = 1;
  std::string backend = "cpu", hostname;
  for (size_t i = 0; i < a->num_options; ++i) {
    const PJRT_NamedValue& v = a->create_options[i];
    std::string name = NamedValueName(v);
    if (name == "num_devices" || name == "node_id" || name == "num_nodes") {
      if (v.type != PJRT_NV_INT64) return OptionError(name, "an int");
      (name == "num_devices" ? num_devices : name == "node_id" ? node_id : num_nodes) =
          v.int64_value;
    } else if (name == "backend" || name == "hostname") {
      if (v.type != PJRT_NV_STRING) return OptionError(name, "a string");
      (name == "backend" ? backend : hostname).assign(v.string_value, v.value_size);
    }
  }
  if (num_devices < 1) return OptionError("num_devices", "a positive int");
  if (num_nodes < 1 || num_nodes > (1 << 16)) return OptionError("num_nodes", "a positive int");
  if (node_id < 0 || node_id >= num_nodes)
    return OptionError("node_id", ("in 0.." + std::to_string(num_nodes - 1)).c_str());
  std::vector<int64_t> counts{num_devices};
  if (num_nodes > 1)
    if (PJRT_Error* error = Connect(a, backend, num_devices, node_id, num_nodes, hostname, &counts))
      return error;
  auto* client = new PJRT_Client;
  client->backend = backend;
  client->platform_version = "openhlo 0.1 (" + backend + ")";
  client->process_index = static_cast<int>(node_id);
  int64_t first = 0;
  for (size_t process = 0; process < counts.size(); ++process) {
    AddDevices(client, static_cast<int>(process), first, counts[process], num_nodes > 1);
    first += counts[process];
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
PJRT_Error* ClientProcessIndex(void* p) {
  auto* a = Args<PJRT_Client_ProcessIndex_Args>(p);
  a->process_index = a->client->process_index;
  return nullptr;
}
PJRT_Error* ClientDevices(void* p) {
  auto* a = Args<PJRT_Client_Devices_Args>(p);
  a->devices = a->client->devices.data();
  a->num_devices = a->client->devices.size();
  return nullptr;
}
PJRT_Error* ClientAddressableDevices(void* p) {
  auto* a = Args<PJRT_Client_Devices_Args>(p);
  a->devices = a->client->addressable.data();
  a->num_devices = a->client->addressable.size();
  return nullptr;
}
PJRT_Error* ClientAddressableMemories(void* p) {
  auto* a = Args<PJRT_Client_Memories_Args>(p);
  a->memories = a->client->memories.data();
  a->num_memories = a->client->memories.size();
  return nullptr;
}
static PJRT_Error* LookupIn(const std::vector<PJRT_Device*>& devices, int id, const char* fn,
                            const char* what, PJRT_Device** out) {
  if (id < 0 || static_cast<size_t>(id) >= devices.size())
    return MakeError(PJRT_INVALID_ARGUMENT, std::string("openhlo ") + fn + ": no device with " +
                                                what + " " + std::to_string(id) + " (the client has " +
                                                std::to_string(devices.size()) + ")");
  *out = devices[id];
  return nullptr;
}
PJRT_Error* ClientLookupDevice(void* p) {
  // Ids are dense in process order: a device's id is its index among all devices.
  auto* a = Args<PJRT_Client_LookupDevice_Args>(p);
  return LookupIn(a->client->devices, a->id, "PJRT_Client_LookupDevice", "id", &a->device);
}
PJRT_Error* ClientLookupAddressableDevice(void* p) {
  auto* a = Args<PJRT_Client_LookupDevice_Args>(p);  // same layout, id = local hardware id
  return LookupIn(a->client->addressable, a->id, "PJRT_Client_LookupAddressableDevice",
                  "local hardware id", &a->device);
}
PJRT_Error* ClientUpdateGlobalProcessInfo(void* p) {
  auto* a = Args<PJRT_Client_UpdateGlobalProcessInfo_Args>(p);
  std::lock_guard<std::mutex> lock(a->client->process_info_mutex);
  a->client->process_infos.clear();
  for (size_t i = 0; i < a->num_process_infos; ++i) {
    const PJRT_ProcessInfo& info = a->process_infos[i];
    a->client->process_infos.emplace_back(info.task_id, info.incarnation_id, info.state);
  }
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
PJRT_Error* DeviceIsAddressable(void* p) {
  auto* a = Args<PJRT_Device_IsAddressable_Args>(p);
  a->is_addressable = a->device->addressable;
  return nullptr;
}
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
