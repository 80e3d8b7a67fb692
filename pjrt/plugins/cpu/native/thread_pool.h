// A process-wide pool of worker threads for data-parallel kernels.
#pragma once

#include <cstdint>
#include <functional>

namespace openhlo::cpu {

// Runs fn(begin, end) over [0, n) split into disjoint blocks of at least `min_chunk` items
// (a few per thread, handed out dynamically), on the pool's threads and the calling thread,
// and returns when all are done. Small ranges and calls made from inside a pool task run
// inline on the calling thread (no nesting). fn must not throw.
void parallel_for(int64_t n, int64_t min_chunk,
                  const std::function<void(int64_t begin, int64_t end)>& fn);

// parallel_for with every index its own block: for a few hundred tasks of milliseconds each
// (attention's query blocks), where a thread slowed by another process would otherwise be
// left holding a quarter of its share at the end while the others wait.
void parallel_for_each(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

// Number of threads parallel_for may use (the pool plus the caller).
int parallel_width();

// Runs task on one of the pool's threads, later; the caller waits for it however it likes
// (custom kernels' XLA FFI thread pool, ffi_call.cc). task must not throw.
void schedule(std::function<void()> task);

}  // namespace openhlo::cpu
