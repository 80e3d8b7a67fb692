#include "cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace openhlo::cpu {

namespace {

std::atomic<bool>& forced() {
  static std::atomic<bool> flag{[] {
    const char* env = std::getenv("OPENHLO_CPU_PORTABLE_LOWP");
    return env != nullptr && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0;
  }()};
  return flag;
}

}  // namespace

LowPrecisionIsa detected_isa() {
  static const LowPrecisionIsa isa = [] {
    LowPrecisionIsa found;
#if defined(__x86_64__)
    __builtin_cpu_init();
    found.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    found.vnni = found.avx512 && __builtin_cpu_supports("avx512vnni");
    found.bf16 = found.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    return found;
  }();
  return isa;
}

LowPrecisionIsa active_isa() {
  return forced().load(std::memory_order_relaxed) ? LowPrecisionIsa{} : detected_isa();
}

void force_portable_lowp(bool on) { forced().store(on, std::memory_order_relaxed); }

}  // namespace openhlo::cpu
