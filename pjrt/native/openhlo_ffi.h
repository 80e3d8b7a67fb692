/* OpenHLO's declaration of the XLA FFI C ABI, plus helpers for writing custom kernels.

   Custom kernels (pjrt/custom_kernels) are handlers of the typed XLA FFI:
   `XLA_FFI_Error* handler(XLA_FFI_CallFrame* frame)`. This file declares that ABI from its
   public description (API version 0.3): the same struct layouts, field order, enum values
   and function table, so a handler built against XLA's own headers (jax.ffi.include_dir())
   runs unchanged on the cpu backend, and one written against this file runs on XLA too
   (except for the OpenHLO extension below). Every struct starts with its size and an
   extension chain; the table only ever grows at its end.

   Below the ABI: small inline helpers (buffers, attributes by name, errors) and
   `ohlo_parallel_for`, the runtime's thread pool as a parallel-for (an OpenHLO extension on
   the API table; without it the loop runs on the calling thread). Kernels given as source
   text are compiled with this file in front of them (do not include it yourself there); they
   are plain C or C++ without the C++ runtime library (no exceptions, no std containers).
   The layouts are checked by static_asserts in pjrt/plugins/cpu/native/ffi_call.cc. */
#ifndef OPENHLO_FFI_H_
#define OPENHLO_FFI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the XLA FFI ABI ------------------------------------------------------------------ */

typedef struct XLA_FFI_Api XLA_FFI_Api;
typedef struct XLA_FFI_InternalApi XLA_FFI_InternalApi;
typedef struct XLA_FFI_Error XLA_FFI_Error;
typedef struct XLA_FFI_ExecutionContext XLA_FFI_ExecutionContext;
typedef struct XLA_FFI_Future XLA_FFI_Future;

typedef enum {
  XLA_FFI_Extension_Metadata = 1,
  OHLO_FFI_Extension_ParallelFor = 0x4F484C /* ours: far from XLA's numbers */
} XLA_FFI_Extension_Type;

typedef struct XLA_FFI_Extension_Base {
  size_t struct_size;
  XLA_FFI_Extension_Type type;
  struct XLA_FFI_Extension_Base* next;
} XLA_FFI_Extension_Base;

typedef struct XLA_FFI_Api_Version {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int major_version;
  int minor_version;
} XLA_FFI_Api_Version;

#define OHLO_FFI_API_MAJOR 0
#define OHLO_FFI_API_MINOR 3

/* Error codes follow the usual status codes (OK 0 ... UNAUTHENTICATED 16). */
typedef enum {
  XLA_FFI_Error_Code_OK = 0,
  XLA_FFI_Error_Code_UNKNOWN = 2,
  XLA_FFI_Error_Code_INVALID_ARGUMENT = 3,
  XLA_FFI_Error_Code_INTERNAL = 13,
  XLA_FFI_Error_Code_UNIMPLEMENTED = 12
} XLA_FFI_Error_Code;

typedef struct XLA_FFI_Error_Create_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const char* message;
  XLA_FFI_Error_Code errc;
} XLA_FFI_Error_Create_Args;

typedef struct XLA_FFI_Error_GetMessage_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Error* error;
  const char* message; /* out, owned by the error */
} XLA_FFI_Error_GetMessage_Args;

typedef struct XLA_FFI_Error_Destroy_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Error* error;
} XLA_FFI_Error_Destroy_Args;

/* Element types: the values of XLA's PrimitiveType. */
typedef enum {
  XLA_FFI_DataType_INVALID = 0,
  XLA_FFI_DataType_PRED = 1,
  XLA_FFI_DataType_S8 = 2,
  XLA_FFI_DataType_S16 = 3,
  XLA_FFI_DataType_S32 = 4,
  XLA_FFI_DataType_S64 = 5,
  XLA_FFI_DataType_U8 = 6,
  XLA_FFI_DataType_U16 = 7,
  XLA_FFI_DataType_U32 = 8,
  XLA_FFI_DataType_U64 = 9,
  XLA_FFI_DataType_F16 = 10,
  XLA_FFI_DataType_F32 = 11,
  XLA_FFI_DataType_F64 = 12,
  XLA_FFI_DataType_C64 = 15,
  XLA_FFI_DataType_BF16 = 16,
  XLA_FFI_DataType_TOKEN = 17,
  XLA_FFI_DataType_C128 = 18
} XLA_FFI_DataType;

