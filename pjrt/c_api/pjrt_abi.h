// Our own declarations of the PJRT C API (version 0.112, LP64), written from the ABI facts
// in shared/design/pjrt-plugin.md section 3; the upstream header is not used. Only the Args
// structs of the functions we implement are declared; every struct's STRUCT_SIZE (offset of
// its last field + its size) is checked against the design's numbers below, so a misplaced
// field fails the build instead of corrupting jaxlib's stack.
#ifndef OPENHLO_PJRT_C_API_PJRT_ABI_H_
#define OPENHLO_PJRT_C_API_PJRT_ABI_H_

#include <cstddef>
#include <cstdint>

extern "C" {

constexpr int kPjrtApiMajor = 0;
constexpr int kPjrtApiMinor = 112;

struct PJRT_Extension_Base {
  size_t struct_size;
  int type;  // PJRT_Extension_Type
  PJRT_Extension_Base* next;
};
constexpr int kExtensionLayouts = 4;
constexpr int kExtensionFfi = 5;
constexpr int kExtensionShardings = 19;

#define PJRT_HDR            \
  size_t struct_size;       \
  PJRT_Extension_Base* extension_start

// absl status codes.
enum PJRT_Error_Code : int {
  PJRT_OK = 0, PJRT_CANCELLED = 1, PJRT_UNKNOWN = 2, PJRT_INVALID_ARGUMENT = 3,
  PJRT_DEADLINE_EXCEEDED = 4, PJRT_NOT_FOUND = 5, PJRT_ALREADY_EXISTS = 6,
  PJRT_PERMISSION_DENIED = 7, PJRT_RESOURCE_EXHAUSTED = 8, PJRT_FAILED_PRECONDITION = 9,
  PJRT_ABORTED = 10, PJRT_OUT_OF_RANGE = 11, PJRT_UNIMPLEMENTED = 12, PJRT_INTERNAL = 13,
  PJRT_UNAVAILABLE = 14, PJRT_DATA_LOSS = 15, PJRT_UNAUTHENTICATED = 16,
};

// PJRT_Buffer_Type values (the subset we can store). The f8 types and the sub-byte integers are
// held one value per byte, as the host arrays jaxlib hands over (ml_dtypes) hold them.
enum PJRT_Buffer_Type : int {
  PJRT_T_INVALID = 0, PJRT_T_PRED = 1, PJRT_T_S8 = 2, PJRT_T_S16 = 3, PJRT_T_S32 = 4,
  PJRT_T_S64 = 5, PJRT_T_U8 = 6, PJRT_T_U16 = 7, PJRT_T_U32 = 8, PJRT_T_U64 = 9,
  PJRT_T_F16 = 10, PJRT_T_F32 = 11, PJRT_T_F64 = 12, PJRT_T_BF16 = 13, PJRT_T_C64 = 14,
  PJRT_T_C128 = 15, PJRT_T_F8E5M2 = 16, PJRT_T_F8E4M3FN = 17, PJRT_T_F8E4M3B11FNUZ = 18,
  PJRT_T_F8E5M2FNUZ = 19, PJRT_T_F8E4M3FNUZ = 20, PJRT_T_S4 = 21, PJRT_T_U4 = 22,
  PJRT_T_S2 = 24, PJRT_T_U2 = 25, PJRT_T_F8E4M3 = 26, PJRT_T_F8E3M4 = 27,
  PJRT_T_F8E8M0FNU = 28,
};

enum PJRT_NamedValue_Type : int {
  PJRT_NV_STRING = 0, PJRT_NV_INT64 = 1, PJRT_NV_INT64_LIST = 2, PJRT_NV_FLOAT = 3,
  PJRT_NV_BOOL = 4,
};

struct PJRT_NamedValue {
  PJRT_HDR;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
};

// Opaque to the framework: defined in plugin.cc.
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_TopologyDescription;

// Errors and memories are a vtable pointer as first member (since 0.96).
struct PJRT_Error;
struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;
  PJRT_Extension_Base* extension_start;
  void (*destroy)(PJRT_Error*);
  void (*message)(const PJRT_Error*, const char** msg, size_t* len);
  PJRT_Error_Code (*get_code)(const PJRT_Error*);
  void (*for_each_payload)(const PJRT_Error*,
                           void (*visitor)(const char*, size_t, const char*, size_t, void*),
                           void* user_arg);
};
struct PJRT_Error { const PJRT_Error_FunctionTable* vtable; };

