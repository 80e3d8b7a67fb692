// Buffers: host-memory arrays, dense row-major. Transfers copy synchronously, so every event
// they return is born ready and the host buffer is free as soon as the call returns.
#include <cstring>
#include <string>

#include "counters.h"
#include "impl.h"

namespace openhlo {
namespace {

template <typename T>
T* Args(void* a) { return static_cast<T*>(a); }

// Copies an array of `dims` between two layouts given by byte strides (either may be
// negative or non-dense: numpy views reach BufferFromHostBuffer as they are).
void CopyStrided(const char* src, const int64_t* src_strides, char* dst, const int64_t* dst_strides,
                 const std::vector<int64_t>& dims, size_t rank, size_t elem, size_t axis = 0) {
  if (axis == rank) {
    std::memcpy(dst, src, elem);
    return;
  }
  for (int64_t i = 0; i < dims[axis]; ++i)
    CopyStrided(src + i * src_strides[axis], src_strides, dst + i * dst_strides[axis], dst_strides,
                dims, rank, elem, axis + 1);
}

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims, size_t elem) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = static_cast<int64_t>(elem);
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

PJRT_Error* Deleted(const char* fn) {
  return MakeError(PJRT_FAILED_PRECONDITION, std::string("openhlo ") + fn + ": buffer was deleted");
}

// A buffer can only live on this process's devices (a multi-process client lists the others
// too); moving data between processes is not a transfer the plugin offers.
PJRT_Error* NotAddressable(const PJRT_Device* device, const char* fn) {
  return MakeError(PJRT_INVALID_ARGUMENT,
                   std::string("openhlo ") + fn + ": " + device->description.to_string +
                       " belongs to another process: buffers live on this process's devices");
}

PJRT_Error* CopyTo(PJRT_Buffer* src, PJRT_Device* device, PJRT_Buffer** out, const char* fn) {
  if (src->deleted) return Deleted(fn);
  if (!device->addressable) return NotAddressable(device, fn);
  if (PJRT_Error* failed = AwaitDefined(src, fn)) return failed;
  PJRT_Buffer* dst = NewBuffer(src->type, src->dims.data(), src->dims.size(), device);
  std::memcpy(dst->data(), src->data(), src->nbytes);
  *out = dst;
  return nullptr;
}

}  // namespace

PJRT_Error* ClientBufferFromHostBuffer(void* p) {
  auto* a = Args<PJRT_Client_BufferFromHostBuffer_Args>(p);
  size_t elem = ElementSize(a->type);
  if (elem == 0)
    return MakeError(PJRT_UNIMPLEMENTED, "openhlo PJRT_Client_BufferFromHostBuffer: element type " +
                                             std::to_string(a->type) + " is not supported");
  if (a->device_layout != nullptr)
    return MakeError(PJRT_UNIMPLEMENTED,
                     "openhlo PJRT_Client_BufferFromHostBuffer: device layouts are not supported");
  PJRT_Device* device = a->device;
  if (device == nullptr && a->memory != nullptr)
    device = reinterpret_cast<Memory*>(a->memory)->devices.at(0);
  if (device == nullptr) device = a->client->addressable.at(0);
  if (!device->addressable) return NotAddressable(device, "PJRT_Client_BufferFromHostBuffer");
  PJRT_Buffer* buffer = NewBuffer(a->type, a->dims, a->num_dims, device);
  std::vector<int64_t> dense = DenseStrides(buffer->dims, elem);
  if (a->byte_strides != nullptr && a->num_byte_strides != a->num_dims) {
    delete buffer;
    return MakeError(PJRT_INVALID_ARGUMENT,
                     "openhlo PJRT_Client_BufferFromHostBuffer: " + std::to_string(a->num_byte_strides) +
                         " byte strides for a rank-" + std::to_string(a->num_dims) + " array");
  }
  if (a->byte_strides == nullptr ||
      std::equal(dense.begin(), dense.end(), a->byte_strides))
    std::memcpy(buffer->data(), a->data, buffer->nbytes);
  else if (buffer->nbytes > 0)
    CopyStrided(static_cast<const char*>(a->data), a->byte_strides, buffer->data(), dense.data(),
                buffer->dims, buffer->dims.size(), elem);
  Count(kTransfersToDevice);
  Count(kBytesToDevice, static_cast<int64_t>(buffer->nbytes));
  a->buffer = buffer;
  a->done_with_host_buffer = NewEvent(PJRT_OK, "");
  return nullptr;
}

