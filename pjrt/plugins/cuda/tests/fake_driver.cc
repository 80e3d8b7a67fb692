// A fake CUDA driver and cuBLAS for the runtime's unit tests (no GPU, no CUDA install).
//
// It exports the driver and cuBLAS entry points the runtime dlsyms, by the same names and
// ABI. Device memory is host memory (a device pointer is a malloc'ed address), copies are
// memcpy, and work "queued" on a stream runs at once, unless the stream is capturing: then
// it is recorded into the graph and runs at each cuGraphLaunch. Kernel launches cannot run
// (there is no GPU code), so they are recorded: kernel, grid, block, shared bytes and the
// argument values (device pointers). cuBLAS gemms compute the real column-major product on
// host memory, so the runtime's row-major operand mapping is checked against numpy.
// A fake "cubin" is text, one kernel a line, "name argument-count": cuModuleGetFunction
// finds only those names, and a launch reads that many 8-byte arguments (device pointers).
// A real cubin (an ELF image) is accepted too, with any kernel name; its launches read
// arguments up to the null entry the runtime ends its argument array with.
//
// Test hooks (extern "C"): fake_cuda_fail(name, code) makes every later call of the entry
// point `name` return `code`; fake_cuda_set_memory_limit(bytes) caps the device memory;
// fake_cuda_reset() clears failures, the cap and the log;
// fake_cuda_log_json() returns the log as JSON.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Launch {
  std::string kernel;
  unsigned dims[6];
  unsigned shared;
  std::vector<unsigned long long> args;
  bool via_graph;
};

struct Gemm {
  int transa, transb, m, n, k, lda, ldb, ldc, batch, type;
  long long stride_a, stride_b, stride_c;
  bool via_graph;
};

using Work = std::function<void(bool via_graph)>;

struct Stream {
  bool capturing = false;
  std::vector<Work> captured;
};

struct Graph {
  std::vector<Work> work;
};

struct State {
  std::mutex mutex;
  std::map<std::string, int> failures;
  std::vector<Launch> launches;
  std::vector<Gemm> gemms;
  std::map<std::string, long> counts;
  std::map<void*, size_t> live;  // device allocations
  size_t live_bytes = 0;
  size_t memory_limit = ~size_t(0);  // cuMemAlloc beyond it: CUDA_ERROR_OUT_OF_MEMORY
};

State& state() {
  static State* s = new State();  // never destroyed: the runtime may call at exit
  return *s;
}

int failure(const char* name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.counts[name]++;
  auto it = s.failures.find(name);
  return it == s.failures.end() ? 0 : it->second;
}

#define FAKE_ENTRY(name)            \
  do {                              \
    if (int code = failure(name)) { \
      return code;                  \
    }                               \
  } while (0)

// Runs `work` now, or records it when `stream` is capturing.
void submit(void* stream, Work work) {
  Stream* s = static_cast<Stream*>(stream);
  if (s != nullptr && s->capturing) {
    s->captured.push_back(std::move(work));
  } else {
    work(false);
  }
}

float load_element(const void* base, long long index, int type) {
  if (type == 0) {
    return static_cast<const float*>(base)[index];
  }
  uint16_t bits = static_cast<const uint16_t*>(base)[index];
  if (type == 14) {  // bfloat16: the high half of a float32
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, 4);
    return value;
  }
  // float16
  uint32_t sign = (bits >> 15) & 1, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                                  : std::ldexp(static_cast<float>(mantissa | 1024),
                                               static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

void store_element(void* base, long long index, int type, float value) {
  if (type == 0) {
    static_cast<float*>(base)[index] = value;
    return;
  }
  if (type == 14) {  // round to nearest even into bfloat16
    uint32_t word;
    std::memcpy(&word, &value, 4);
    word += 0x7fff + ((word >> 16) & 1);
    static_cast<uint16_t*>(base)[index] = static_cast<uint16_t>(word >> 16);
    return;
  }
  // float16 (normal range only: the tests use small values)
  int exponent;
  float fraction = std::frexp(std::fabs(value), &exponent);
  uint16_t sign = value < 0 ? 0x8000 : 0;
  uint16_t bits = sign;
  if (value != 0) {
    long mantissa = std::lround(std::ldexp(fraction, 11)) - 1024;
    int biased = exponent - 1 + 15;
    if (mantissa == 1024) {
      mantissa = 0;
      biased++;
    }
    bits = sign | static_cast<uint16_t>(biased << 10) | static_cast<uint16_t>(mantissa);
  }
  static_cast<uint16_t*>(base)[index] = bits;
}

const char* error_name(int code) {
  switch (code) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return nullptr;
  }
}

}  // namespace