struct PJRT_Memory;
struct PJRT_Memory_FunctionTable {  // note: a different field order than the error table
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  size_t instance_struct_size;
  void* (*get_user_data)(PJRT_Memory*, const void* key);
  void (*set_user_data)(PJRT_Memory*, const void* key, void* data, void (*dtor)(void*));
};
struct PJRT_Memory { const PJRT_Memory_FunctionTable* vtable; };

struct PJRT_Program {
  PJRT_HDR;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};

struct PJRT_LogicalDeviceIds { int replica; int partition; };

enum PJRT_Buffer_MemoryLayout_Type : int { PJRT_LAYOUT_TILED = 0, PJRT_LAYOUT_STRIDES = 1 };
struct PJRT_Buffer_MemoryLayout_Tiled {
  PJRT_HDR;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
};
struct PJRT_Buffer_MemoryLayout_Strides {
  PJRT_HDR;
  const int64_t* byte_strides;
  size_t num_byte_strides;
};
struct PJRT_Buffer_MemoryLayout {
  PJRT_HDR;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
};

// ---- Args structs ------------------------------------------------------------------------
struct PJRT_Error_Destroy_Args { PJRT_HDR; PJRT_Error* error; };
struct PJRT_Error_Message_Args { PJRT_HDR; const PJRT_Error* error; const char* message; size_t message_size; };
struct PJRT_Error_GetCode_Args { PJRT_HDR; const PJRT_Error* error; PJRT_Error_Code code; };
struct PJRT_Error_ForEachPayload_Args {
  PJRT_HDR; const PJRT_Error* error;
  void (*visitor)(const char*, size_t, const char*, size_t, void*); void* user_arg;
};
struct PJRT_Plugin_Initialize_Args { PJRT_HDR; };
struct PJRT_Plugin_Attributes_Args { PJRT_HDR; const PJRT_NamedValue* attributes; size_t num_attributes; };

struct PJRT_Event_Destroy_Args { PJRT_HDR; PJRT_Event* event; };
struct PJRT_Event_IsReady_Args { PJRT_HDR; PJRT_Event* event; bool is_ready; };
struct PJRT_Event_Create_Args { PJRT_HDR; PJRT_Event* event; };
struct PJRT_Event_OnReady_Args {
  PJRT_HDR; PJRT_Event* event; void (*callback)(PJRT_Error* error, void* user_arg); void* user_arg;
};
struct PJRT_Event_Set_Args {
  PJRT_HDR; PJRT_Event* event; PJRT_Error_Code error_code; const char* error_message;
  size_t error_message_size;
};

// The distributed key-value store of PJRT_Client_Create (multi-process clients): the caller's
// callbacks, which report failures through the plugin's `callback_error` (an error of ours).
typedef PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code, const char* message,
                                          size_t message_size);
typedef void (*PJRT_KeyValue_ValueDeleter)(char* value);
struct PJRT_KeyValueGetCallback_Args {  // blocks up to timeout_in_ms
  PJRT_HDR; const char* key; size_t key_size; int timeout_in_ms;
  PJRT_CallbackError* callback_error; void* user_arg;
  char* value; size_t value_size; PJRT_KeyValue_ValueDeleter value_deleter_callback;  // out
};
struct PJRT_KeyValueTryGetCallback_Args {  // PJRT_NOT_FOUND at once when absent
  PJRT_HDR; const char* key; size_t key_size; PJRT_CallbackError* callback_error; void* user_arg;
  char* value; size_t value_size; PJRT_KeyValue_ValueDeleter value_deleter_callback;  // out
};
struct PJRT_KeyValuePutCallback_Args {
  PJRT_HDR; const char* key; size_t key_size; const char* value; size_t value_size;
  PJRT_CallbackError* callback_error; void* user_arg;
};
typedef PJRT_Error* (*PJRT_KeyValueGetCallback)(PJRT_KeyValueGetCallback_Args* args);
typedef PJRT_Error* (*PJRT_KeyValueTryGetCallback)(PJRT_KeyValueTryGetCallback_Args* args);
typedef PJRT_Error* (*PJRT_KeyValuePutCallback)(PJRT_KeyValuePutCallback_Args* args);
struct PJRT_Client_Create_Args {
  PJRT_HDR;
  const PJRT_NamedValue* create_options; size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback; void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback; void* kv_put_user_arg;
  PJRT_Client* client;
  PJRT_KeyValueTryGetCallback kv_try_get_callback; void* kv_try_get_user_arg;
};
// What the framework learned about every process of the job (fault tolerance); recorded.
struct PJRT_ProcessInfo {
  size_t struct_size; int task_id; uint64_t incarnation_id; int state; int error_code;
  const char* error_message; size_t error_message_size;
};
struct PJRT_Client_UpdateGlobalProcessInfo_Args {
  PJRT_HDR; PJRT_Client* client; PJRT_ProcessInfo* process_infos; size_t num_process_infos;
};
struct PJRT_Client_Destroy_Args { PJRT_HDR; PJRT_Client* client; };
struct PJRT_Client_ProcessIndex_Args { PJRT_HDR; PJRT_Client* client; int process_index; };
struct PJRT_Client_String_Args { PJRT_HDR; PJRT_Client* client; const char* value; size_t value_size; };
struct PJRT_Client_Devices_Args { PJRT_HDR; PJRT_Client* client; PJRT_Device* const* devices; size_t num_devices; };
struct PJRT_Client_Memories_Args { PJRT_HDR; PJRT_Client* client; PJRT_Memory* const* memories; size_t num_memories; };
struct PJRT_Client_LookupDevice_Args { PJRT_HDR; PJRT_Client* client; int id; PJRT_Device* device; };
struct PJRT_Client_Compile_Args {
  PJRT_HDR; PJRT_Client* client; const PJRT_Program* program; const char* compile_options;
  size_t compile_options_size; PJRT_LoadedExecutable* executable;
};
struct PJRT_Client_DefaultDeviceAssignment_Args {
  PJRT_HDR; PJRT_Client* client; int num_replicas; int num_partitions;
  size_t default_assignment_size; int* default_assignment;
};
struct PJRT_Client_BufferFromHostBuffer_Args {
  PJRT_HDR;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims; size_t num_dims;
  const int64_t* byte_strides; size_t num_byte_strides;
  int host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Event* done_with_host_buffer;
  PJRT_Buffer* buffer;
};