PJRT_Error* BufferDestroy(void* p) { delete Args<PJRT_Buffer_Destroy_Args>(p)->buffer; return nullptr; }
PJRT_Error* BufferElementType(void* p) {
  auto* a = Args<PJRT_Buffer_ElementType_Args>(p);
  a->type = a->buffer->type;
  return nullptr;
}
PJRT_Error* BufferDimensions(void* p) {
  auto* a = Args<PJRT_Buffer_Dimensions_Args>(p);
  a->dims = a->buffer->dims.data();
  a->num_dims = a->buffer->dims.size();
  return nullptr;
}
PJRT_Error* BufferDynamicDimensionIndices(void* p) {
  auto* a = Args<PJRT_Buffer_DynamicDimensionIndices_Args>(p);
  a->dynamic_dim_indices = nullptr;  // static shapes only
  a->num_dynamic_dims = 0;
  return nullptr;
}
PJRT_Error* BufferOnDeviceSizeInBytes(void* p) {
  auto* a = Args<PJRT_Buffer_OnDeviceSizeInBytes_Args>(p);
  if (a->buffer->deleted) return Deleted("PJRT_Buffer_OnDeviceSizeInBytes");
  a->on_device_size_in_bytes = a->buffer->nbytes;
  return nullptr;
}
PJRT_Error* BufferDevice(void* p) {
  auto* a = Args<PJRT_Buffer_Pointer_Args>(p);
  a->value = a->buffer->device;
  return nullptr;
}
PJRT_Error* BufferMemory(void* p) {
  auto* a = Args<PJRT_Buffer_Pointer_Args>(p);
  a->value = &a->buffer->device->memory->base;
  return nullptr;
}
PJRT_Error* BufferDelete(void* p) {
  auto* buffer = Args<PJRT_Buffer_Destroy_Args>(p)->buffer;
  buffer->Free();
  buffer->deleted = true;
  return nullptr;
}
PJRT_Error* BufferIsDeleted(void* p) {
  auto* a = Args<PJRT_Buffer_Bool_Args>(p);
  a->value = a->buffer->deleted;
  return nullptr;
}
// Not "on CPU" for the framework: true would invite zero-copy numpy views whose lifetime
// jaxlib does not tie to ours.
PJRT_Error* BufferIsOnCpu(void* p) { Args<PJRT_Buffer_Bool_Args>(p)->value = false; return nullptr; }
// The host address of the data (jaxlib asks for it, e.g. for buffer identity checks); it
// stays valid until the buffer is deleted or destroyed.
PJRT_Error* BufferUnsafePointer(void* p) {
  auto* a = Args<PJRT_Buffer_UnsafePointer_Args>(p);
  if (a->buffer->deleted) return Deleted("PJRT_Buffer_UnsafePointer");
  // A result still being computed has no memory yet: it is handed over when done.
  if (PJRT_Error* failed = AwaitDefined(a->buffer, "PJRT_Buffer_UnsafePointer")) return failed;
  a->buffer_pointer = reinterpret_cast<uintptr_t>(a->buffer->data());
  return nullptr;
}
PJRT_Error* BufferReadyEvent(void* p) {
  auto* a = Args<PJRT_Buffer_Pointer_Args>(p);
  const PJRT_Buffer* buffer = a->buffer;
  a->value = buffer->defined != nullptr ? NewEvent(buffer->defined) : NewEvent(PJRT_OK, "");
  return nullptr;
}

PJRT_Error* BufferToHostBuffer(void* p) {
  auto* a = Args<PJRT_Buffer_ToHostBuffer_Args>(p);
  PJRT_Buffer* src = a->src;
  if (src->deleted) return Deleted("PJRT_Buffer_ToHostBuffer");
  const int64_t* dst_strides = nullptr;
  if (a->host_layout != nullptr) {
    if (a->host_layout->type == PJRT_LAYOUT_STRIDES) {
      if (a->host_layout->strides.num_byte_strides != src->dims.size())
        return MakeError(PJRT_INVALID_ARGUMENT,
                         "openhlo PJRT_Buffer_ToHostBuffer: host layout rank differs from the buffer's");
      dst_strides = a->host_layout->strides.byte_strides;
    } else {
      // A tiled layout without tiles and with a descending minor_to_major is row-major.
      const auto& t = a->host_layout->tiled;
      bool row_major = t.num_tiles == 0 && t.minor_to_major_size == src->dims.size();
      for (size_t i = 0; row_major && i < t.minor_to_major_size; ++i)
        row_major = t.minor_to_major[i] == static_cast<int64_t>(src->dims.size() - 1 - i);
      if (!row_major)
        return MakeError(PJRT_UNIMPLEMENTED,
                         "openhlo PJRT_Buffer_ToHostBuffer: only row-major host layouts are supported");
    }
  }
  // The size query: dst == NULL asks how many bytes the copy needs.
  if (a->dst == nullptr) {
    a->dst_size = src->nbytes;
    return nullptr;
  }
  // Copied at once (the caller may read dst as soon as the event fires): wait for the
  // execution computing the buffer, which runs on the dispatch thread without Python.
  if (PJRT_Error* failed = AwaitDefined(src, "PJRT_Buffer_ToHostBuffer")) return failed;
  if (dst_strides == nullptr) {
    if (a->dst_size < src->nbytes)
      return MakeError(PJRT_INVALID_ARGUMENT, "openhlo PJRT_Buffer_ToHostBuffer: destination holds " +
                                                  std::to_string(a->dst_size) + " bytes, need " +
                                                  std::to_string(src->nbytes));
    std::memcpy(a->dst, src->data(), src->nbytes);
  } else if (src->nbytes > 0) {
    size_t elem = ElementSize(src->type);
    std::vector<int64_t> dense = DenseStrides(src->dims, elem);
    CopyStrided(src->data(), dense.data(), static_cast<char*>(a->dst), dst_strides, src->dims,
                src->dims.size(), elem);
  }
  Count(kTransfersToHost);
  Count(kBytesToHost, static_cast<int64_t>(src->nbytes));
  a->event = NewEvent(PJRT_OK, "");
  return nullptr;
}

PJRT_Error* BufferCopyToDevice(void* p) {
  auto* a = Args<PJRT_Buffer_CopyToDevice_Args>(p);
  return CopyTo(a->buffer, a->dst_device, &a->dst_buffer, "PJRT_Buffer_CopyToDevice");
}
PJRT_Error* BufferCopyToMemory(void* p) {
  auto* a = Args<PJRT_Buffer_CopyToMemory_Args>(p);
  return CopyTo(a->buffer, reinterpret_cast<Memory*>(a->dst_memory)->devices.at(0), &a->dst_buffer,
                "PJRT_Buffer_CopyToMemory");
}

}  // namespace openhlo
