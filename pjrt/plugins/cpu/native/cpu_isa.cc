#include "cpu_isa.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace openhlo::cpu {

namespace {

std::atomic<IsaLimit>& limit() {
  static std::atomic<IsaLimit> current{[] {
    const char* env = std::getenv("OPENHLO_CPU_PORTABLE_LOWP");
    const bool portable = env != nullptr && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0;
    return portable ? IsaLimit::kPortable : IsaLimit::kDetected;
  }()};
  return current;
}

// Linux saves the 8 KiB of tile data with a thread's state only for processes that asked
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a tile instruction in one that did
// not is killed with SIGILL. The permission is the whole process's, asked for once.
bool amx_permitted() {
#if defined(__x86_64__) && defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
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
    found.amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
                __builtin_cpu_supports("amx-int8") && amx_permitted();
#endif
    return found;
  }();
  return isa;
}

LowPrecisionIsa active_isa() {
  LowPrecisionIsa isa = detected_isa();
  switch (limit().load(std::memory_order_relaxed)) {
    case IsaLimit::kDetected:
      break;
    case IsaLimit::kNoAmx:
      isa.amx = false;
      break;
    case IsaLimit::kPortable:
      isa = LowPrecisionIsa{};
      break;
  }
  return isa;
}

void limit_lowp_isa(IsaLimit limit_to) { limit().store(limit_to, std::memory_order_relaxed); }

}  // namespace openhlo::cpu
