#include "profiler.h"

#include <atomic>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace openhlo::cpu {
namespace {

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_timeline{false};

struct Totals {
  int64_t calls = 0;
  int64_t ns = 0;
};

std::mutex g_mutex;
struct State {
  std::unordered_map<std::string, Totals> totals;
  std::vector<ProfileEvent> events;
  int64_t threads = 0;  // numbers handed out since the last reset
  int64_t generation = 0;  // advanced by each reset, so threads number themselves afresh
};
State& state() {
  static auto* s = new State();  // never destroyed: used at exit
  return *s;
}

// This thread's number in the current generation (g_mutex held).
int64_t thread_number(State& s) {
  thread_local int64_t number = -1;
  thread_local int64_t generation = -1;
  if (generation != s.generation) {
    generation = s.generation;
    number = s.threads++;
  }
  return number;
}

int64_t since_epoch_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

bool profiling_enabled() { return g_enabled.load(std::memory_order_relaxed); }

void set_profiling(bool on, bool timeline) {
  g_timeline.store(on && timeline);
  g_enabled.store(on);
}

void profile_record(const std::string& where, const void* instr, const ExecContext& ctx,
                    std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point end, const char* role) {
  const int64_t start_ns = since_epoch_ns(start), end_ns = since_epoch_ns(end);
  std::lock_guard<std::mutex> lock(g_mutex);
  State& s = state();
  // Another thread's share of an instruction is a row of its own in the totals.
  const bool executor = std::string_view(role) == "executor";
  Totals& t = s.totals[executor ? where : where + " [" + role + " thread]"];
  t.calls += 1;
  t.ns += end_ns - start_ns;
  if (g_timeline.load(std::memory_order_relaxed)) {
    s.events.push_back(ProfileEvent{where, reinterpret_cast<int64_t>(instr),
                                    ctx.replica_id * ctx.num_partitions + ctx.partition_id,
                                    thread_number(s), role, start_ns, end_ns});
  }
}

std::vector<std::tuple<std::string, int64_t, int64_t>> profile_snapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::tuple<std::string, int64_t, int64_t>> out;
  out.reserve(state().totals.size());
  for (const auto& [where, t] : state().totals) out.emplace_back(where, t.calls, t.ns);
  return out;
}

std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, std::string, int64_t, int64_t>>
profile_timeline() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, std::string, int64_t, int64_t>>
      out;
  out.reserve(state().events.size());
  for (const ProfileEvent& e : state().events) {
    out.emplace_back(e.where, e.instr, e.instance, e.thread, e.role, e.start_ns, e.end_ns);
  }
  return out;
}

void profile_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  State& s = state();
  s.totals.clear();
  s.events.clear();
  s.threads = 0;
  s.generation += 1;
}

}  // namespace openhlo::cpu
