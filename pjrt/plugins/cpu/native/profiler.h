// An opt-in per-instruction profiler for the executor: wall time and call counts keyed by
// the instruction's place ("f.mlir:3:5: 'stablehlo.dot_general'"), and, when the timeline is
// on too, every instruction's interval on its device and thread (openhlo run --trace). Off by
// default; when off, the executor pays one relaxed atomic load per instruction.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kernel.h"

namespace openhlo::cpu {

bool profiling_enabled();
// `timeline`: also keep every interval (memory grows with the instructions run), not just totals.
void set_profiling(bool on, bool timeline);

// One run of one instruction. Times are steady_clock nanoseconds (CLOCK_MONOTONIC on Linux,
// so intervals recorded by different processes on one machine share a clock).
struct ProfileEvent {
  std::string where;
  int64_t instr;     // the instruction's identity, the same in every run of one executable
  int64_t instance;  // replica_id * num_partitions + partition_id of the running instance
  int64_t thread;    // 0, 1, ... in the order threads first recorded since the last reset
  std::string role;  // what the thread does: "executor", "communication"
  int64_t start_ns, end_ns;
};

// Adds one call of `instr` (named `where`) that ran from `start` to `end` on this thread for
// the instance of `ctx` (thread-safe). `instr` is any pointer that identifies the instruction;
// a thread other than the executor's (`role`) totals as "where [role thread]".
void profile_record(const std::string& where, const void* instr, const ExecContext& ctx,
                    std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point end, const char* role = "executor");
// (where, calls, total nanoseconds) for every instruction recorded since the last reset.
std::vector<std::tuple<std::string, int64_t, int64_t>> profile_snapshot();
// Every interval recorded since the last reset while the timeline was on, in recording order
// per thread (as tuples for the bindings: where, instr, instance, thread, role, start, end).
std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, std::string, int64_t, int64_t>>
profile_timeline();
void profile_reset();

}  // namespace openhlo::cpu
