// A loaded CUDA executable: the step list of executable.json (runtime.py parses and checks
// it) as C++ structs, its cubin loaded once with every kernel resolved, its constants on the
// device. run() queues every step on the device's stream without returning to Python.
//
// With a CUDA graph, the first run for a given set of buffer addresses is captured
// (cuStreamBeginCapture .. cuGraphInstantiate) and every run with the same addresses
// replays it with one cuGraphLaunch. Temporaries of a graph-mode executable are allocated
// once and kept, so the addresses (the graph's key) are those of the arguments and results
// only; a fresh result asks the caching allocator for the block it had in the last graph,
// so a loop that drops its results (in whatever order) replays one graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device.h"

namespace openhlo_cuda {

enum class BufferKind { kParam, kTemp, kConst };

struct BufferSpec {
  size_t bytes = 0;
  BufferKind kind = BufferKind::kTemp;
  int param = -1;            // kParam: the argument index
  std::string const_data;    // kConst: the bytes
  int alias_param = -1;      // a result that may live in argument alias_param when donated
};

// A device address operand: buffer (dense index) + byte offset.
struct BufferRef {
  int buffer = 0;
  size_t offset = 0;
};

struct LaunchStep {
  std::string kernel;
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<BufferRef> args;
};

// Row-major C[b] = op(A[b]) @ op(B[b]) for b < batch (op: transpose when trans_* is set).
struct GemmStep {
  int data_type = kCudaR32F;  // cudaDataType of A, B and C
  int m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  BufferRef a, b, c;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
};

struct CopyStep {
  BufferRef src, dst;
  size_t bytes = 0;
};

enum class StepKind { kLaunch, kGemm, kCopy };

struct Step {
  StepKind kind = StepKind::kLaunch;
  int index = 0;  // into the executable's list of that kind
};

struct ExecutableStats {
  size_t runs = 0;
  size_t graph_captures = 0;
  size_t graph_launches = 0;
};

class Executable {
 public:
  Executable(std::shared_ptr<Device> device, const std::string& cubin,
             const std::vector<std::string>& kernels, std::vector<BufferSpec> buffers,
             std::vector<Step> steps, std::vector<LaunchStep> launches,
             std::vector<GemmStep> gemms, std::vector<CopyStep> copies,
             std::vector<int> results, int num_params, std::vector<int> written_params,
             bool use_graph);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Queues one run; returns the results (defined once the returned event fires). `donated`
  // [i]: argument i may be reused for a result marked alias_param == i, and a written
  // argument (written_params) is written in place; a written argument that is not donated,
  // or shares its storage with another buffer, is copied first.
  std::pair<std::vector<DeviceBuffer>, std::shared_ptr<Event>> run(
      const std::vector<std::shared_ptr<DeviceBuffer>>& args, const std::vector<bool>& donated);

  ExecutableStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  void enqueue_steps(const std::vector<CUdeviceptr>& addresses);
  void enqueue_gemm(const GemmStep& gemm, const std::vector<CUdeviceptr>& addresses);
  void launch_graph(const std::vector<CUdeviceptr>& addresses);
  // Graph mode: buffer's address in the last graph launched (0 if none), asked of the
  // allocator for a fresh result so that results freed in any order come back at the same
  // addresses and the graph is replayed rather than captured again.
  CUdeviceptr graph_address(size_t buffer) const;

  std::shared_ptr<Device> device_;
  CUmodule module_ = nullptr;
  std::vector<BufferSpec> buffers_;
  std::vector<Step> steps_;
  std::vector<LaunchStep> launches_;
  std::vector<GemmStep> gemms_;
  std::vector<CopyStep> copies_;
  std::vector<int> results_;
  int num_params_;
  std::vector<bool> written_;  // per argument: the steps write into its buffer
  bool use_graph_;
  std::vector<DeviceBuffer> constants_;   // per buffer; empty unless kConst
  std::vector<DeviceBuffer> kept_temps_;  // graph mode: per buffer; empty unless a kept temp
  std::map<std::vector<CUdeviceptr>, CUgraphExec> graphs_;
  std::vector<std::vector<CUdeviceptr>> graph_order_;  // oldest first, for eviction
  const std::vector<CUdeviceptr>* last_graph_ = nullptr;  // a key of graphs_
  ExecutableStats stats_;
  std::mutex mutex_;  // runs of one executable from several threads queue in turn
};

}  // namespace openhlo_cuda