struct PJRT_DeviceDescription_Int_Args { PJRT_HDR; const PJRT_DeviceDescription* device_description; int value; };
struct PJRT_DeviceDescription_Attributes_Args {  // count BEFORE the pointer here
  PJRT_HDR; const PJRT_DeviceDescription* device_description; size_t num_attributes;
  const PJRT_NamedValue* attributes;
};
struct PJRT_DeviceDescription_String_Args {
  PJRT_HDR; const PJRT_DeviceDescription* device_description; const char* value; size_t value_size;
};

struct PJRT_Device_GetDescription_Args { PJRT_HDR; PJRT_Device* device; PJRT_DeviceDescription* device_description; };
struct PJRT_Device_IsAddressable_Args { PJRT_HDR; PJRT_Device* device; bool is_addressable; };
struct PJRT_Device_LocalHardwareId_Args { PJRT_HDR; PJRT_Device* device; int local_hardware_id; };
struct PJRT_Device_AddressableMemories_Args { PJRT_HDR; PJRT_Device* device; PJRT_Memory* const* memories; size_t num_memories; };
struct PJRT_Device_DefaultMemory_Args { PJRT_HDR; PJRT_Device* device; PJRT_Memory* memory; };
struct PJRT_Device_GetAttributes_Args {
  PJRT_HDR; PJRT_Device* device; const PJRT_NamedValue* attributes; size_t num_attributes;
  void* attributes_handle; void (*attributes_deleter)(void*);
};

struct PJRT_Memory_Int_Args { PJRT_HDR; PJRT_Memory* memory; int value; };
struct PJRT_Memory_String_Args { PJRT_HDR; PJRT_Memory* memory; const char* value; size_t value_size; };
struct PJRT_Memory_AddressableByDevices_Args { PJRT_HDR; PJRT_Memory* memory; PJRT_Device* const* devices; size_t num_devices; };

struct PJRT_Executable_Destroy_Args { PJRT_HDR; PJRT_Executable* executable; };
struct PJRT_Executable_String_Args { PJRT_HDR; PJRT_Executable* executable; const char* value; size_t value_size; };
struct PJRT_Executable_Count_Args { PJRT_HDR; PJRT_Executable* executable; size_t value; };
struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args { PJRT_HDR; PJRT_Executable* executable; int64_t size_in_bytes; };
struct PJRT_Executable_OutputElementTypes_Args {
  PJRT_HDR; PJRT_Executable* executable; PJRT_Buffer_Type* output_types; size_t num_output_types;
};
struct PJRT_Executable_OutputDimensions_Args {
  PJRT_HDR; PJRT_Executable* executable; size_t num_outputs; const int64_t* dims; const size_t* dim_sizes;
};
struct PJRT_Executable_MemoryKinds_Args {
  PJRT_HDR; PJRT_Executable* executable; size_t num_values; const char* const* memory_kinds;
  const size_t* memory_kind_sizes;
};

