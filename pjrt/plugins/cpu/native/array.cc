#include "array.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <iterator>
#include <mutex>
#include <new>

namespace openhlo::cpu {

namespace {
std::atomic<int64_t> g_live_count{0};
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
constexpr size_t kAlignment = 64;
// Large arrays go on transparent huge pages (as numpy does): first-touch page faults of
// 4 KiB pages otherwise dominate kernels that write fresh multi-megabyte results.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeThreshold = size_t{4} << 20;

// Freed large blocks are kept for reuse (as XLA's and PyTorch's allocators do): a fresh
// multi-megabyte block costs a page fault per page on first touch, which for a 1024^2
// matmul result was a third of the matmul's time. Blocks are reused only at exactly the
// same rounded size; at most kCacheBytes are kept, the oldest given back first.
constexpr size_t kCacheMinBytes = size_t{1} << 20;
constexpr size_t kCacheBytes = size_t{256} << 20;

class BlockCache {
 public:
  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (it->second == rounded) {
        void* p = it->first;
        cached_ -= rounded;
        blocks_.erase(it);
        return p;
      }
    }
    return nullptr;
  }
  // Keeps the block, or frees it (and older blocks) when the cache would overflow.
  void give(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    if (rounded > kCacheBytes) {
      std::free(p);
      return;
    }
    while (cached_ + rounded > kCacheBytes && !blocks_.empty()) {
      std::free(blocks_.front().first);
      cached_ -= blocks_.front().second;
      blocks_.pop_front();
    }
    blocks_.emplace_back(p, rounded);
    cached_ += rounded;
  }

 private:
  std::mutex mu_;
  std::deque<std::pair<void*, size_t>> blocks_;
  size_t cached_ = 0;
};

BlockCache& block_cache() {
  static auto* cache = new BlockCache();  // leaked: storages may die during exit
  return *cache;
}

size_t rounded_size(size_t bytes, size_t alignment) {
  // aligned_alloc needs a size that is a multiple of the alignment (and non-zero).
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return rounded == 0 ? alignment : rounded;
}

size_t alignment_for(size_t bytes) { return bytes >= kHugeThreshold ? kHugePage : kAlignment; }

// Note [small block cache]: a loop the executor runs allocates a few small results per
// iteration (a counter, a predicate, a step's value); aligned_alloc + free of those (and
// malloc + free of their shared_ptr control blocks) were about a third of an iteration's
// time. Freed blocks up to kSmallMaxBytes are kept per thread, per 64-byte size class, at
// most kSmallPerClass each, and handed out again on the same thread (a block freed on
// another thread joins that thread's lists). A thread's lists are freed when it ends;
// blocks freed after that (during exit) go back to the C library.
constexpr size_t kSmallMaxBytes = 1024;
constexpr size_t kSmallClasses = kSmallMaxBytes / kAlignment;
constexpr int kSmallPerClass = 32;

// Trivially destructible (and zero-initialized), so a block freed after the thread's
// destructors ran still reads `state` and goes back to the C library; one thread-local
// access per allocation.
struct SmallBlocks {
  enum State : uint8_t { kUnused, kLive, kGone };
  void* blocks[kSmallClasses][kSmallPerClass];
  int count[kSmallClasses];
  State state;
};

thread_local SmallBlocks t_small_blocks;

struct SmallBlocksRelease {
  ~SmallBlocksRelease() {
    SmallBlocks& lists = t_small_blocks;
    lists.state = SmallBlocks::kGone;
    for (size_t c = 0; c < kSmallClasses; ++c) {
      for (int i = 0; i < lists.count[c]; ++i) std::free(lists.blocks[c][i]);
      lists.count[c] = 0;
    }
  }
};

SmallBlocks* small_blocks() {
  SmallBlocks* lists = &t_small_blocks;
  if (lists->state == SmallBlocks::kLive) return lists;
  if (lists->state == SmallBlocks::kGone) return nullptr;
  thread_local SmallBlocksRelease release;  // the first use registers the release at exit
  (void)release;
  lists->state = SmallBlocks::kLive;
  return lists;
}

// A kept block of `rounded` bytes (a multiple of kAlignment), or nullptr.
void* take_small(size_t rounded) {
  if (rounded > kSmallMaxBytes) return nullptr;
  SmallBlocks* lists = small_blocks();
  const size_t c = rounded / kAlignment - 1;
  if (lists == nullptr || lists->count[c] == 0) return nullptr;
  return lists->blocks[c][--lists->count[c]];
}

// Keeps the block `p` of `rounded` bytes for take_small, or frees it.
void give_small(void* p, size_t rounded) {
  SmallBlocks* lists = rounded <= kSmallMaxBytes ? small_blocks() : nullptr;
  const size_t c = rounded / kAlignment - 1;
  if (lists != nullptr && lists->count[c] < kSmallPerClass) {
    lists->blocks[c][lists->count[c]++] = p;
  } else {
    std::free(p);
  }
}

