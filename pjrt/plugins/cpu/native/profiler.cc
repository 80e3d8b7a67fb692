#include "profiler.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace openhlo::cpu {
namespace {

std::atomic<bool> g_enabled{false};

struct Totals {
  int64_t calls = 0;
  int64_t ns = 0;
};

std::mutex g_mutex;
std::unordered_map<std::string, Totals>& totals() {
  static auto* map = new std::unordered_map<std::string, Totals>();  // never destroyed: used at exit
  return *map;
}

}  // namespace

bool profiling_enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_profiling(bool on) { g_enabled.store(on); }

void profile_record(const std::string& where, int64_t ns) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Totals& t = totals()[where];
  t.calls += 1;
  t.ns += ns;
}

std::vector<std::tuple<std::string, int64_t, int64_t>> profile_snapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::tuple<std::string, int64_t, int64_t>> out;
  out.reserve(totals().size());
  for (const auto& [where, t] : totals()) out.emplace_back(where, t.calls, t.ns);
  return out;
}

void profile_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  totals().clear();
}

}  // namespace openhlo::cpu
