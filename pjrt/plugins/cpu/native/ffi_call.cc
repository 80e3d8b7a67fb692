#include "ffi_call.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "pjrt/native/openhlo_ffi.h"
#include "thread_pool.h"

// What a handler reads through the API table: the error it may return, and the execution
// context (which device runs it, and which execution).
struct XLA_FFI_Error {
  XLA_FFI_Error_Code code;
  std::string message;
};

struct XLA_FFI_ExecutionContext {
  int64_t device_ordinal;
  int64_t run_id;
};

namespace openhlo::cpu {

namespace {

// The layouts of the public ABI (64-bit): a handler built against XLA's headers reads these
// offsets, so a drift here would be silent memory corruption.
static_assert(sizeof(XLA_FFI_Extension_Base) == 24);
static_assert(sizeof(XLA_FFI_Buffer) == 48 && offsetof(XLA_FFI_Buffer, dims) == 40);
static_assert(sizeof(XLA_FFI_Args) == 40 && sizeof(XLA_FFI_Rets) == 40);
static_assert(sizeof(XLA_FFI_Attrs) == 48);
static_assert(offsetof(XLA_FFI_CallFrame, stage) == 32 && offsetof(XLA_FFI_CallFrame, args) == 40);
static_assert(offsetof(XLA_FFI_CallFrame, attrs) == 120 && OHLO_FFI_CALL_FRAME_SIZE == 168);
static_assert(offsetof(XLA_FFI_Api, XLA_FFI_Error_Create) == 48);
static_assert(offsetof(XLA_FFI_Api, XLA_FFI_ThreadPool_Schedule) == 136);
static_assert(sizeof(XLA_FFI_Api) == 192);
static_assert(sizeof(XLA_FFI_ThreadPool_Schedule_Args) == 40);
static_assert(sizeof(XLA_FFI_Scalar) == 16 && sizeof(XLA_FFI_Array) == 24);

XLA_FFI_Error* make_error(XLA_FFI_Error_Code code, std::string message) {
  return new XLA_FFI_Error{code, std::move(message)};
}

XLA_FFI_Error* error_create(XLA_FFI_Error_Create_Args* args) {
  return make_error(args->errc, args->message ? args->message : "");
}

void error_get_message(XLA_FFI_Error_GetMessage_Args* args) {
  args->message = args->error->message.c_str();
}

void error_destroy(XLA_FFI_Error_Destroy_Args* args) { delete args->error; }

XLA_FFI_Error* handler_register(XLA_FFI_Handler_Register_Args*) {
  return make_error(XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "openhlo: register handlers with pjrt.custom_kernels (or "
                    "jax.ffi.register_ffi_target(..., platform='openhlo'))");
}

XLA_FFI_Error* unimplemented(void*) {
  return make_error(XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "openhlo: streams, user types, state and futures are not provided by the "
                    "cpu backend's FFI");
}

XLA_FFI_Error* memory_allocate(XLA_FFI_DeviceMemory_Allocate_Args* args) {
  const size_t align = args->alignment < 64 ? 64 : args->alignment;
  args->data = std::aligned_alloc(align, (args->size + align - 1) / align * align);
  if (args->data == nullptr && args->size != 0) {
    return make_error(XLA_FFI_Error_Code_INTERNAL, "openhlo: scratch allocation failed");
  }
  return nullptr;
}

XLA_FFI_Error* memory_free(XLA_FFI_DeviceMemory_Free_Args* args) {
  std::free(args->data);
  return nullptr;
}

XLA_FFI_Error* thread_pool_schedule(XLA_FFI_ThreadPool_Schedule_Args* args) {
  XLA_FFI_Task* task = args->task;
  void* data = args->data;
  schedule([task, data] { task(data); });
  return nullptr;
}

XLA_FFI_Error* thread_pool_num_threads(XLA_FFI_ThreadPool_NumThreads_Args* args) {
  *args->num_threads = parallel_width() - 1;  // the pool's own threads, as XLA counts them
  return nullptr;
}

XLA_FFI_Error* run_id_get(XLA_FFI_RunId_Get_Args* args) {
  args->run_id = args->ctx->run_id;
  return nullptr;
}

XLA_FFI_Error* device_ordinal_get(XLA_FFI_DeviceOrdinal_Get_Args* args) {
  args->device_ordinal = static_cast<int32_t>(args->ctx->device_ordinal);
  return nullptr;
}

void pool_parallel_for(int64_t n, int64_t min_chunk, void (*fn)(void*, int64_t, int64_t),
                       void* ctx) {
  parallel_for(n, min_chunk, [fn, ctx](int64_t b, int64_t e) { fn(ctx, b, e); });
}

const XLA_FFI_Api* api_table() {
  static OHLO_FFI_ParallelFor_Extension pool_extension = {
      {sizeof(OHLO_FFI_ParallelFor_Extension), OHLO_FFI_Extension_ParallelFor, nullptr},
      pool_parallel_for, parallel_width()};
  static const XLA_FFI_Api api = {
      sizeof(XLA_FFI_Api),
      &pool_extension.base,
      {sizeof(XLA_FFI_Api_Version), nullptr, OHLO_FFI_API_MAJOR, OHLO_FFI_API_MINOR},
      nullptr,
      error_create,
      error_get_message,
      error_destroy,
      handler_register,
      unimplemented,  // Stream_Get
      unimplemented,  // Type_Register
      unimplemented,  // ExecutionContext_Get
      unimplemented,  // State_Set
      unimplemented,  // State_Get
      memory_allocate,
      memory_free,
      thread_pool_schedule,
      thread_pool_num_threads,
      unimplemented,  // Future_Create
      unimplemented,  // Future_SetAvailable
      unimplemented,  // Future_SetError
      run_id_get,
      device_ordinal_get,
  };
  return &api;
}

XLA_FFI_DataType ffi_dtype(DType dtype) {
  switch (dtype) {
    case DType::PRED: return XLA_FFI_DataType_PRED;
    case DType::S8: return XLA_FFI_DataType_S8;
    case DType::S16: return XLA_FFI_DataType_S16;
    case DType::S32: return XLA_FFI_DataType_S32;
    case DType::S64: return XLA_FFI_DataType_S64;
    case DType::U8: return XLA_FFI_DataType_U8;
    case DType::U16: return XLA_FFI_DataType_U16;
    case DType::U32: return XLA_FFI_DataType_U32;
    case DType::U64: return XLA_FFI_DataType_U64;
    case DType::F16: return XLA_FFI_DataType_F16;
    case DType::BF16: return XLA_FFI_DataType_BF16;
    case DType::F32: return XLA_FFI_DataType_F32;
    case DType::F64: return XLA_FFI_DataType_F64;
    case DType::C64: return XLA_FFI_DataType_C64;
    case DType::C128: return XLA_FFI_DataType_C128;
    default:
      throw Unsupported(std::string("element type ") + dtype_name(dtype) +
                        " has no XLA FFI data type");
  }
}

// The attributes of one call site, laid out once as the call frame wants them.
struct AttrTable {
  std::vector<FfiAttr> attrs;  // sorted by name; owns names and payloads
  std::vector<XLA_FFI_ByteSpan> name_spans;
  std::vector<XLA_FFI_ByteSpan*> names;
  std::vector<XLA_FFI_AttrType> types;
  std::vector<XLA_FFI_Scalar> scalars;
  std::vector<XLA_FFI_Array> arrays;
  std::vector<XLA_FFI_ByteSpan> strings;
  std::vector<void*> values;