struct PJRT_Executable_OptimizedProgram_Args { PJRT_HDR; PJRT_Executable* executable; PJRT_Program* program; };
struct PJRT_Executable_GetCostAnalysis_Args {
  PJRT_HDR; PJRT_Executable* executable; size_t num_properties; const PJRT_NamedValue* properties;
};
// Device memory first, then the same five for host memory (all 0 here: no host offloading).
struct PJRT_Executable_GetCompiledMemoryStats_Args {
  PJRT_HDR; PJRT_Executable* executable;
  int64_t generated_code_size_in_bytes; int64_t argument_size_in_bytes; int64_t output_size_in_bytes;
  int64_t alias_size_in_bytes; int64_t temp_size_in_bytes;
  int64_t host_generated_code_size_in_bytes; int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes; int64_t host_alias_size_in_bytes; int64_t host_temp_size_in_bytes;
};

struct PJRT_LoadedExecutable_Destroy_Args { PJRT_HDR; PJRT_LoadedExecutable* executable; };
struct PJRT_LoadedExecutable_IsDeleted_Args { PJRT_HDR; PJRT_LoadedExecutable* executable; bool is_deleted; };
struct PJRT_LoadedExecutable_GetExecutable_Args { PJRT_HDR; PJRT_LoadedExecutable* loaded_executable; PJRT_Executable* executable; };
struct PJRT_LoadedExecutable_AddressableDevices_Args {
  PJRT_HDR; PJRT_LoadedExecutable* executable; PJRT_Device* const* addressable_devices; size_t num_addressable_devices;
};
struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
  PJRT_HDR; PJRT_LoadedExecutable* executable; PJRT_LogicalDeviceIds* logical_ids; size_t num_logical_ids;
};
struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
  PJRT_HDR; PJRT_LoadedExecutable* executable; const char* serialized_bytes; size_t serialized_bytes_size;
  void* serialized_device_assignment; void (*serialized_device_assignment_deleter)(void*);
};
// Only the leading fields up to the donation list are declared: that is all we read, and only
// when the caller's struct_size covers them (send/recv callbacks are unsupported).
struct PJRT_ExecuteOptions {
  PJRT_HDR;
  void* send_callbacks;
  void* recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
};
struct PJRT_LoadedExecutable_Execute_Args {
  PJRT_HDR;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;
  PJRT_Event** device_complete_events;
  PJRT_Device* execute_device;
};

struct PJRT_Buffer_Destroy_Args { PJRT_HDR; PJRT_Buffer* buffer; };
struct PJRT_Buffer_ElementType_Args { PJRT_HDR; PJRT_Buffer* buffer; PJRT_Buffer_Type type; };
struct PJRT_Buffer_Bool_Args { PJRT_HDR; PJRT_Buffer* buffer; bool value; };
struct PJRT_Buffer_UnsafePointer_Args { PJRT_HDR; PJRT_Buffer* buffer; uintptr_t buffer_pointer; };
struct PJRT_Buffer_Dimensions_Args { PJRT_HDR; PJRT_Buffer* buffer; const int64_t* dims; size_t num_dims; };
struct PJRT_Buffer_DynamicDimensionIndices_Args {
  PJRT_HDR; PJRT_Buffer* buffer; const size_t* dynamic_dim_indices; size_t num_dynamic_dims;
};
struct PJRT_Buffer_OnDeviceSizeInBytes_Args { PJRT_HDR; PJRT_Buffer* buffer; size_t on_device_size_in_bytes; };
struct PJRT_Buffer_Pointer_Args { PJRT_HDR; PJRT_Buffer* buffer; void* value; };
struct PJRT_Buffer_ToHostBuffer_Args {
  PJRT_HDR; PJRT_Buffer* src; PJRT_Buffer_MemoryLayout* host_layout; void* dst; size_t dst_size;
  PJRT_Event* event;
};
struct PJRT_Buffer_CopyToMemory_Args { PJRT_HDR; PJRT_Buffer* buffer; PJRT_Memory* dst_memory; PJRT_Buffer* dst_buffer; };
struct PJRT_Buffer_CopyToDevice_Args { PJRT_HDR; PJRT_Buffer* buffer; PJRT_Device* dst_device; PJRT_Buffer* dst_buffer; };

