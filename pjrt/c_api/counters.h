// Runtime counters of the work that never enters Python: executions on the native fast path
// and host transfers. Relaxed atomic increments (a few nanoseconds); Python reads and resets
// them through openhlo_counters / openhlo_reset_counters (pjrt/c_api/loader.py) and adds them
// to pjrt.metrics() (pjrt/counters.py). Executions that go through the Python callback are
// counted there, not here.
#ifndef OPENHLO_PJRT_C_API_COUNTERS_H_
#define OPENHLO_PJRT_C_API_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace openhlo {

// Indices into the counters; the order is the one loader.py reads (append only).
enum Counter : int {
  kFastExecutions = 0,
  kTransfersToDevice,
  kBytesToDevice,
  kTransfersToHost,
  kBytesToHost,
  kNumCounters,
};

std::atomic<int64_t>* CounterTable();

inline void Count(Counter counter, int64_t amount = 1) {
  CounterTable()[counter].fetch_add(amount, std::memory_order_relaxed);
}

}  // namespace openhlo

#endif  // OPENHLO_PJRT_C_API_COUNTERS_H_