  explicit AttrTable(std::vector<FfiAttr> given) : attrs(std::move(given)) {
    std::sort(attrs.begin(), attrs.end(),
              [](const FfiAttr& a, const FfiAttr& b) { return a.name < b.name; });
    const size_t n = attrs.size();
    // reserved up front: values points into these vectors
    name_spans.reserve(n);
    scalars.reserve(n);
    arrays.reserve(n);
    strings.reserve(n);
    for (FfiAttr& attr : attrs) {
      name_spans.push_back({attr.name.data(), attr.name.size()});
      names.push_back(&name_spans.back());
      void* data = attr.payload.data();
      if (attr.kind == "string") {
        strings.push_back({attr.payload.data(), attr.payload.size()});
        types.push_back(XLA_FFI_AttrType_STRING);
        values.push_back(&strings.back());
        continue;
      }
      const DType dtype = dtype_from_name(attr.dtype);
      if (attr.kind == "scalar") {
        require(attr.payload.size() == dtype_size(dtype), "attribute " + attr.name +
                                                              ": a scalar of the wrong size");
        scalars.push_back({ffi_dtype(dtype), data});
        types.push_back(XLA_FFI_AttrType_SCALAR);
        values.push_back(&scalars.back());
      } else if (attr.kind == "array") {
        arrays.push_back({ffi_dtype(dtype), attr.payload.size() / dtype_size(dtype), data});
        types.push_back(XLA_FFI_AttrType_ARRAY);
        values.push_back(&arrays.back());
      } else {
        throw Unsupported("attribute " + attr.name + " of kind " + attr.kind +
                          " (the FFI takes scalars, arrays and strings)");
      }
    }
  }
};

std::atomic<int64_t> g_next_run_id{0};

constexpr size_t kInlineBuffers = 16;

}  // namespace

const void* ffi_api() { return api_table(); }

Step make_ffi_call_step(const std::string& target, uintptr_t handler,
                        std::vector<TensorSpec> operands, std::vector<TensorSpec> results,
                        std::vector<FfiAttr> attrs) {
  if (handler == 0) throw Unsupported("custom kernel " + target + " has no handler");
  auto fn = reinterpret_cast<XLA_FFI_Handler*>(handler);
  struct Site {
    std::string target;
    std::vector<TensorSpec> operands, results;
    std::vector<XLA_FFI_DataType> in_types, out_types;
    AttrTable attrs;
    std::vector<XLA_FFI_ArgType> arg_kinds;
    std::vector<XLA_FFI_RetType> ret_kinds;
  };
  auto site = std::make_shared<Site>(Site{target, std::move(operands), std::move(results), {},
                                          {}, AttrTable(std::move(attrs)), {}, {}});
  for (const auto& t : site->operands) site->in_types.push_back(ffi_dtype(t.dtype));
  for (const auto& t : site->results) site->out_types.push_back(ffi_dtype(t.dtype));
  site->arg_kinds.assign(site->operands.size(), XLA_FFI_ArgType_BUFFER);
  site->ret_kinds.assign(site->results.size(), XLA_FFI_RetType_BUFFER);
  return [fn, site](ExecContext& ctx, const Array* ins, Array* outs) {
    const size_t num_in = site->operands.size();
    const size_t num_out = site->results.size();
    XLA_FFI_Buffer inline_buffers[kInlineBuffers];
    void* inline_pointers[kInlineBuffers];
    std::unique_ptr<XLA_FFI_Buffer[]> heap_buffers;
    std::unique_ptr<void*[]> heap_pointers;
    XLA_FFI_Buffer* buffers = inline_buffers;
    void** pointers = inline_pointers;
    if (num_in + num_out > kInlineBuffers) {
      heap_buffers.reset(new XLA_FFI_Buffer[num_in + num_out]);
      heap_pointers.reset(new void*[num_in + num_out]);
      buffers = heap_buffers.get();
      pointers = heap_pointers.get();
    }
    auto describe = [&](size_t i, const TensorSpec& spec, XLA_FFI_DataType type, void* data) {
      buffers[i] = {sizeof(XLA_FFI_Buffer), nullptr, type, data,
                    static_cast<int64_t>(spec.shape.size()),
                    const_cast<int64_t*>(spec.shape.data())};
      pointers[i] = &buffers[i];
    };
    for (size_t i = 0; i < num_in; ++i) {
      describe(i, site->operands[i], site->in_types[i], const_cast<void*>(ins[i].raw()));
    }
    for (size_t i = 0; i < num_out; ++i) {
      if (!outs[i].defined()) outs[i] = allocate(site->results[i].dtype, site->results[i].shape);
      describe(num_in + i, site->results[i], site->out_types[i], outs[i].raw());
    }
    XLA_FFI_ExecutionContext context{ctx.device_ordinal,
                                     g_next_run_id.fetch_add(1, std::memory_order_relaxed)};
    AttrTable& attrs = site->attrs;
    XLA_FFI_CallFrame frame = {
        OHLO_FFI_CALL_FRAME_SIZE,
        nullptr,
        api_table(),
        &context,
        XLA_FFI_ExecutionStage_EXECUTE,
        {sizeof(XLA_FFI_Args), nullptr, static_cast<int64_t>(num_in), site->arg_kinds.data(),
         pointers},
        {sizeof(XLA_FFI_Rets), nullptr, static_cast<int64_t>(num_out), site->ret_kinds.data(),
         pointers + num_in},
        {sizeof(XLA_FFI_Attrs), nullptr, static_cast<int64_t>(attrs.values.size()),
         attrs.types.data(), attrs.names.data(), attrs.values.data()},
        nullptr,
    };
    if (XLA_FFI_Error* error = fn(&frame)) {
      std::string message = "custom kernel " + site->target + " failed: " + error->message;
      delete error;
      throw ExecError(message);
    }
  };
}

}  // namespace openhlo::cpu