extern "C" {

// -- test hooks ---------------------------------------------------------------------------
void fake_cuda_fail(const char* name, int code) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().failures[name] = code;
}

void fake_cuda_set_memory_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().memory_limit = bytes;
}

void fake_cuda_reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.memory_limit = ~size_t(0);
  s.failures.clear();
  s.launches.clear();
  s.gemms.clear();
  s.counts.clear();
}

const char* fake_cuda_log_json() {
  static std::string text;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::ostringstream out;
  out << "{\"launches\": [";
  for (size_t i = 0; i < s.launches.size(); ++i) {
    const Launch& l = s.launches[i];
    out << (i ? ", " : "") << "{\"kernel\": \"" << l.kernel << "\", \"grid\": [" << l.dims[0]
        << ", " << l.dims[1] << ", " << l.dims[2] << "], \"block\": [" << l.dims[3] << ", "
        << l.dims[4] << ", " << l.dims[5] << "], \"shared\": " << l.shared << ", \"args\": [";
    for (size_t j = 0; j < l.args.size(); ++j) {
      out << (j ? ", " : "") << l.args[j];
    }
    out << "], \"via_graph\": " << (l.via_graph ? "true" : "false") << "}";
  }
  out << "], \"gemms\": [";
  for (size_t i = 0; i < s.gemms.size(); ++i) {
    const Gemm& g = s.gemms[i];
    out << (i ? ", " : "") << "{\"transa\": " << g.transa << ", \"transb\": " << g.transb
        << ", \"m\": " << g.m << ", \"n\": " << g.n << ", \"k\": " << g.k
        << ", \"batch\": " << g.batch << ", \"via_graph\": " << (g.via_graph ? "true" : "false")
        << "}";
  }
  out << "], \"calls\": {";
  bool first = true;
  for (const auto& [name, count] : s.counts) {
    out << (first ? "" : ", ") << "\"" << name << "\": " << count;
    first = false;
  }
  out << "}, \"live_allocations\": " << s.live.size() << "}";
  text = out.str();
  return text.c_str();
}

// -- driver -------------------------------------------------------------------------------
int cuInit(unsigned) { FAKE_ENTRY("cuInit"); return 0; }

int cuDriverGetVersion(int* version) {
  FAKE_ENTRY("cuDriverGetVersion");
  *version = 13000;
  return 0;
}

int cuGetErrorName(int code, const char** name) {
  *name = error_name(code);
  return *name ? 0 : 1;
}

int cuDeviceGetCount(int* count) { FAKE_ENTRY("cuDeviceGetCount"); *count = 1; return 0; }
int cuDeviceGet(int* device, int ordinal) {
  FAKE_ENTRY("cuDeviceGet");
  *device = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int length, int) {
  FAKE_ENTRY("cuDeviceGetName");
  std::strncpy(name, "OpenHLO fake GPU", static_cast<size_t>(length));
  return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int) {
  FAKE_ENTRY("cuDeviceGetAttribute");
  *value = attribute == 75 ? 9 : attribute == 76 ? 0 : attribute == 16 ? 132 : 0;
  return 0;
}

int cuDevicePrimaryCtxRetain(void** context, int) {
  FAKE_ENTRY("cuDevicePrimaryCtxRetain");
  static int the_context;
  *context = &the_context;
  return 0;
}

int cuDevicePrimaryCtxRelease_v2(int) { return 0; }
int cuCtxSetCurrent(void*) { FAKE_ENTRY("cuCtxSetCurrent"); return 0; }

int cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  FAKE_ENTRY("cuMemAlloc_v2");
  std::lock_guard<std::mutex> lock(state().mutex);
  void* p = state().live_bytes + bytes > state().memory_limit ? nullptr : std::malloc(bytes);
  if (p == nullptr) {
    return 2;
  }
  std::memset(p, 0xA5, bytes);  // never zeros: a result not written shows
  state().live[p] = bytes;
  state().live_bytes += bytes;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return 0;
}

int cuMemFree_v2(unsigned long long ptr) {
  FAKE_ENTRY("cuMemFree_v2");
  void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().live.find(p);
  if (it == state().live.end()) {
    return 1;
  }
  state().live_bytes -= it->second;
  state().live.erase(it);
  std::free(p);
  return 0;
}

