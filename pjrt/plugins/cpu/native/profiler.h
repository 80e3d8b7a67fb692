// An opt-in per-instruction profiler for the executor: wall time and call counts keyed by
// the instruction's place ("stablehlo.dot_general at f.mlir:3:5"). Off by default; when
// off, the executor pays one relaxed atomic load per instruction.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace openhlo::cpu {

bool profiling_enabled();
void set_profiling(bool on);
// Adds one call of `ns` nanoseconds to `where`'s totals (thread-safe).
void profile_record(const std::string& where, int64_t ns);
// (where, calls, total nanoseconds) for every instruction recorded since the last reset.
std::vector<std::tuple<std::string, int64_t, int64_t>> profile_snapshot();
void profile_reset();

}  // namespace openhlo::cpu
