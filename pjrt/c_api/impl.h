// Internal declarations shared by the plugin's translation units: the implemented PJRT
// functions (installed over the stubs by api_table.cc) and helpers.
#ifndef OPENHLO_PJRT_C_API_IMPL_H_
#define OPENHLO_PJRT_C_API_IMPL_H_

#include <string>

#include "objects.h"

namespace openhlo {

extern const PJRT_Memory_FunctionTable kMemoryTable;
PJRT_Event* NewEvent(PJRT_Error_Code code, std::string message);  // already set
PJRT_Event* NewEvent(std::shared_ptr<Signal> signal);

// The two void functions of the API.
void ErrorDestroyImpl(PJRT_Error_Destroy_Args* args);
void ErrorMessageImpl(PJRT_Error_Message_Args* args);

// Every other implemented function, as `PJRT_Error* Name(void* args)`; X(slot, function).
#define OPENHLO_IMPLEMENTED(X)                                                   \
  X(Error_GetCode, ErrorGetCode) X(Error_ForEachPayload, ErrorForEachPayload)     \
  X(Plugin_Initialize, PluginInitialize) X(Plugin_Attributes, PluginAttributes)   \
  X(Event_Destroy, EventDestroy) X(Event_IsReady, EventIsReady)                   \
  X(Event_Error, EventError) X(Event_Await, EventAwait) X(Event_OnReady, EventOnReady) \
  X(Event_Create, EventCreate) X(Event_Set, EventSet)                             \
  X(Client_Create, ClientCreate) X(Client_Destroy, ClientDestroy)                 \
  X(Client_PlatformName, ClientPlatformName) X(Client_PlatformVersion, ClientPlatformVersion) \
  X(Client_ProcessIndex, ClientProcessIndex) X(Client_Devices, ClientDevices)     \
  X(Client_AddressableDevices, ClientAddressableDevices)                          \
  X(Client_AddressableMemories, ClientAddressableMemories)                        \
  X(Client_LookupDevice, ClientLookupDevice)                                      \
  X(Client_LookupAddressableDevice, ClientLookupAddressableDevice)                \
  X(Client_UpdateGlobalProcessInfo, ClientUpdateGlobalProcessInfo)                \
  X(Client_DefaultDeviceAssignment, ClientDefaultDeviceAssignment)                \
  X(Client_Compile, ClientCompile)                                                \
  X(Client_BufferFromHostBuffer, ClientBufferFromHostBuffer)                      \
  X(DeviceDescription_Id, DescriptionId)                                          \
  X(DeviceDescription_ProcessIndex, DescriptionProcessIndex)                      \
  X(DeviceDescription_Attributes, DescriptionAttributes)                          \
  X(DeviceDescription_Kind, DescriptionKind)                                      \
  X(DeviceDescription_DebugString, DescriptionDebugString)                        \
  X(DeviceDescription_ToString, DescriptionToString)                              \
  X(Device_GetDescription, DeviceGetDescription)                                  \
  X(Device_IsAddressable, DeviceIsAddressable)                                    \
  X(Device_LocalHardwareId, DeviceLocalHardwareId)                                \
  X(Device_AddressableMemories, DeviceAddressableMemories)                        \
  X(Device_DefaultMemory, DeviceDefaultMemory)                                    \
  X(Device_GetAttributes, DeviceGetAttributes)                                    \
  X(Memory_Id, MemoryId) X(Memory_Kind_Id, MemoryKindId) X(Memory_Kind, MemoryKind) \
  X(Memory_DebugString, MemoryDebugString) X(Memory_ToString, MemoryToString)     \
  X(Memory_AddressableByDevices, MemoryAddressableByDevices)                      \
  X(Buffer_Destroy, BufferDestroy) X(Buffer_ElementType, BufferElementType)       \
  X(Buffer_Dimensions, BufferDimensions) X(Buffer_UnpaddedDimensions, BufferDimensions) \
  X(Buffer_DynamicDimensionIndices, BufferDynamicDimensionIndices)                \
  X(Buffer_OnDeviceSizeInBytes, BufferOnDeviceSizeInBytes)                        \
  X(Buffer_Device, BufferDevice) X(Buffer_Memory, BufferMemory)                   \
  X(Buffer_Delete, BufferDelete) X(Buffer_IsDeleted, BufferIsDeleted)             \
  X(Buffer_IsOnCpu, BufferIsOnCpu) X(Buffer_ReadyEvent, BufferReadyEvent)         \
  X(Buffer_UnsafePointer, BufferUnsafePointer)                                    \
  X(Buffer_ToHostBuffer, BufferToHostBuffer)                                      \
  X(Buffer_CopyToDevice, BufferCopyToDevice) X(Buffer_CopyToMemory, BufferCopyToMemory) \
  X(Executable_Destroy, ExecutableDestroy) X(Executable_Name, ExecutableName)     \
  X(Executable_NumReplicas, ExecutableNumReplicas)                                \
  X(Executable_NumPartitions, ExecutableNumPartitions)                            \
  X(Executable_NumOutputs, ExecutableNumOutputs)                                  \
  X(Executable_SizeOfGeneratedCodeInBytes, ExecutableCodeSize)                    \
  X(Executable_OutputElementTypes, ExecutableOutputElementTypes)                  \
  X(Executable_OutputDimensions, ExecutableOutputDimensions)                      \
  X(Executable_OutputMemoryKinds, ExecutableOutputMemoryKinds)                    \
  X(Executable_Fingerprint, ExecutableFingerprint)                                \
  X(Executable_OptimizedProgram, ExecutableOptimizedProgram)                      \
  X(Executable_GetCostAnalysis, ExecutableCostAnalysis)                           \
  X(Executable_GetCompiledMemoryStats, ExecutableCompiledMemoryStats)             \
  X(LoadedExecutable_Destroy, LoadedDestroy) X(LoadedExecutable_Delete, LoadedDelete) \
  X(LoadedExecutable_IsDeleted, LoadedIsDeleted)                                  \
  X(LoadedExecutable_GetExecutable, LoadedGetExecutable)                          \
  X(LoadedExecutable_AddressableDevices, LoadedAddressableDevices)                \
  X(LoadedExecutable_AddressableDeviceLogicalIds, LoadedLogicalIds)               \
  X(LoadedExecutable_GetDeviceAssignment, LoadedGetDeviceAssignment)              \
  X(LoadedExecutable_Execute, LoadedExecute)

#define OPENHLO_DECLARE(slot, fn) PJRT_Error* fn(void* args);
OPENHLO_IMPLEMENTED(OPENHLO_DECLARE)
#undef OPENHLO_DECLARE

// The error of a call into Python that did not report success (naming `fn`), or null; and
// the error of a call that finds no Python runtime attached.
PJRT_Error* Reported(const CallResult& result, const char* fn);
PJRT_Error* Detached(const char* fn);

PJRT_Error* ExecutableOutputShardings(PJRT_Shardings_Args* args);
PJRT_Error* ExecutableParameterShardings(PJRT_Shardings_Args* args);
// The Layouts extension (layouts.cc), linked in front of `next`.
PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next);
// The FFI extension (ffi.cc), linked in front of `next`.
PJRT_Extension_Base* FfiExtension(PJRT_Extension_Base* next);

}  // namespace openhlo

#endif  // OPENHLO_PJRT_C_API_IMPL_H_