// Shardings extension (type 19, version 1): OpSharding protos per parameter / output.
struct PJRT_Shardings_Args {
  PJRT_HDR; PJRT_Executable* executable; size_t num_values; const char* const* shardings;
  const size_t* sharding_sizes;
};
struct PJRT_Shardings_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*parameter_shardings)(PJRT_Shardings_Args*);
  PJRT_Error* (*output_shardings)(PJRT_Shardings_Args*);
};

// Layouts extension (type 4, version 4; the executable getters since API 0.81/0.93): layouts
// are opaque handles the framework reads by serializing them (jaxlib 0.10.2 parses the bytes
// as xla::Layout text, "{1,0}"). Handles from the executable getters stay owned by the
// executable; those from the buffer and default-layout getters are the caller's to destroy.
struct PJRT_Layouts_MemoryLayout;    // defined in objects.h
struct PJRT_Layouts_SerializedLayout;  // the backing of serialized bytes, defined in layouts.cc
struct PJRT_Layouts_MemoryLayout_Destroy_Args { PJRT_HDR; PJRT_Layouts_MemoryLayout* layout; };
struct PJRT_Layouts_MemoryLayout_Serialize_Args {
  PJRT_HDR; PJRT_Layouts_MemoryLayout* layout; const char* serialized_bytes;
  size_t serialized_bytes_size; PJRT_Layouts_SerializedLayout* serialized_layout;
  void (*serialized_layout_deleter)(PJRT_Layouts_SerializedLayout*);
};
struct PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args {
  PJRT_HDR; PJRT_Buffer* buffer; PJRT_Layouts_MemoryLayout* layout;
};
// Client_GetDefaultLayout and Topology_GetDefaultLayout: the same fields after the owner.
struct PJRT_Layouts_DefaultLayout_Args {
  PJRT_HDR; void* owner; PJRT_Buffer_Type type; const int64_t* dims; size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;
};
// Executable_GetOutputLayouts and Executable_GetParameterLayouts.
struct PJRT_Layouts_Executable_Args {
  PJRT_HDR; PJRT_Executable* executable; size_t num_values; PJRT_Layouts_MemoryLayout** layouts;
};
struct PJRT_Layouts_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*memory_layout_destroy)(PJRT_Layouts_MemoryLayout_Destroy_Args*);
  PJRT_Error* (*memory_layout_serialize)(PJRT_Layouts_MemoryLayout_Serialize_Args*);
  PJRT_Error* (*client_default_layout)(PJRT_Layouts_DefaultLayout_Args*);
  PJRT_Error* (*buffer_memory_layout)(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args*);
  PJRT_Error* (*topology_default_layout)(PJRT_Layouts_DefaultLayout_Args*);
  PJRT_Error* (*executable_output_layouts)(PJRT_Layouts_Executable_Args*);
  PJRT_Error* (*executable_parameter_layouts)(PJRT_Layouts_Executable_Args*);
};

// FFI extension (type 5, extension version 2): handlers of XLA's typed FFI C API registered
// by name. Register_Handler's args have no extension_start (as upstream declares them).
struct PJRT_ExecuteContext;
struct PJRT_FFI_TypeID_Register_Args {
  PJRT_HDR; const char* type_name; size_t type_name_size; int64_t type_id;
};
struct PJRT_FFI_UserData { int64_t type_id; void* data; void (*deleter)(void*); };
struct PJRT_FFI_UserData_Add_Args {
  PJRT_HDR; PJRT_ExecuteContext* context; PJRT_FFI_UserData user_data;
};
constexpr int kFfiHandlerTraitCommandBufferCompatible = 1;
struct PJRT_FFI_Register_Handler_Args {
  size_t struct_size; const char* target_name; size_t target_name_size;
  int api_version;  // 0: the untyped custom-call ABI, 1: typed FFI (XLA_FFI_Handler*)
  void* handler; const char* platform_name; size_t platform_name_size;
  int traits;  // PJRT_FFI_Handler_TraitsBits
};
struct PJRT_FFI_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*type_id_register)(PJRT_FFI_TypeID_Register_Args*);
  PJRT_Error* (*user_data_add)(PJRT_FFI_UserData_Add_Args*);
  PJRT_Error* (*register_handler)(PJRT_FFI_Register_Handler_Args*);
};