int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  FAKE_ENTRY("cuMemGetInfo_v2");
  *free_bytes = size_t(80) << 30;
  *total = size_t(80) << 30;
  return 0;
}

int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t bytes, void* stream) {
  FAKE_ENTRY("cuMemcpyHtoDAsync_v2");
  void* d = reinterpret_cast<void*>(static_cast<uintptr_t>(dst));
  submit(stream, [d, src, bytes](bool) { std::memcpy(d, src, bytes); });
  return 0;
}

int cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t bytes, void* stream) {
  FAKE_ENTRY("cuMemcpyDtoHAsync_v2");
  const void* s = reinterpret_cast<const void*>(static_cast<uintptr_t>(src));
  submit(stream, [dst, s, bytes](bool) { std::memcpy(dst, s, bytes); });
  return 0;
}

int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes,
                         void* stream) {
  FAKE_ENTRY("cuMemcpyDtoDAsync_v2");
  void* d = reinterpret_cast<void*>(static_cast<uintptr_t>(dst));
  const void* s = reinterpret_cast<const void*>(static_cast<uintptr_t>(src));
  submit(stream, [d, s, bytes](bool) { std::memmove(d, s, bytes); });
  return 0;
}

int cuStreamCreate(void** stream, unsigned) {
  FAKE_ENTRY("cuStreamCreate");
  *stream = new Stream();
  return 0;
}

int cuStreamDestroy_v2(void* stream) {
  delete static_cast<Stream*>(stream);
  return 0;
}

int cuStreamSynchronize(void*) { FAKE_ENTRY("cuStreamSynchronize"); return 0; }

int cuEventCreate(void** event, unsigned) {
  FAKE_ENTRY("cuEventCreate");
  *event = new int(0);
  return 0;
}

int cuEventDestroy_v2(void* event) {
  delete static_cast<int*>(event);
  return 0;
}

int cuEventRecord(void*, void*) { FAKE_ENTRY("cuEventRecord"); return 0; }
int cuEventQuery(void*) { FAKE_ENTRY("cuEventQuery"); return 0; }
int cuEventSynchronize(void*) { FAKE_ENTRY("cuEventSynchronize"); return 0; }

struct Module {
  std::map<std::string, int> arity;  // kernel name -> number of arguments
  bool elf = false;                  // a real cubin: any name, arguments up to a null
};

struct Function {
  std::string name;
  int arity;  // -1: a kernel of a real cubin, arguments up to a null entry
};

int cuModuleLoadData(void** module, const void* image) {
  FAKE_ENTRY("cuModuleLoadData");
  if (image == nullptr) {
    return 200;
  }
  Module* loaded = new Module();
  if (std::memcmp(image, "\x7f" "ELF", 4) == 0) {
    loaded->elf = true;
    *module = loaded;
    return 0;
  }
  std::istringstream lines(static_cast<const char*>(image));
  std::string name;
  int arity;
  while (lines >> name >> arity) {
    loaded->arity[name] = arity;
  }
  if (loaded->arity.empty()) {
    delete loaded;
    return 200;  // CUDA_ERROR_INVALID_IMAGE
  }
  *module = loaded;
  return 0;
}

int cuModuleUnload(void* module) {
  delete static_cast<Module*>(module);
  return 0;
}

// Function handles are leaked with the module: a test process is short.
int cuModuleGetFunction(void** function, void* module, const char* name) {
  FAKE_ENTRY("cuModuleGetFunction");
  const Module* loaded = static_cast<Module*>(module);
  if (loaded->elf) {
    *function = new Function{name, -1};
    return 0;
  }
  auto it = loaded->arity.find(name);
  if (it == loaded->arity.end()) {
    return 500;  // CUDA_ERROR_NOT_FOUND
  }
  *function = new Function{name, it->second};
  return 0;
}

int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                   void** extra) {
  FAKE_ENTRY("cuLaunchKernel");
  const Function* f = static_cast<const Function*>(function);
  if (extra != nullptr || (f->arity != 0 && params == nullptr)) {
    return 1;
  }
  Launch launch{f->name, {gx, gy, gz, bx, by, bz}, shared, {}, false};
  // Arguments are read when the launch is made, as the driver does (in a capture too).
  for (int i = 0; f->arity < 0 ? params[i] != nullptr : i < f->arity; ++i) {
    launch.args.push_back(*static_cast<const unsigned long long*>(params[i]));
  }
  submit(stream, [launch](bool via_graph) {
    Launch done = launch;
    done.via_graph = via_graph;
    std::lock_guard<std::mutex> lock(state().mutex);
    state().launches.push_back(done);
  });
  return 0;
}