// The allocator of an array's shared Storage (its control block and the Storage in one
// small block), from the same per-thread lists. `inline_bytes` more (64-byte aligned) follow
// the control block for an Inline storage's data; the shared_ptr keeps a copy of the
// allocator, so the block is given back at the size it was taken at.
template <class T>
struct SmallBlockAllocator {
  using value_type = T;
  size_t inline_bytes = 0;
  explicit SmallBlockAllocator(size_t bytes = 0) : inline_bytes(bytes) {}
  template <class U>
  SmallBlockAllocator(const SmallBlockAllocator<U>& other)  // NOLINT: rebinding is implicit
      : inline_bytes(other.inline_bytes) {}
  size_t block_bytes(size_t n) const {
    const size_t head = rounded_size(n * sizeof(T), kAlignment);
    return inline_bytes == 0 ? head : head + rounded_size(inline_bytes, kAlignment);
  }
  T* allocate(size_t n) {
    const size_t rounded = block_bytes(n);
    void* p = take_small(rounded);
    if (p == nullptr) p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { give_small(p, block_bytes(n)); }
  template <class U>
  bool operator==(const SmallBlockAllocator<U>& other) const {
    return inline_bytes == other.inline_bytes;
  }
  template <class U>
  bool operator!=(const SmallBlockAllocator<U>& other) const { return !(*this == other); }
};

// Arrays up to this many bytes are Inline storage: with the control block (about 64 bytes)
// they fit a small block, so a loop's small results cost one take_small and one give_small.
constexpr size_t kInlineMaxBytes = kSmallMaxBytes - 2 * kAlignment;

// Memory statistics of a Storage made or freed.
void count_live(size_t bytes) {
  g_live_count.fetch_add(1, std::memory_order_relaxed);
  const int64_t live =
      g_live_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
      static_cast<int64_t>(bytes);
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void count_freed(size_t bytes) {
  g_live_count.fetch_sub(1, std::memory_order_relaxed);
  g_live_bytes.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

}  // namespace

size_t dtype_size(DType dtype) { return kDTypeInfo[static_cast<int>(dtype)].size; }
const char* dtype_name(DType dtype) { return kDTypeInfo[static_cast<int>(dtype)].name; }

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < static_cast<int>(std::size(kDTypeInfo)); ++i) {
    if (name == kDTypeInfo[i].name) return static_cast<DType>(i);
  }
  throw std::invalid_argument("element type " + name + " is not stored natively");
}

[[noreturn]] void throw_size_overflow(const Shape& shape, size_t element_size) {
  std::string text = "shape [";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  text += "]";
  if (element_size == 0) {
    throw std::length_error(text + ": its element count does not fit in int64");
  }
  throw std::length_error(text + " of " + std::to_string(element_size) +
                          "-byte elements: its size in bytes does not fit in int64");
}

Storage::Storage(size_t bytes) : nbytes(bytes) {
  const size_t alignment = alignment_for(bytes);
  const size_t rounded = rounded_size(bytes, alignment);
  data = bytes >= kCacheMinBytes ? block_cache().take(rounded) : take_small(rounded);
  if (data == nullptr) {
    data = std::aligned_alloc(alignment, rounded);
    if (data == nullptr) throw std::bad_alloc();
    if (alignment == kHugePage) madvise(data, rounded, MADV_HUGEPAGE);  // a hint; may fail
  }
  count_live(bytes);
}

// The bytes start at the first 64-byte boundary after the Storage: the control block holding
// it starts on one and SmallBlockAllocator gave it rounded_size(bytes) more after its own
// rounded size.
Storage::Storage(size_t bytes, Inline) : nbytes(bytes), inline_data(true) {
  const auto end = reinterpret_cast<uintptr_t>(this + 1);
  data = reinterpret_cast<void*>((end + kAlignment - 1) / kAlignment * kAlignment);
  count_live(bytes);
}

Storage::~Storage() {
  if (!owned) return;
  count_freed(nbytes);
  if (inline_data) return;  // goes with the control block
  const size_t rounded = rounded_size(nbytes, alignment_for(nbytes));
  if (nbytes >= kCacheMinBytes) {
    block_cache().give(data, rounded);
  } else {
    give_small(data, rounded);
  }
}

int64_t live_storage_count() { return g_live_count.load(); }
int64_t live_storage_bytes() { return g_live_bytes.load(); }
int64_t peak_storage_bytes() { return g_peak_bytes.load(); }
void reset_peak_storage_bytes() { g_peak_bytes.store(g_live_bytes.load()); }

Array allocate(DType dtype, const Shape& shape) {
  Array a;
  a.dtype = dtype;
  a.shape = shape;
  const size_t bytes = num_bytes(dtype, shape);
  if (bytes <= kInlineMaxBytes) {
    a.storage = std::allocate_shared<Storage>(SmallBlockAllocator<Storage>(bytes), bytes,
                                             Storage::Inline{});
  } else {
    a.storage = std::allocate_shared<Storage>(SmallBlockAllocator<Storage>(), bytes);
  }
  return a;
}

Array copy_array(const Array& array) {
  Array copy = allocate(array.dtype, array.shape);
  if (copy.nbytes() > 0) std::memcpy(copy.raw(), array.raw(), copy.nbytes());
  return copy;
}

Array allocate_zeroed(DType dtype, const Shape& shape) {
  Array a = allocate(dtype, shape);
  std::memset(a.raw(), 0, a.nbytes());
  return a;
}

}  // namespace openhlo::cpu