// ---- the API table ----------------------------------------------------------------------
// The 138 slots in ABI order (section 3.3). One list drives the table layout, the stubs,
// the names and the tracing trampolines, so they cannot drift apart.
#define PJRT_SLOTS(X)                                                                        \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Plugin_Initialize) X(Plugin_Attributes) \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await) X(Event_OnReady)            \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName) X(Client_ProcessIndex)           \
  X(Client_PlatformVersion) X(Client_Devices) X(Client_AddressableDevices)                   \
  X(Client_LookupDevice) X(Client_LookupAddressableDevice) X(Client_AddressableMemories)     \
  X(Client_Compile) X(Client_DefaultDeviceAssignment) X(Client_BufferFromHostBuffer)         \
  X(DeviceDescription_Id) X(DeviceDescription_ProcessIndex) X(DeviceDescription_Attributes)  \
  X(DeviceDescription_Kind) X(DeviceDescription_DebugString) X(DeviceDescription_ToString)   \
  X(Device_GetDescription) X(Device_IsAddressable) X(Device_LocalHardwareId)                 \
  X(Device_AddressableMemories) X(Device_DefaultMemory) X(Device_MemoryStats)                \
  X(Memory_Id) X(Memory_Kind) X(Memory_DebugString) X(Memory_ToString)                       \
  X(Memory_AddressableByDevices)                                                             \
  X(Executable_Destroy) X(Executable_Name) X(Executable_NumReplicas)                         \
  X(Executable_NumPartitions) X(Executable_NumOutputs) X(Executable_SizeOfGeneratedCodeInBytes) \
  X(Executable_GetCostAnalysis) X(Executable_OutputMemoryKinds) X(Executable_OptimizedProgram) \
  X(Executable_Serialize)                                                                    \
  X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable)                              \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete)                          \
  X(LoadedExecutable_IsDeleted) X(LoadedExecutable_Execute) X(Executable_DeserializeAndLoad) \
  X(LoadedExecutable_Fingerprint)                                                            \
  X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions) X(Buffer_UnpaddedDimensions)  \
  X(Buffer_DynamicDimensionIndices) X(Buffer_GetMemoryLayout) X(Buffer_OnDeviceSizeInBytes)  \
  X(Buffer_Device) X(Buffer_Memory) X(Buffer_Delete) X(Buffer_IsDeleted)                     \
  X(Buffer_CopyToDevice) X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu) X(Buffer_ReadyEvent)       \
  X(Buffer_UnsafePointer) X(Buffer_IncreaseExternalReferenceCount)                           \
  X(Buffer_DecreaseExternalReferenceCount) X(Buffer_OpaqueDeviceMemoryDataPointer)           \
  X(CopyToDeviceStream_Destroy) X(CopyToDeviceStream_AddChunk)                               \
  X(CopyToDeviceStream_TotalBytes) X(CopyToDeviceStream_GranuleSize)                         \
  X(CopyToDeviceStream_CurrentBytes)                                                         \
  X(TopologyDescription_Create) X(TopologyDescription_Destroy)                               \
  X(TopologyDescription_PlatformName) X(TopologyDescription_PlatformVersion)                 \
  X(TopologyDescription_GetDeviceDescriptions) X(TopologyDescription_Serialize)              \
  X(TopologyDescription_Attributes) X(Compile) X(Executable_OutputElementTypes)              \
  X(Executable_OutputDimensions) X(Buffer_CopyToMemory) X(Client_CreateViewOfDeviceBuffer)   \
  X(Executable_Fingerprint) X(Client_TopologyDescription) X(Executable_GetCompiledMemoryStats) \
  X(Memory_Kind_Id) X(ExecuteContext_Create) X(ExecuteContext_Destroy) X(Buffer_CopyRawToHost) \
  X(AsyncHostToDeviceTransferManager_Destroy) X(AsyncHostToDeviceTransferManager_TransferData) \
  X(Client_CreateBuffersForAsyncHostToDevice)                                                \
  X(AsyncHostToDeviceTransferManager_RetrieveBuffer) X(AsyncHostToDeviceTransferManager_Device) \
  X(AsyncHostToDeviceTransferManager_BufferCount) X(AsyncHostToDeviceTransferManager_BufferSize) \
  X(AsyncHostToDeviceTransferManager_SetBufferError)                                         \
  X(AsyncHostToDeviceTransferManager_AddMetadata) X(Client_DmaMap) X(Client_DmaUnmap)        \
  X(Client_CreateUninitializedBuffer) X(Client_UpdateGlobalProcessInfo)                      \
  X(TopologyDescription_Deserialize) X(Client_CreateAliasBuffer) X(Client_FulfillAliasBuffer) \
  X(LoadedExecutable_GetDeviceAssignment) X(Client_CreateErrorBuffer)                        \
  X(AsyncHostToDeviceTransferManager_TransferLiteral) X(Buffer_CopyRawToHostFuture)          \
  X(Device_PoisonExecution) X(Device_CreateAsyncTrackingEvent) X(AsyncTrackingEvent_Destroy) \
  X(Executable_GetCompileOptions) X(Buffer_DonateWithControlDependency) X(Event_Create)      \
  X(Event_Set) X(Device_GetAttributes) X(Client_Load)                                        \
  X(LoadedExecutable_AddressableDeviceLogicalIds) X(Buffer_Bitcast) X(Error_ForEachPayload)  \
  X(TopologyDescription_Fingerprint) X(Executable_ParameterMemoryKinds)                      \
  X(Device_ClearMemoryStats) X(TopologyDescription_MakeCanonicalShapeForMemorySpace)         \
  X(TopologyDescription_GetMemorySpaceKindIds)

