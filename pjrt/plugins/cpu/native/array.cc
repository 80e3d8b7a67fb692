#include "array.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <iterator>
#include <mutex>
#include <new>
#include <vector>

namespace openhlo::cpu {

namespace {
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
// iteration (a counter, a predicate, a step's value); aligned_alloc + free of those (and of
// their Storage headers) were about a third of an iteration's time. Freed blocks up to
// kSmallMaxBytes are kept per thread, per 64-byte size class, at most kSmallPerClass each,
// and handed out again on the same thread (a block freed on another thread joins that
// thread's lists). A thread's lists are freed when it ends; blocks freed after that (during
// exit) go back to the C library.
constexpr size_t kSmallMaxBytes = 1024;
constexpr size_t kSmallClasses = kSmallMaxBytes / kAlignment;
constexpr int kSmallPerClass = 32;

// A thread's small blocks, and the Storages it made minus those it freed. The count is
// written by its thread alone (a plain add, not a locked one: two fewer atomic
// read-modify-writes per array) and summed by live_storage_count. Trivially destructible
// (and zero-initialized), so a block freed after the thread's destructors ran still reads
// `state` and goes back to the C library; one thread-local access per allocation.
struct SmallBlocks {
  enum State : uint8_t { kUnused, kLive, kGone };
  void* blocks[kSmallClasses][kSmallPerClass];
  int count[kSmallClasses];
  std::atomic<int64_t> live;
  State state;
};

thread_local SmallBlocks t_small_blocks;

// The threads' counts, for live_storage_count: those of live threads, and what the ended
// ones left (a thread that frees more than it made leaves a negative count).
struct LiveCounts {
  std::mutex mu;
  std::vector<const SmallBlocks*> threads;
  int64_t ended = 0;
};

LiveCounts& live_counts() {
  static auto* counts = new LiveCounts();  // leaked: threads may end during exit
  return *counts;
}

// Storages made or freed on a thread whose lists are gone (during its exit).
std::atomic<int64_t> g_live_count_elsewhere{0};

struct SmallBlocksRelease {
  ~SmallBlocksRelease() {
    SmallBlocks& lists = t_small_blocks;
    {
      LiveCounts& counts = live_counts();
      std::lock_guard<std::mutex> lock(counts.mu);
      counts.ended += lists.live.load(std::memory_order_relaxed);
      counts.threads.erase(std::find(counts.threads.begin(), counts.threads.end(), &lists));
    }
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
  {
    LiveCounts& counts = live_counts();
    std::lock_guard<std::mutex> lock(counts.mu);
    counts.threads.push_back(lists);
  }
  lists->state = SmallBlocks::kLive;
  return lists;
}

// A kept block of `rounded` bytes (a multiple of kAlignment), or a new one.
void* take_small(SmallBlocks* lists, size_t rounded) {
  if (rounded <= kSmallMaxBytes && lists != nullptr) {
    const size_t c = rounded / kAlignment - 1;
    if (lists->count[c] > 0) return lists->blocks[c][--lists->count[c]];
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Keeps the block `p` of `rounded` bytes for take_small, or frees it.
void give_small(SmallBlocks* lists, void* p, size_t rounded) {
  const size_t c = rounded / kAlignment - 1;
  if (lists != nullptr && rounded <= kSmallMaxBytes && lists->count[c] < kSmallPerClass) {
    lists->blocks[c][lists->count[c]++] = p;
  } else {
    std::free(p);
  }
}

// The bytes of an array that is not Inline storage: from the block cache, the small lists or
// the C library (large ones on huge pages).
void* take_data(SmallBlocks* lists, size_t bytes) {
  const size_t alignment = alignment_for(bytes);
  const size_t rounded = rounded_size(bytes, alignment);
  void* data = bytes >= kCacheMinBytes ? block_cache().take(rounded) : nullptr;
  if (data != nullptr) return data;
  if (alignment == kAlignment) return take_small(lists, rounded);
  data = std::aligned_alloc(alignment, rounded);
  if (data == nullptr) throw std::bad_alloc();
  madvise(data, rounded, MADV_HUGEPAGE);  // a hint; may fail
  return data;
}

void give_data(SmallBlocks* lists, void* data, size_t bytes) {
  const size_t rounded = rounded_size(bytes, alignment_for(bytes));
  if (bytes >= kCacheMinBytes) {
    block_cache().give(data, rounded);
  } else {
    give_small(lists, data, rounded);
  }
}

// A Storage sits at the start of a small block, its Inline bytes (if any) at the next 64-byte
// boundary after it.
constexpr size_t kHeaderBytes = (sizeof(Storage) + kAlignment - 1) / kAlignment * kAlignment;

// Arrays up to this many bytes are Inline storage: with their Storage they fit a small block,
// so a loop's small results cost one take_small and one give_small.
constexpr size_t kInlineMaxBytes = kSmallMaxBytes - kHeaderBytes;

size_t block_bytes(const Storage& storage) {
  return storage.inline_data ? kHeaderBytes + rounded_size(storage.nbytes, kAlignment)
                             : kHeaderBytes;
}

// Adds `delta` to the live count of the calling thread (`lists`; a thread whose lists are
// gone counts in g_live_count_elsewhere).
void add_live_count(SmallBlocks* lists, int64_t delta) {
  if (lists != nullptr) {
    lists->live.store(lists->live.load(std::memory_order_relaxed) + delta,
                      std::memory_order_relaxed);
  } else {
    g_live_count_elsewhere.fetch_add(delta, std::memory_order_relaxed);
  }
}

// Memory statistics of a Storage made or freed.
void count_live(SmallBlocks* lists, size_t bytes) {
  add_live_count(lists, 1);
  const int64_t live =
      g_live_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
      static_cast<int64_t>(bytes);
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void count_freed(SmallBlocks* lists, size_t bytes) {
  add_live_count(lists, -1);
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

void destroy_storage(Storage* storage) {
  SmallBlocks* lists = small_blocks();
  const size_t block = block_bytes(*storage);
  if (storage->owned) {
    count_freed(lists, storage->nbytes);
    if (!storage->inline_data) give_data(lists, storage->data, storage->nbytes);
  }
  storage->~Storage();
  give_small(lists, storage, block);
}

StorageRef borrow_storage(void* data, size_t bytes) {
  auto* storage = new (take_small(small_blocks(), kHeaderBytes)) Storage();
  storage->data = data;
  storage->nbytes = bytes;
  storage->owned = false;
  return StorageRef::adopt(storage);
}

int64_t live_storage_count() {
  LiveCounts& counts = live_counts();
  std::lock_guard<std::mutex> lock(counts.mu);
  int64_t live = counts.ended + g_live_count_elsewhere.load();
  for (const SmallBlocks* lists : counts.threads) live += lists->live.load(std::memory_order_relaxed);
  return live;
}
int64_t live_storage_bytes() { return g_live_bytes.load(); }
int64_t peak_storage_bytes() { return g_peak_bytes.load(); }
void reset_peak_storage_bytes() { g_peak_bytes.store(g_live_bytes.load()); }

Array allocate(DType dtype, const Shape& shape) {
  Array a;
  a.dtype = dtype;
  a.shape = shape;
  const size_t bytes = num_bytes(dtype, shape);
  SmallBlocks* lists = small_blocks();
  Storage* storage;
  if (bytes <= kInlineMaxBytes) {
    storage = new (take_small(lists, kHeaderBytes + rounded_size(bytes, kAlignment))) Storage();
    storage->data = reinterpret_cast<char*>(storage) + kHeaderBytes;
    storage->inline_data = true;
  } else {
    void* data = take_data(lists, bytes);
    try {
      storage = new (take_small(lists, kHeaderBytes)) Storage();
    } catch (...) {
      give_data(lists, data, bytes);
      throw;
    }
    storage->data = data;
  }
  storage->nbytes = bytes;
  count_live(lists, bytes);
  a.storage = StorageRef::adopt(storage);
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
