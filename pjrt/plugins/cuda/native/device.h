// One CUDA device as the runtime uses it: its primary context (shared with other users of
// the driver in the process, such as PyTorch or JAX, so pointers can be exchanged), one
// stream that all work of the runtime is queued on (stream order makes the caching
// allocator's reuse safe), the allocator, transfers, events and a cuBLAS handle.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "allocator.h"
#include "driver_api.h"

namespace openhlo_cuda {

// A device array: a block of the caching allocator and its size in bytes. Several
// DeviceBuffers may share a block (a result that is an argument passed through); buffers
// are immutable once their defining work is queued, so sharing is safe.
struct DeviceBuffer {
  std::shared_ptr<void> block;
  size_t bytes = 0;
  CUdeviceptr address() const { return device_address(block); }
};

// Completion of the work queued on a stream before it was recorded.
class Event {
 public:
  Event(std::shared_ptr<DriverApi> driver, CUcontext context, CUstream stream);
  ~Event();
  bool is_ready() const;
  void synchronize() const;

 private:
  std::shared_ptr<DriverApi> driver_;
  CUcontext context_;
  CUevent event_ = nullptr;
};

class Device {
 public:
  Device(std::shared_ptr<DriverApi> driver, int ordinal, std::string cublas_path);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Makes the device's context current on the calling thread (driver calls need it).
  void make_current() const;

  // `preferred`: a freed block to take back if the cache still holds it (allocator.h).
  DeviceBuffer allocate(size_t bytes, CUdeviceptr preferred = 0);
  // Host -> device and back; both wait for the copy (the host memory may go away after).
  void upload(const DeviceBuffer& dst, const void* host, size_t bytes);
  void download(void* host, const DeviceBuffer& src, size_t bytes);
  void copy_async(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  void synchronize();
  std::shared_ptr<Event> record_event();

  // The cuBLAS handle bound to the stream, created on first use with a workspace of its own
  // (so that a gemm inside a CUDA graph capture allocates nothing).
  cublasHandle cublas_handle();
  const CublasApi& cublas() const { return *cublas_; }

  const std::shared_ptr<DriverApi>& driver() const { return driver_; }
  CUcontext context() const { return context_; }
  CUstream stream() const { return stream_; }
  CachingAllocator& allocator() { return *allocator_; }
  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  int compute_capability() const { return compute_capability_; }
  int multiprocessors() const { return multiprocessors_; }
  size_t total_memory() const;

 private:
  std::shared_ptr<DriverApi> driver_;
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::shared_ptr<CachingAllocator> allocator_;
  std::string name_;
  int compute_capability_ = 0;
  int multiprocessors_ = 0;
  std::string cublas_path_;
  std::mutex cublas_mutex_;
  std::unique_ptr<CublasApi> cublas_;
  cublasHandle cublas_handle_ = nullptr;
  DeviceBuffer cublas_workspace_;
};

}  // namespace openhlo_cuda