typedef struct XLA_FFI_Buffer {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
} XLA_FFI_Buffer;

typedef enum { XLA_FFI_ArgType_BUFFER = 1 } XLA_FFI_ArgType;
typedef enum { XLA_FFI_RetType_BUFFER = 1 } XLA_FFI_RetType;
typedef enum {
  XLA_FFI_AttrType_ARRAY = 1,
  XLA_FFI_AttrType_DICTIONARY = 2,
  XLA_FFI_AttrType_SCALAR = 3,
  XLA_FFI_AttrType_STRING = 4
} XLA_FFI_AttrType;

typedef struct XLA_FFI_ByteSpan {
  const char* ptr;
  size_t len;
} XLA_FFI_ByteSpan;

typedef struct XLA_FFI_Scalar {
  XLA_FFI_DataType dtype;
  void* value;
} XLA_FFI_Scalar;

typedef struct XLA_FFI_Array {
  XLA_FFI_DataType dtype;
  size_t size;
  void* data;
} XLA_FFI_Array;

typedef struct XLA_FFI_TypeId {
  int64_t type_id;
} XLA_FFI_TypeId;

typedef enum {
  XLA_FFI_ExecutionStage_INSTANTIATE = 0,
  XLA_FFI_ExecutionStage_PREPARE = 1,
  XLA_FFI_ExecutionStage_INITIALIZE = 2,
  XLA_FFI_ExecutionStage_EXECUTE = 3
} XLA_FFI_ExecutionStage;

typedef struct XLA_FFI_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_ArgType* types;
  void** args;
} XLA_FFI_Args;

typedef struct XLA_FFI_Rets {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_RetType* types;
  void** rets;
} XLA_FFI_Rets;

/* Attributes are sorted by name: handlers built with XLA's C++ binding rely on it. */
typedef struct XLA_FFI_Attrs {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_AttrType* types;
  XLA_FFI_ByteSpan** names;
  void** attrs;
} XLA_FFI_Attrs;

typedef struct XLA_FFI_CallFrame {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const XLA_FFI_Api* api;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_Args args;
  XLA_FFI_Rets rets;
  XLA_FFI_Attrs attrs;
  XLA_FFI_Future* future; /* out: asynchronous handlers; unsupported here */
} XLA_FFI_CallFrame;

/* The size a call frame reports: the public ABI counts up to `attrs` (the `future` field came
   later), and handlers built against XLA's headers insist on exactly that. */
#define OHLO_FFI_CALL_FRAME_SIZE (offsetof(XLA_FFI_CallFrame, attrs) + sizeof(XLA_FFI_Attrs))

typedef XLA_FFI_Error* XLA_FFI_Handler(XLA_FFI_CallFrame* call_frame);

typedef struct XLA_FFI_Handler_Bundle {
  XLA_FFI_Handler* instantiate;
  XLA_FFI_Handler* prepare;
  XLA_FFI_Handler* initialize;
  XLA_FFI_Handler* execute;
} XLA_FFI_Handler_Bundle;

typedef uint32_t XLA_FFI_Handler_Traits;

typedef struct XLA_FFI_Handler_Register_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ByteSpan name;
  XLA_FFI_ByteSpan platform;
  XLA_FFI_Handler_Bundle bundle;
  XLA_FFI_Handler_Traits traits;
} XLA_FFI_Handler_Register_Args;

typedef void XLA_FFI_Task(void* data);

