#include "executable.h"

#include <algorithm>
#include <stdexcept>

namespace openhlo_cuda {

namespace {
// Captured graphs kept per executable; a program called with ever new argument buffers
// would otherwise hold one graph per call.
constexpr size_t kMaxGraphs = 8;
}  // namespace

Executable::Executable(std::shared_ptr<Device> device, const std::string& cubin,
                       const std::vector<std::string>& kernels, std::vector<BufferSpec> buffers,
                       std::vector<Step> steps, std::vector<LaunchStep> launches,
                       std::vector<GemmStep> gemms, std::vector<CopyStep> copies,
                       std::vector<int> results, int num_params,
                       std::vector<int> written_params, bool use_graph)
    : device_(std::move(device)), buffers_(std::move(buffers)), steps_(std::move(steps)),
      launches_(std::move(launches)), gemms_(std::move(gemms)), copies_(std::move(copies)),
      results_(std::move(results)), num_params_(num_params), written_(num_params, false),
      use_graph_(use_graph) {
  for (int p : written_params) {
    written_.at(p) = true;
  }
  const DriverApi& driver = *device_->driver();
  device_->make_current();
  if (!launches_.empty()) {
    driver.check(driver.cuModuleLoadData(&module_, cubin.data()), "cuModuleLoadData");
    std::map<std::string, CUfunction> functions;
    for (const std::string& name : kernels) {
      CUfunction function = nullptr;
      driver.check(driver.cuModuleGetFunction(&function, module_, name.c_str()),
                   ("cuModuleGetFunction(" + name + ")").c_str());
      functions[name] = function;
    }
    for (LaunchStep& launch : launches_) {
      launch.function = functions.at(launch.kernel);
    }
  }
  std::vector<bool> is_result(buffers_.size(), false);
  for (int r : results_) {
    is_result[r] = true;
  }
  constants_.resize(buffers_.size());
  kept_temps_.resize(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const BufferSpec& spec = buffers_[i];
    if (spec.kind == BufferKind::kConst) {
      constants_[i] = device_->allocate(spec.bytes);
      device_->upload(constants_[i], spec.const_data.data(), spec.const_data.size());
    } else if (spec.kind == BufferKind::kTemp && use_graph_ && !is_result[i]) {
      kept_temps_[i] = device_->allocate(spec.bytes);
    }
  }
}

Executable::~Executable() {
  const DriverApi& driver = *device_->driver();
  driver.cuCtxSetCurrent(device_->context());
  driver.cuStreamSynchronize(device_->stream());
  for (auto& [key, graph] : graphs_) {
    driver.cuGraphExecDestroy(graph);
  }
  if (module_ != nullptr) {
    driver.cuModuleUnload(module_);
  }
}

std::pair<std::vector<DeviceBuffer>, std::shared_ptr<Event>> Executable::run(
    const std::vector<std::shared_ptr<DeviceBuffer>>& args, const std::vector<bool>& donated) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int>(args.size()) != num_params_) {
    throw std::invalid_argument("the executable takes " + std::to_string(num_params_) +
                                " argument(s), got " + std::to_string(args.size()));
  }
  device_->make_current();
  std::vector<DeviceBuffer> held(buffers_.size());
  // A donated argument is reused only if no other live buffer shares its block (a result
  // passed through earlier, say); checked before this run takes references of its own.
  std::vector<bool> reusable(args.size(), false);
  for (size_t p = 0; p < args.size(); ++p) {
    reusable[p] = p < donated.size() && donated[p] && args[p]->block &&
                  args[p]->block.use_count() == 1;
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const BufferSpec& spec = buffers_[i];
    if (spec.kind == BufferKind::kParam) {
      const DeviceBuffer& arg = *args[spec.param];
      if (arg.bytes < spec.bytes || !arg.block) {
        throw std::invalid_argument("argument " + std::to_string(spec.param) + " holds " +
                                    std::to_string(arg.bytes) + " bytes, the executable reads " +
                                    std::to_string(spec.bytes));
      }
      if (!written_[spec.param]) {
        held[i] = arg;
      } else if (reusable[spec.param]) {
        held[i] = arg;  // donated: the program's writes land in the caller's storage
        reusable[spec.param] = false;
      } else {
        // Not ours to write: the program runs on a copy (queued before its steps).
        held[i] = device_->allocate(arg.bytes, graph_address(i));
        device_->copy_async(held[i].address(), arg.address(), arg.bytes);
      }
    } else if (spec.kind == BufferKind::kConst) {
      held[i] = constants_[i];
    } else if (kept_temps_[i].block) {
      held[i] = kept_temps_[i];
    } else if (spec.alias_param >= 0 && spec.alias_param < static_cast<int>(args.size()) &&
               reusable[spec.alias_param] && args[spec.alias_param]->bytes >= spec.bytes) {
      held[i] = DeviceBuffer{args[spec.alias_param]->block, spec.bytes};
      reusable[spec.alias_param] = false;  // one result per donated argument
    } else {
      held[i] = device_->allocate(spec.bytes, graph_address(i));
    }
  }
  std::vector<CUdeviceptr> addresses(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    addresses[i] = held[i].address();
  }
  if (use_graph_) {
    launch_graph(addresses);
  } else {
    enqueue_steps(addresses);
  }
  stats_.runs++;
  std::vector<DeviceBuffer> outputs;
  outputs.reserve(results_.size());
  for (int r : results_) {
    outputs.push_back(DeviceBuffer{held[r].block, buffers_[r].bytes});
  }
  return {std::move(outputs), device_->record_event()};
}