// Every slot is stored as this type; the two void-returning error functions (slots 0 and 1)
// are cast in and out, which is what their callers' ABI expects of a function pointer.
typedef PJRT_Error* (*PJRT_Slot)(void* args);

struct PJRT_Api_Version { PJRT_HDR; int major_version; int minor_version; };

struct PJRT_Api {
  PJRT_HDR;
  PJRT_Api_Version pjrt_api_version;
#define OPENHLO_SLOT_FIELD(name) PJRT_Slot PJRT_##name;
  PJRT_SLOTS(OPENHLO_SLOT_FIELD)
#undef OPENHLO_SLOT_FIELD
};

}  // extern "C"

// ---- layout checks against section 3 ------------------------------------------------------
#define OPENHLO_STRUCT_SIZE(T, last) (offsetof(T, last) + sizeof(((T*)nullptr)->last))
#define OPENHLO_CHECK(T, last, n) \
  static_assert(OPENHLO_STRUCT_SIZE(T, last) == (n), #T " layout differs from PJRT 0.112")

static_assert(sizeof(PJRT_Extension_Base) == 24, "PJRT_Extension_Base");
static_assert(sizeof(PJRT_Api) == 1144 && offsetof(PJRT_Api, PJRT_Error_Destroy) == 40 &&
                  offsetof(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds) == 40 + 137 * 8,
              "PJRT_Api layout");
static_assert(sizeof(PJRT_Error_FunctionTable) == 56, "error vtable");
static_assert(sizeof(PJRT_Memory_FunctionTable) == 40, "memory vtable");
OPENHLO_CHECK(PJRT_NamedValue, value_size, 56);
static_assert(offsetof(PJRT_NamedValue, type) == 32 && offsetof(PJRT_NamedValue, int64_value) == 40,
              "PJRT_NamedValue");
OPENHLO_CHECK(PJRT_Program, format_size, 48);
OPENHLO_CHECK(PJRT_ExecuteOptions, num_non_donatable_input_indices, 72);
OPENHLO_CHECK(PJRT_Buffer_MemoryLayout_Tiled, num_tiles, 56);
OPENHLO_CHECK(PJRT_Buffer_MemoryLayout, type, 76);
static_assert(sizeof(PJRT_Buffer_MemoryLayout) == 80, "PJRT_Buffer_MemoryLayout");
OPENHLO_CHECK(PJRT_Error_Destroy_Args, error, 24);
OPENHLO_CHECK(PJRT_Error_Message_Args, message_size, 40);
OPENHLO_CHECK(PJRT_Error_GetCode_Args, code, 28);
OPENHLO_CHECK(PJRT_Error_ForEachPayload_Args, user_arg, 40);
OPENHLO_CHECK(PJRT_Plugin_Attributes_Args, num_attributes, 32);
OPENHLO_CHECK(PJRT_Event_Destroy_Args, event, 24);
OPENHLO_CHECK(PJRT_Event_IsReady_Args, is_ready, 25);
OPENHLO_CHECK(PJRT_Event_OnReady_Args, user_arg, 40);
OPENHLO_CHECK(PJRT_Event_Set_Args, error_message_size, 48);
OPENHLO_CHECK(PJRT_Client_Create_Args, kv_try_get_user_arg, 88);
OPENHLO_CHECK(PJRT_KeyValueGetCallback_Args, value_deleter_callback, 80);
OPENHLO_CHECK(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback, 72);
OPENHLO_CHECK(PJRT_KeyValuePutCallback_Args, user_arg, 64);
OPENHLO_CHECK(PJRT_ProcessInfo, error_message_size, 48);
OPENHLO_CHECK(PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos, 40);
OPENHLO_CHECK(PJRT_Client_ProcessIndex_Args, process_index, 28);
OPENHLO_CHECK(PJRT_Client_String_Args, value_size, 40);
OPENHLO_CHECK(PJRT_Client_Devices_Args, num_devices, 40);
OPENHLO_CHECK(PJRT_Client_LookupDevice_Args, device, 40);
OPENHLO_CHECK(PJRT_Client_Compile_Args, executable, 56);
OPENHLO_CHECK(PJRT_Client_DefaultDeviceAssignment_Args, default_assignment, 48);
OPENHLO_CHECK(PJRT_Client_BufferFromHostBuffer_Args, buffer, 120);
OPENHLO_CHECK(PJRT_DeviceDescription_Int_Args, value, 28);
OPENHLO_CHECK(PJRT_DeviceDescription_Attributes_Args, attributes, 40);
OPENHLO_CHECK(PJRT_DeviceDescription_String_Args, value_size, 40);
OPENHLO_CHECK(PJRT_Device_GetDescription_Args, device_description, 32);
OPENHLO_CHECK(PJRT_Device_IsAddressable_Args, is_addressable, 25);
OPENHLO_CHECK(PJRT_Device_AddressableMemories_Args, num_memories, 40);
OPENHLO_CHECK(PJRT_Device_GetAttributes_Args, attributes_deleter, 56);
OPENHLO_CHECK(PJRT_Memory_AddressableByDevices_Args, num_devices, 40);
OPENHLO_CHECK(PJRT_Executable_Count_Args, value, 32);
OPENHLO_CHECK(PJRT_Executable_OutputElementTypes_Args, num_output_types, 40);
OPENHLO_CHECK(PJRT_Executable_OutputDimensions_Args, dim_sizes, 48);
OPENHLO_CHECK(PJRT_Executable_MemoryKinds_Args, memory_kind_sizes, 48);
OPENHLO_CHECK(PJRT_Executable_OptimizedProgram_Args, program, 32);
OPENHLO_CHECK(PJRT_Executable_GetCostAnalysis_Args, properties, 40);
OPENHLO_CHECK(PJRT_Executable_GetCompiledMemoryStats_Args, host_temp_size_in_bytes, 104);
OPENHLO_CHECK(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted, 25);
OPENHLO_CHECK(PJRT_LoadedExecutable_GetExecutable_Args, executable, 32);
OPENHLO_CHECK(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args, num_logical_ids, 40);
OPENHLO_CHECK(PJRT_LoadedExecutable_GetDeviceAssignment_Args, serialized_device_assignment_deleter, 56);
OPENHLO_CHECK(PJRT_LoadedExecutable_Execute_Args, execute_device, 80);
OPENHLO_CHECK(PJRT_Buffer_ElementType_Args, type, 28);
OPENHLO_CHECK(PJRT_Buffer_Dimensions_Args, num_dims, 40);
OPENHLO_CHECK(PJRT_Buffer_UnsafePointer_Args, buffer_pointer, 32);
OPENHLO_CHECK(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes, 32);
OPENHLO_CHECK(PJRT_Buffer_ToHostBuffer_Args, event, 56);
OPENHLO_CHECK(PJRT_Buffer_CopyToMemory_Args, dst_buffer, 40);
OPENHLO_CHECK(PJRT_Shardings_Args, sharding_sizes, 48);
OPENHLO_CHECK(PJRT_Layouts_MemoryLayout_Destroy_Args, layout, 24);
OPENHLO_CHECK(PJRT_Layouts_MemoryLayout_Serialize_Args, serialized_layout_deleter, 56);
OPENHLO_CHECK(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args, layout, 32);
OPENHLO_CHECK(PJRT_Layouts_DefaultLayout_Args, layout, 56);
static_assert(offsetof(PJRT_Layouts_DefaultLayout_Args, dims) == 32, "default layout dims");
OPENHLO_CHECK(PJRT_Layouts_Executable_Args, layouts, 40);
OPENHLO_CHECK(PJRT_Layouts_Extension, executable_parameter_layouts, 80);
OPENHLO_CHECK(PJRT_FFI_TypeID_Register_Args, type_id, 40);
OPENHLO_CHECK(PJRT_FFI_UserData_Add_Args, user_data, 48);
OPENHLO_CHECK(PJRT_FFI_Register_Handler_Args, traits, 60);
static_assert(offsetof(PJRT_FFI_Register_Handler_Args, handler) == 32, "FFI handler");
OPENHLO_CHECK(PJRT_FFI_Extension, register_handler, 48);

#endif  // OPENHLO_PJRT_C_API_PJRT_ABI_H_
