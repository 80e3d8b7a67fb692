// Custom kernels on the cpu backend: `stablehlo.custom_call @name` run as a native call of an
// XLA FFI handler (pjrt/native/openhlo_ffi.h), with no Python on the call path.
//
// The lowering (pjrt/plugins/cpu/lowering.py) resolves the target in the custom-kernel
// registry (pjrt/custom_kernels) to a handler address and passes the call's attributes. The
// step builds everything of the call frame it can once (element types, dims, the attributes
// sorted by name); a call fills in the buffer pointers on the stack and calls the handler.
// The API table the handler sees provides errors, the runtime's thread pool (XLA's
// ThreadPool_Schedule/NumThreads, and OpenHLO's parallel-for extension), scratch memory,
// the device ordinal and a run id; streams, user types, state and futures answer
// UNIMPLEMENTED.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernel.h"

namespace openhlo::cpu {

// One attribute of a call: kind "scalar" (payload: one element), "array" (elements) or
// "string" (bytes); dtype is the StableHLO element type of scalars and arrays.
struct FfiAttr {
  std::string name;
  std::string kind;
  std::string dtype;
  std::string payload;
};

// A step calling the typed XLA FFI handler at `handler` (an XLA_FFI_Handler*). Throws
// Unsupported for element types the FFI cannot name or a malformed attribute.
Step make_ffi_call_step(const std::string& target, uintptr_t handler,
                        std::vector<TensorSpec> operands, std::vector<TensorSpec> results,
                        std::vector<FfiAttr> attrs);

// The API table every call frame points to (for tests and tools that call handlers).
const void* ffi_api();

}  // namespace openhlo::cpu