int cuStreamBeginCapture_v2(void* stream, int) {
  FAKE_ENTRY("cuStreamBeginCapture_v2");
  Stream* s = static_cast<Stream*>(stream);
  if (s->capturing) {
    return 1;
  }
  s->capturing = true;
  s->captured.clear();
  return 0;
}

int cuStreamEndCapture(void* stream, void** graph) {
  FAKE_ENTRY("cuStreamEndCapture");
  Stream* s = static_cast<Stream*>(stream);
  if (!s->capturing) {
    return 1;
  }
  s->capturing = false;
  *graph = new Graph{std::move(s->captured)};
  s->captured.clear();
  return 0;
}

int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  FAKE_ENTRY("cuGraphInstantiateWithFlags");
  *exec = new Graph(*static_cast<Graph*>(graph));
  return 0;
}

int cuGraphLaunch(void* exec, void* stream) {
  FAKE_ENTRY("cuGraphLaunch");
  Graph* graph = static_cast<Graph*>(exec);
  submit(stream, [graph](bool) {
    for (Work& work : graph->work) {
      work(true);
    }
  });
  return 0;
}

int cuGraphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  return 0;
}

int cuGraphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return 0;
}

// -- cuBLAS -------------------------------------------------------------------------------
struct FakeCublas {
  void* stream = nullptr;
};

int cublasCreate_v2(void** handle) {
  FAKE_ENTRY("cublasCreate_v2");
  *handle = new FakeCublas();
  return 0;
}

int cublasDestroy_v2(void* handle) {
  delete static_cast<FakeCublas*>(handle);
  return 0;
}

int cublasSetStream_v2(void* handle, void* stream) {
  FAKE_ENTRY("cublasSetStream_v2");
  static_cast<FakeCublas*>(handle)->stream = stream;
  return 0;
}

int cublasSetWorkspace_v2(void*, void*, size_t) { FAKE_ENTRY("cublasSetWorkspace_v2"); return 0; }

// Column-major C[b] = alpha op(A[b]) op(B[b]) + beta C[b], as cuBLAS defines it.
int cublasGemmStridedBatchedEx(void* handle, int transa, int transb, int m, int n, int k,
                               const void* alpha, const void* a, int atype, int lda,
                               long long stride_a, const void* b, int btype, int ldb,
                               long long stride_b, const void* beta, void* c, int ctype,
                               int ldc, long long stride_c, int batch, int compute, int) {
  FAKE_ENTRY("cublasGemmStridedBatchedEx");
  if (atype != btype || atype != ctype || compute != 68) {
    return 7;  // CUBLAS_STATUS_INVALID_VALUE
  }
  const float alpha_value = *static_cast<const float*>(alpha);
  const float beta_value = *static_cast<const float*>(beta);
  Gemm record{transa, transb, m, n, k, lda, ldb, ldc, batch, atype,
              stride_a, stride_b, stride_c, false};
  submit(static_cast<FakeCublas*>(handle)->stream, [=](bool via_graph) {
    for (int p = 0; p < batch; ++p) {
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
          double sum = 0;
          for (int l = 0; l < k; ++l) {
            long long ia = transa ? l + static_cast<long long>(i) * lda
                                  : i + static_cast<long long>(l) * lda;
            long long ib = transb ? j + static_cast<long long>(l) * ldb
                                  : l + static_cast<long long>(j) * ldb;
            sum += static_cast<double>(load_element(a, p * stride_a + ia, atype)) *
                   load_element(b, p * stride_b + ib, btype);
          }
          long long ic = p * stride_c + i + static_cast<long long>(j) * ldc;
          float previous = beta_value == 0 ? 0.0f : load_element(c, ic, ctype);
          store_element(c, ic, ctype, static_cast<float>(alpha_value * sum) +
                                          beta_value * previous);
        }
      }
    }
    Gemm done = record;
    done.via_graph = via_graph;
    std::lock_guard<std::mutex> lock(state().mutex);
    state().gemms.push_back(done);
  });
  return 0;
}

}  // extern "C"