typedef struct XLA_FFI_ThreadPool_Schedule_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_Task* task;
  void* data;
} XLA_FFI_ThreadPool_Schedule_Args;

typedef struct XLA_FFI_ThreadPool_NumThreads_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int64_t* num_threads; /* out */
} XLA_FFI_ThreadPool_NumThreads_Args;

typedef struct XLA_FFI_DeviceMemory_Allocate_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  size_t size;
  size_t alignment;
  void* data; /* out */
} XLA_FFI_DeviceMemory_Allocate_Args;

typedef struct XLA_FFI_DeviceMemory_Free_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  size_t size;
  void* data;
} XLA_FFI_DeviceMemory_Free_Args;

typedef struct XLA_FFI_RunId_Get_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int64_t run_id; /* out */
} XLA_FFI_RunId_Get_Args;

typedef struct XLA_FFI_DeviceOrdinal_Get_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int32_t device_ordinal; /* out */
} XLA_FFI_DeviceOrdinal_Get_Args;

/* Entries this runtime does not provide (streams, types, state, futures) take opaque
   argument structs and answer UNIMPLEMENTED. */
typedef XLA_FFI_Error* OHLO_FFI_Opaque_Fn(void* args);

struct XLA_FFI_Api {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Api_Version api_version;
  const XLA_FFI_InternalApi* internal_api;
  XLA_FFI_Error* (*XLA_FFI_Error_Create)(XLA_FFI_Error_Create_Args* args);
  void (*XLA_FFI_Error_GetMessage)(XLA_FFI_Error_GetMessage_Args* args);
  void (*XLA_FFI_Error_Destroy)(XLA_FFI_Error_Destroy_Args* args);
  XLA_FFI_Error* (*XLA_FFI_Handler_Register)(XLA_FFI_Handler_Register_Args* args);
  OHLO_FFI_Opaque_Fn* XLA_FFI_Stream_Get;
  OHLO_FFI_Opaque_Fn* XLA_FFI_Type_Register;
  OHLO_FFI_Opaque_Fn* XLA_FFI_ExecutionContext_Get;
  OHLO_FFI_Opaque_Fn* XLA_FFI_State_Set;
  OHLO_FFI_Opaque_Fn* XLA_FFI_State_Get;
  XLA_FFI_Error* (*XLA_FFI_DeviceMemory_Allocate)(XLA_FFI_DeviceMemory_Allocate_Args* args);
  XLA_FFI_Error* (*XLA_FFI_DeviceMemory_Free)(XLA_FFI_DeviceMemory_Free_Args* args);
  XLA_FFI_Error* (*XLA_FFI_ThreadPool_Schedule)(XLA_FFI_ThreadPool_Schedule_Args* args);
  XLA_FFI_Error* (*XLA_FFI_ThreadPool_NumThreads)(XLA_FFI_ThreadPool_NumThreads_Args* args);
  OHLO_FFI_Opaque_Fn* XLA_FFI_Future_Create;
  OHLO_FFI_Opaque_Fn* XLA_FFI_Future_SetAvailable;
  OHLO_FFI_Opaque_Fn* XLA_FFI_Future_SetError;
  XLA_FFI_Error* (*XLA_FFI_RunId_Get)(XLA_FFI_RunId_Get_Args* args);
  XLA_FFI_Error* (*XLA_FFI_DeviceOrdinal_Get)(XLA_FFI_DeviceOrdinal_Get_Args* args);
};

/* ---- the OpenHLO extension: the runtime's thread pool as a parallel-for ---------------- */

/* Runs fn(ctx, begin, end) over [0, n) in disjoint blocks of at least min_chunk items on the
   pool's threads and the calling one; returns when all are done. fn must not throw. */
typedef void OHLO_FFI_ParallelFor(int64_t n, int64_t min_chunk,
                                  void (*fn)(void* ctx, int64_t begin, int64_t end), void* ctx);

