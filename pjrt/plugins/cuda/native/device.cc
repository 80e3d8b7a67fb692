#include "device.h"

#include <vector>

namespace openhlo_cuda {

namespace {
// cuBLAS's own recommendation for Hopper is 32 MiB; less makes some algorithms unavailable.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
}  // namespace

Event::Event(std::shared_ptr<DriverApi> driver, CUcontext context, CUstream stream)
    : driver_(std::move(driver)), context_(context) {
  driver_->check(driver_->cuEventCreate(&event_, 0), "cuEventCreate");
  driver_->check(driver_->cuEventRecord(event_, stream), "cuEventRecord");
}

Event::~Event() {
  if (event_ != nullptr) {
    driver_->cuCtxSetCurrent(context_);
    driver_->cuEventDestroy(event_);
  }
}

bool Event::is_ready() const {
  CUresult result = driver_->cuEventQuery(event_);
  if (result == kCudaErrorNotReady) {
    return false;
  }
  driver_->check(result, "cuEventQuery");
  return true;
}

void Event::synchronize() const {
  driver_->check(driver_->cuEventSynchronize(event_), "cuEventSynchronize");
}

Device::Device(std::shared_ptr<DriverApi> driver, int ordinal, std::string cublas_path)
    : driver_(std::move(driver)), ordinal_(ordinal), cublas_path_(std::move(cublas_path)) {
  driver_->check(driver_->cuDeviceGet(&device_, ordinal), "cuDeviceGet");
  driver_->check(driver_->cuDevicePrimaryCtxRetain(&context_, device_),
                 "cuDevicePrimaryCtxRetain");
  make_current();
  driver_->check(driver_->cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate");
  char name[256] = {0};
  driver_->check(driver_->cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
  name_ = name;
  int major = 0;
  int minor = 0;
  driver_->check(driver_->cuDeviceGetAttribute(&major, kDeviceAttributeComputeCapabilityMajor,
                                               device_), "cuDeviceGetAttribute");
  driver_->check(driver_->cuDeviceGetAttribute(&minor, kDeviceAttributeComputeCapabilityMinor,
                                               device_), "cuDeviceGetAttribute");
  driver_->check(driver_->cuDeviceGetAttribute(&multiprocessors_,
                                               kDeviceAttributeMultiprocessorCount, device_),
                 "cuDeviceGetAttribute");
  compute_capability_ = major * 10 + minor;
  allocator_ = std::make_shared<CachingAllocator>(driver_, context_);
}

Device::~Device() {
  // Errors are not thrown from a destructor: the process may be exiting with the driver
  // already torn down. Live blocks keep the allocator (not the stream) alive.
  driver_->cuCtxSetCurrent(context_);
  driver_->cuStreamSynchronize(stream_);
  if (cublas_handle_ != nullptr) {
    cublas_->cublasDestroy(cublas_handle_);
  }
  cublas_workspace_ = DeviceBuffer();
  driver_->cuStreamDestroy(stream_);
  allocator_->release_cached();
  driver_->cuDevicePrimaryCtxRelease(device_);
}

void Device::make_current() const {
  driver_->check(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

DeviceBuffer Device::allocate(size_t bytes, CUdeviceptr preferred) {
  return DeviceBuffer{allocator_->allocate(bytes, preferred), bytes};
}

void Device::upload(const DeviceBuffer& dst, const void* host, size_t bytes) {
  make_current();
  if (bytes > 0) {
    driver_->check(driver_->cuMemcpyHtoDAsync(dst.address(), host, bytes, stream_),
                   "cuMemcpyHtoDAsync");
  }
  synchronize();
}

void Device::download(void* host, const DeviceBuffer& src, size_t bytes) {
  make_current();
  if (bytes > 0) {
    driver_->check(driver_->cuMemcpyDtoHAsync(host, src.address(), bytes, stream_),
                   "cuMemcpyDtoHAsync");
  }
  synchronize();
}

void Device::copy_async(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (bytes > 0) {
    driver_->check(driver_->cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoDAsync");
  }
}

void Device::synchronize() {
  make_current();
  driver_->check(driver_->cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

std::shared_ptr<Event> Device::record_event() {
  make_current();
  return std::make_shared<Event>(driver_, context_, stream_);
}

cublasHandle Device::cublas_handle() {
  std::lock_guard<std::mutex> lock(cublas_mutex_);
  if (cublas_handle_ == nullptr) {
    make_current();
    if (!cublas_) {
      cublas_ = std::make_unique<CublasApi>(cublas_path_);
    }
    cublasHandle handle = nullptr;
    cublas_->check(cublas_->cublasCreate(&handle), "cublasCreate");
    cublas_->check(cublas_->cublasSetStream(handle, stream_), "cublasSetStream");
    cublas_workspace_ = allocate(kCublasWorkspaceBytes);
    cublas_->check(cublas_->cublasSetWorkspace(handle, cublas_workspace_.block.get(),
                                               kCublasWorkspaceBytes),
                   "cublasSetWorkspace");
    cublas_handle_ = handle;
  }
  return cublas_handle_;
}

size_t Device::total_memory() const {
  make_current();
  size_t free_bytes = 0;
  size_t total = 0;
  driver_->check(driver_->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  return total;
}

}  // namespace openhlo_cuda