CUdeviceptr Executable::graph_address(size_t buffer) const {
  return last_graph_ != nullptr ? (*last_graph_)[buffer] : 0;
}

void Executable::enqueue_steps(const std::vector<CUdeviceptr>& addresses) {
  const DriverApi& driver = *device_->driver();
  std::vector<CUdeviceptr> values;
  std::vector<void*> params;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case StepKind::kLaunch: {
        const LaunchStep& launch = launches_[step.index];
        values.resize(launch.args.size());
        // One entry more than the arguments, null: the driver reads as many as the kernel
        // takes; the fake driver, which cannot read a real cubin's signatures, stops there.
        params.assign(launch.args.size() + 1, nullptr);
        for (size_t j = 0; j < launch.args.size(); ++j) {
          values[j] = addresses[launch.args[j].buffer] + launch.args[j].offset;
          params[j] = &values[j];
        }
        CUresult result = driver.cuLaunchKernel(
            launch.function, launch.grid[0], launch.grid[1], launch.grid[2], launch.block[0],
            launch.block[1], launch.block[2], launch.shared, device_->stream(), params.data(),
            nullptr);
        if (result != kCudaSuccess) {
          throw CudaError("cuLaunchKernel(" + launch.kernel + ") failed: " +
                          driver.error_name(result));
        }
        break;
      }
      case StepKind::kGemm:
        enqueue_gemm(gemms_[step.index], addresses);
        break;
      case StepKind::kCopy: {
        const CopyStep& copy = copies_[step.index];
        device_->copy_async(addresses[copy.dst.buffer] + copy.dst.offset,
                            addresses[copy.src.buffer] + copy.src.offset, copy.bytes);
        break;
      }
    }
  }
}

void Executable::enqueue_gemm(const GemmStep& gemm, const std::vector<CUdeviceptr>& addresses) {
  // cuBLAS is column-major. A row-major matrix is its transpose read column-major, so the
  // row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: swap the operands
  // (and m with n) and keep each operand's own transpose flag and leading dimension.
  const float alpha = 1.0f;
  const float beta = 0.0f;
  cublasHandle handle = device_->cublas_handle();  // loads cuBLAS on first use
  const CublasApi& cublas = device_->cublas();
  auto pointer = [&](const BufferRef& ref) {
    return reinterpret_cast<void*>(static_cast<uintptr_t>(addresses[ref.buffer] + ref.offset));
  };
  cublas.check(cublas.cublasGemmStridedBatchedEx(
                   handle, gemm.trans_b ? kCublasOpT : kCublasOpN,
                   gemm.trans_a ? kCublasOpT : kCublasOpN, gemm.n, gemm.m, gemm.k, &alpha,
                   pointer(gemm.b), gemm.data_type, gemm.ldb, gemm.stride_b, pointer(gemm.a),
                   gemm.data_type, gemm.lda, gemm.stride_a, &beta, pointer(gemm.c),
                   gemm.data_type, gemm.ldc, gemm.stride_c, gemm.batch, kCublasCompute32F,
                   kCublasGemmDefault),
               "cublasGemmStridedBatchedEx");
}

void Executable::launch_graph(const std::vector<CUdeviceptr>& addresses) {
  const DriverApi& driver = *device_->driver();
  auto found = graphs_.find(addresses);
  if (found == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) {
      driver.check(driver.cuGraphExecDestroy(graphs_.at(graph_order_.front())),
                   "cuGraphExecDestroy");
      if (last_graph_ == &graphs_.find(graph_order_.front())->first) {
        last_graph_ = nullptr;
      }
      graphs_.erase(graph_order_.front());
      graph_order_.erase(graph_order_.begin());
    }
    // Created before the capture: creating a cuBLAS handle inside one is not allowed.
    if (!gemms_.empty()) {
      device_->cublas_handle();
    }
    driver.check(driver.cuStreamBeginCapture(device_->stream(), kStreamCaptureModeThreadLocal),
                 "cuStreamBeginCapture");
    CUgraph graph = nullptr;
    try {
      enqueue_steps(addresses);
    } catch (...) {
      driver.cuStreamEndCapture(device_->stream(), &graph);  // leave the stream usable
      if (graph != nullptr) {
        driver.cuGraphDestroy(graph);
      }
      throw;
    }
    driver.check(driver.cuStreamEndCapture(device_->stream(), &graph), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    CUresult result = driver.cuGraphInstantiateWithFlags(&exec, graph, 0);
    driver.cuGraphDestroy(graph);  // the executable graph is independent of its template
    driver.check(result, "cuGraphInstantiateWithFlags");
    found = graphs_.emplace(addresses, exec).first;
    graph_order_.push_back(addresses);
    stats_.graph_captures++;
  }
  last_graph_ = &found->first;
  driver.check(driver.cuGraphLaunch(found->second, device_->stream()), "cuGraphLaunch");
  stats_.graph_launches++;
}

}  // namespace openhlo_cuda
