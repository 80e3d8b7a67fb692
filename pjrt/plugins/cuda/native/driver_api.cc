#include "driver_api.h"

#include <dlfcn.h>

#include <initializer_list>

namespace openhlo_cuda {
namespace {

void* open_library(const std::string& path, const char* what) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw DriverNotFound(std::string(what) + ": " + path + " not found or not loadable (" +
                         (reason ? reason : "dlopen failed") + ")");
  }
  return handle;
}

// The first of `names` the library exports: the driver keeps old entry points beside their
// versioned successors (cuMemAlloc_v2 replaced cuMemAlloc), and we want the current one.
template <typename Fn>
void resolve(void* handle, const std::string& path, Fn*& slot,
             std::initializer_list<const char*> names, bool required = true) {
  for (const char* name : names) {
    if (void* symbol = dlsym(handle, name)) {
      slot = reinterpret_cast<Fn*>(symbol);
      return;
    }
  }
  slot = nullptr;
  if (required) {
    throw DriverNotFound(path + " lacks the entry point " + *names.begin() +
                         " (is it a CUDA driver/cuBLAS of version 12 or later?)");
  }
}

}  // namespace

DriverApi::DriverApi(const std::string& path_) : path(path_) {
  handle = open_library(path, "no CUDA driver");
  try {
    resolve(handle, path, cuInit, {"cuInit"});
    resolve(handle, path, cuDriverGetVersion, {"cuDriverGetVersion"});
    resolve(handle, path, cuGetErrorName, {"cuGetErrorName"}, /*required=*/false);
    resolve(handle, path, cuDeviceGetCount, {"cuDeviceGetCount"});
    resolve(handle, path, cuDeviceGet, {"cuDeviceGet"});
    resolve(handle, path, cuDeviceGetName, {"cuDeviceGetName"});
    resolve(handle, path, cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
    resolve(handle, path, cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
    resolve(handle, path, cuDevicePrimaryCtxRelease,
            {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
    resolve(handle, path, cuCtxSetCurrent, {"cuCtxSetCurrent"});
    resolve(handle, path, cuMemAlloc, {"cuMemAlloc_v2"});
    resolve(handle, path, cuMemFree, {"cuMemFree_v2"});
    resolve(handle, path, cuMemGetInfo, {"cuMemGetInfo_v2"});
    resolve(handle, path, cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
    resolve(handle, path, cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"});
    resolve(handle, path, cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"});
    resolve(handle, path, cuStreamCreate, {"cuStreamCreate"});
    resolve(handle, path, cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"});
    resolve(handle, path, cuStreamSynchronize, {"cuStreamSynchronize"});
    resolve(handle, path, cuEventCreate, {"cuEventCreate"});
    resolve(handle, path, cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
    resolve(handle, path, cuEventRecord, {"cuEventRecord"});
    resolve(handle, path, cuEventQuery, {"cuEventQuery"});
    resolve(handle, path, cuEventSynchronize, {"cuEventSynchronize"});
    resolve(handle, path, cuModuleLoadData, {"cuModuleLoadData"});
    resolve(handle, path, cuModuleUnload, {"cuModuleUnload"});
    resolve(handle, path, cuModuleGetFunction, {"cuModuleGetFunction"});
    resolve(handle, path, cuLaunchKernel, {"cuLaunchKernel"});
    resolve(handle, path, cuStreamBeginCapture, {"cuStreamBeginCapture_v2"});
    resolve(handle, path, cuStreamEndCapture, {"cuStreamEndCapture"});
    resolve(handle, path, cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"});
    resolve(handle, path, cuGraphLaunch, {"cuGraphLaunch"});
    resolve(handle, path, cuGraphExecDestroy, {"cuGraphExecDestroy"});
    resolve(handle, path, cuGraphDestroy, {"cuGraphDestroy"});
  } catch (...) {
    dlclose(handle);
    throw;
  }
}

DriverApi::~DriverApi() {
  // The driver stays loaded: contexts and modules may outlive this table at process exit,
  // and unloading libcuda while its threads run crashes.
}

std::string DriverApi::error_name(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == kCudaSuccess && name) {
    return std::string(name) + " (" + std::to_string(result) + ")";
  }
  return "CUresult " + std::to_string(result);
}

void DriverApi::check(CUresult result, const char* call) const {
  if (result != kCudaSuccess) {
    throw CudaError(std::string(call) + " failed: " + error_name(result));
  }
}

CublasApi::CublasApi(const std::string& path_) : path(path_) {
  handle = open_library(path, "no cuBLAS");
  try {
    resolve(handle, path, cublasCreate, {"cublasCreate_v2"});
    resolve(handle, path, cublasDestroy, {"cublasDestroy_v2"});
    resolve(handle, path, cublasSetStream, {"cublasSetStream_v2"});
    resolve(handle, path, cublasSetWorkspace, {"cublasSetWorkspace_v2"});
    resolve(handle, path, cublasGemmStridedBatchedEx, {"cublasGemmStridedBatchedEx"});
  } catch (...) {
    dlclose(handle);
    throw;
  }
}

CublasApi::~CublasApi() {}

void CublasApi::check(int status, const char* call) const {
  if (status != 0) {
    throw CudaError(std::string(call) + " failed: cublasStatus " + std::to_string(status));
  }
}

}  // namespace openhlo_cuda
