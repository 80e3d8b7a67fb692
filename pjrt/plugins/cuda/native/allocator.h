// A caching device allocator: freed blocks go to a free list per size class and are handed
// out again without a driver call (cuMemAlloc synchronizes the device; a training step
// allocating hundreds of temporaries must not pay that each time).
//
// Size classes: requests round up to 512 bytes below 1 MiB and to 2 MiB above, so a block
// is reused only for requests of its own class (no splitting; the waste is bounded by the
// rounding). Every block is used on the device's one stream, so a block freed while a
// kernel still reads it is safe to hand out again: the next user's work is queued behind.
// When the driver is out of memory the cache is released and the allocation retried once.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "driver_api.h"

namespace openhlo_cuda {

struct AllocatorStats {
  size_t bytes_in_use = 0;       // rounded sizes of the live blocks
  size_t peak_bytes_in_use = 0;
  size_t bytes_cached = 0;       // freed blocks kept for reuse
  size_t allocations = 0;        // requests served
  size_t cache_hits = 0;         // requests served from a free list
  size_t driver_allocations = 0; // cuMemAlloc calls that succeeded
  size_t driver_frees = 0;
};

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  // Driver calls are made with `context` current (the caller's thread may have another).
  CachingAllocator(std::shared_ptr<DriverApi> driver, CUcontext context)
      : driver_(std::move(driver)), context_(context) {}
  ~CachingAllocator();

  // A block of at least `bytes` (at least 1); freed back to the cache when the last owner
  // lets go. Throws CudaError when the device is out of memory even with the cache released.
  // A nonzero `preferred` is a block of this allocator: when it is cached in the request's
  // size class it is the one handed out (a CUDA graph replays only on the addresses it was
  // captured with), else any block is.
  std::shared_ptr<void> allocate(size_t bytes, CUdeviceptr preferred = 0);

  // Return every cached block to the driver (the live ones stay).
  void release_cached();

  AllocatorStats stats() const;
  static size_t size_class(size_t bytes);

 private:
  void free_block(CUdeviceptr ptr, size_t rounded);
  void release_cached_locked();

  std::shared_ptr<DriverApi> driver_;
  CUcontext context_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<CUdeviceptr>> free_lists_;
  AllocatorStats stats_;
};

// The device address a block returned by allocate() stands for.
inline CUdeviceptr device_address(const std::shared_ptr<void>& block) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(block.get()));
}

}  // namespace openhlo_cuda
