// The counter table and its C accessors (see counters.h).
#include "counters.h"

namespace openhlo {

std::atomic<int64_t>* CounterTable() {
  static std::atomic<int64_t> table[kNumCounters] = {};
  return table;
}

}  // namespace openhlo

// Copies at most `size` counters into `out`; returns how many there are.
extern "C" __attribute__((visibility("default"))) int64_t openhlo_counters(int64_t* out,
                                                                          int64_t size) {
  for (int64_t i = 0; i < size && i < openhlo::kNumCounters; ++i)
    out[i] = openhlo::CounterTable()[i].load(std::memory_order_relaxed);
  return openhlo::kNumCounters;
}

extern "C" __attribute__((visibility("default"))) void openhlo_reset_counters() {
  for (int i = 0; i < openhlo::kNumCounters; ++i)
    openhlo::CounterTable()[i].store(0, std::memory_order_relaxed);
}