typedef struct OHLO_FFI_ParallelFor_Extension {
  XLA_FFI_Extension_Base base; /* type OHLO_FFI_Extension_ParallelFor */
  OHLO_FFI_ParallelFor* parallel_for;
  int64_t num_threads; /* threads parallel_for may use, the caller's included */
} OHLO_FFI_ParallelFor_Extension;

/* ---- helpers ----------------------------------------------------------------------------- */

static inline XLA_FFI_Buffer* ohlo_arg(XLA_FFI_CallFrame* frame, int64_t i) {
  return (XLA_FFI_Buffer*)frame->args.args[i];
}

static inline XLA_FFI_Buffer* ohlo_ret(XLA_FFI_CallFrame* frame, int64_t i) {
  return (XLA_FFI_Buffer*)frame->rets.rets[i];
}

static inline int64_t ohlo_num_elements(const XLA_FFI_Buffer* buffer) {
  int64_t n = 1;
  for (int64_t d = 0; d < buffer->rank; ++d) n *= buffer->dims[d];
  return n;
}

/* The attribute `name` (NUL-terminated), or a null pointer; *type receives its kind. */
static inline void* ohlo_attr(const XLA_FFI_CallFrame* frame, const char* name,
                              XLA_FFI_AttrType* type) {
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    const XLA_FFI_ByteSpan* key = frame->attrs.names[i];
    size_t k = 0;
    while (k < key->len && name[k] == key->ptr[k]) ++k;
    if (k == key->len && name[k] == '\0') {
      if (type) *type = frame->attrs.types[i];
      return frame->attrs.attrs[i];
    }
  }
  return 0;
}

/* A scalar attribute as a double (f32/f64/s32/s64), or `fallback` when absent. */
static inline double ohlo_attr_scalar(const XLA_FFI_CallFrame* frame, const char* name,
                                      double fallback) {
  XLA_FFI_AttrType type;
  const XLA_FFI_Scalar* scalar = (const XLA_FFI_Scalar*)ohlo_attr(frame, name, &type);
  if (!scalar || type != XLA_FFI_AttrType_SCALAR) return fallback;
  switch (scalar->dtype) {
    case XLA_FFI_DataType_F32: return *(const float*)scalar->value;
    case XLA_FFI_DataType_F64: return *(const double*)scalar->value;
    case XLA_FFI_DataType_S32: return *(const int32_t*)scalar->value;
    case XLA_FFI_DataType_S64: return (double)*(const int64_t*)scalar->value;
    default: return fallback;
  }
}

static inline XLA_FFI_Error* ohlo_error(const XLA_FFI_CallFrame* frame, const char* message) {
  XLA_FFI_Error_Create_Args args;
  args.struct_size = sizeof(args);
  args.extension_start = 0;
  args.message = message;
  args.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  return frame->api->XLA_FFI_Error_Create(&args);
}

static inline const OHLO_FFI_ParallelFor_Extension* ohlo_parallel_extension(
    const XLA_FFI_CallFrame* frame) {
  for (const XLA_FFI_Extension_Base* e = frame->api->extension_start; e; e = e->next) {
    if (e->type == OHLO_FFI_Extension_ParallelFor) {
      return (const OHLO_FFI_ParallelFor_Extension*)e;
    }
  }
  return 0;
}

static inline void ohlo_parallel_for(const XLA_FFI_CallFrame* frame, int64_t n,
                                     int64_t min_chunk,
                                     void (*fn)(void* ctx, int64_t begin, int64_t end),
                                     void* ctx) {
  const OHLO_FFI_ParallelFor_Extension* pool = ohlo_parallel_extension(frame);
  if (pool) {
    pool->parallel_for(n, min_chunk, fn, ctx);
  } else if (n > 0) {
    fn(ctx, 0, n);
  }
}

#ifdef __cplusplus
}
#endif

#endif /* OPENHLO_FFI_H_ */
