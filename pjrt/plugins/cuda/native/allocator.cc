#include "allocator.h"

#include <algorithm>

namespace openhlo_cuda {

namespace {
constexpr size_t kSmallRounding = 512;
constexpr size_t kLargeThreshold = size_t(1) << 20;
constexpr size_t kLargeRounding = size_t(2) << 20;

size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
}  // namespace

size_t CachingAllocator::size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  return bytes < kLargeThreshold ? round_up(bytes, kSmallRounding)
                                 : round_up(bytes, kLargeRounding);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

std::shared_ptr<void> CachingAllocator::allocate(size_t bytes, CUdeviceptr preferred) {
  const size_t rounded = size_class(bytes);
  CUdeviceptr ptr = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocations++;
    auto it = free_lists_.find(rounded);
    if (it != free_lists_.end() && !it->second.empty()) {
      std::vector<CUdeviceptr>& blocks = it->second;
      auto chosen = preferred != 0 ? std::find(blocks.begin(), blocks.end(), preferred)
                                   : blocks.end();
      if (chosen == blocks.end()) {
        chosen = blocks.end() - 1;  // the most recently freed
      }
      ptr = *chosen;
      blocks.erase(chosen);
      stats_.cache_hits++;
      stats_.bytes_cached -= rounded;
    } else {
      driver_->check(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
      CUresult result = driver_->cuMemAlloc(&ptr, rounded);
      if (result == kCudaErrorOutOfMemory) {
        release_cached_locked();
        result = driver_->cuMemAlloc(&ptr, rounded);
      }
      driver_->check(result, "cuMemAlloc");
      stats_.driver_allocations++;
    }
    stats_.bytes_in_use += rounded;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }
  // The deleter keeps the allocator alive as long as a block of it is.
  std::shared_ptr<CachingAllocator> self = shared_from_this();
  return std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)),
                               [self, rounded](void* p) {
                                 self->free_block(reinterpret_cast<uintptr_t>(p), rounded);
                               });
}

void CachingAllocator::free_block(CUdeviceptr ptr, size_t rounded) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_lists_[rounded].push_back(ptr);
  stats_.bytes_in_use -= rounded;
  stats_.bytes_cached += rounded;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  if (free_lists_.empty()) {
    return;
  }
  driver_->cuCtxSetCurrent(context_);
  for (auto& [rounded, pointers] : free_lists_) {
    for (CUdeviceptr ptr : pointers) {
      // A failing free while releasing is not recoverable; the block is gone either way.
      driver_->cuMemFree(ptr);
      stats_.driver_frees++;
      stats_.bytes_cached -= rounded;
    }
  }
  free_lists_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace openhlo_cuda
