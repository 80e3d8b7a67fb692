// The CUDA driver and cuBLAS entry points the runtime uses, loaded at run time.
//
// No CUDA header or library is needed to build OpenHLO: the few types and entry points the
// runtime calls are declared here by their documented C ABI (opaque handles are pointers,
// results are ints), and filled by dlopen + dlsym of libcuda.so.1 (or $OPENHLO_CUDA_DRIVER)
// and libcublas.so.13 (or $OPENHLO_CUBLAS). The unit tests point both variables at a fake
// driver (tests/fake_driver.cc) that implements the same symbols on host memory.
//
// Every call goes through check(): a failing CUresult becomes a CudaError naming the entry
// point and the driver's name for the code (cuGetErrorName), never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace openhlo_cuda {

// Opaque driver handles and scalar types (the ABI: pointers and integers).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using cublasHandle = struct cublasContext*;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNotReady = 600;
constexpr CUresult kCudaErrorOutOfMemory = 2;
constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
constexpr int kDeviceAttributeMultiprocessorCount = 16;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr int kStreamCaptureModeThreadLocal = 1;

// cuBLAS enumerations (cublas_api.h / library_types.h values).
constexpr int kCublasOpN = 0;
constexpr int kCublasOpT = 1;
constexpr int kCudaR32F = 0;
constexpr int kCudaR16F = 2;
constexpr int kCudaR16BF = 14;
constexpr int kCublasCompute32F = 68;
constexpr int kCublasGemmDefault = -1;

// A failed driver or cuBLAS call: what was called and the code, by name where known.
class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

// The library itself could not be opened or lacks an entry point.
class DriverNotFound : public std::runtime_error {
 public:
  explicit DriverNotFound(const std::string& message) : std::runtime_error(message) {}
};

struct DriverApi {
  std::string path;
  void* handle = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);  // optional
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);

  // Opens `path` and resolves every entry point; throws DriverNotFound naming what is missing.
  explicit DriverApi(const std::string& path);
  ~DriverApi();
  DriverApi(const DriverApi&) = delete;
  DriverApi& operator=(const DriverApi&) = delete;

  // Throws CudaError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)") unless `result` is 0.
  void check(CUresult result, const char* call) const;
  std::string error_name(CUresult result) const;
};

struct CublasApi {
  std::string path;
  void* handle = nullptr;
  int (*cublasCreate)(cublasHandle*);
  int (*cublasDestroy)(cublasHandle);
  int (*cublasSetStream)(cublasHandle, CUstream);
  int (*cublasSetWorkspace)(cublasHandle, void*, size_t);
  int (*cublasGemmStridedBatchedEx)(cublasHandle, int, int, int, int, int, const void*,
                                    const void*, int, int, long long, const void*, int, int,
                                    long long, const void*, void*, int, int, long long, int,
                                    int, int);

  explicit CublasApi(const std::string& path);
  ~CublasApi();
  CublasApi(const CublasApi&) = delete;
  CublasApi& operator=(const CublasApi&) = delete;

  // cuBLAS statuses are their own enumeration (cublasStatus_t): named by number.
  void check(int status, const char* call) const;
};

}  // namespace openhlo_cuda
