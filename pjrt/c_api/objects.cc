// Errors, memories, buffers and compile manifests: the object plumbing of the plugin.
#include "objects.h"

#include <cstring>

namespace openhlo {

// ---- errors ----------------------------------------------------------------------------------
namespace {
void ErrorDestroy(PJRT_Error* error) { delete reinterpret_cast<Error*>(error); }
void ErrorMessage(const PJRT_Error* error, const char** msg, size_t* len) {
  auto* e = reinterpret_cast<const Error*>(error);
  *msg = e->message.data();
  *len = e->message.size();
}
PJRT_Error_Code ErrorCode(const PJRT_Error* error) {
  return reinterpret_cast<const Error*>(error)->code;
}
void ErrorForEachPayload(const PJRT_Error*,
                         void (*)(const char*, size_t, const char*, size_t, void*), void*) {}
const PJRT_Error_FunctionTable kErrorTable = {
    sizeof(PJRT_Error_FunctionTable), sizeof(Error), nullptr, ErrorDestroy, ErrorMessage,
    ErrorCode, ErrorForEachPayload};
}  // namespace

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message) {
  auto* e = new Error{{&kErrorTable}, code, std::move(message)};
  return &e->base;
}

Callbacks& GetCallbacks() {
  static Callbacks callbacks;
  return callbacks;
}

// ---- memories: user data keyed by the framework, destructors run on replace/destroy --------
namespace {
void* MemoryGetUserData(PJRT_Memory* memory, const void* key) {
  auto& data = reinterpret_cast<Memory*>(memory)->user_data;
  auto it = data.find(key);
  return it == data.end() ? nullptr : it->second.first;
}
void MemorySetUserData(PJRT_Memory* memory, const void* key, void* value, void (*dtor)(void*)) {
  auto& data = reinterpret_cast<Memory*>(memory)->user_data;
  auto it = data.find(key);
  if (it != data.end()) {
    if (it->second.second) it->second.second(it->second.first);
    data.erase(it);
  }
  data[key] = {value, dtor};
}
}  // namespace
extern const PJRT_Memory_FunctionTable kMemoryTable = {
    sizeof(PJRT_Memory_FunctionTable), nullptr, sizeof(Memory), MemoryGetUserData,
    MemorySetUserData};

Memory::~Memory() {
  for (auto& entry : user_data)
    if (entry.second.second) entry.second.second(entry.second.first);
}

// ---- buffers -----------------------------------------------------------------------------------
size_t ElementSize(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_T_PRED: case PJRT_T_S8: case PJRT_T_U8: return 1;
    case PJRT_T_S4: case PJRT_T_U4: case PJRT_T_S2: case PJRT_T_U2: return 1;
    case PJRT_T_F8E5M2: case PJRT_T_F8E4M3FN: case PJRT_T_F8E4M3B11FNUZ: case PJRT_T_F8E5M2FNUZ:
    case PJRT_T_F8E4M3FNUZ: case PJRT_T_F8E4M3: case PJRT_T_F8E3M4: case PJRT_T_F8E8M0FNU:
      return 1;
    case PJRT_T_S16: case PJRT_T_U16: case PJRT_T_F16: case PJRT_T_BF16: return 2;
    case PJRT_T_S32: case PJRT_T_U32: case PJRT_T_F32: return 4;
    case PJRT_T_S64: case PJRT_T_U64: case PJRT_T_F64: case PJRT_T_C64: return 8;
    case PJRT_T_C128: return 16;
    default: return 0;
  }
}

void Contents::Adopt(void* memory, FastFreeResultFn free_result, void* owner) {
  data = static_cast<char*>(memory);
  storage = std::shared_ptr<char>(data, [free_result, owner](char*) { free_result(owner); });
}

PJRT_Buffer* NewBuffer(PJRT_Buffer_Type type, const int64_t* dims, size_t rank,
                       PJRT_Device* device, bool allocate) {
  auto* buffer = new PJRT_Buffer;
  buffer->type = type;
  buffer->dims.assign(dims, dims + rank);
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= static_cast<size_t>(dims[i]);
  buffer->nbytes = count * ElementSize(type);
  buffer->contents = std::make_shared<Contents>();
  if (allocate) {
    // aligned_alloc needs a multiple of the alignment; 64 also suits AVX-512 kernels.
    buffer->contents->storage.reset(
        static_cast<char*>(std::aligned_alloc(64, (buffer->nbytes + 63) / 64 * 64 + 64)), std::free);
    buffer->contents->data = buffer->contents->storage.get();
  }
  buffer->device = device;
  return buffer;
}

PJRT_Error* AwaitDefined(const PJRT_Buffer* buffer, const char* fn) {
  if (buffer->defined == nullptr) return nullptr;
  buffer->defined->Wait();
  if (buffer->defined->code() == PJRT_OK) return nullptr;
  return MakeError(buffer->defined->code(), std::string("openhlo ") + fn +
                                                ": the execution computing this buffer failed: " +
                                                buffer->defined->message());
}

// ---- compile manifests -----------------------------------------------------------------------
// Little-endian int64s and length-prefixed byte strings, in the order written by
// pjrt/c_api/loader.py `encode_manifest`.
namespace {
struct Reader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  int64_t Int() {
    int64_t v = 0;
    if (pos + 8 > s.size()) { ok = false; return 0; }
    std::memcpy(&v, s.data() + pos, 8);
    pos += 8;
    return v;
  }
  double Float() {
    int64_t bits = Int();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string Bytes() {
    int64_t n = Int();
    if (!ok || n < 0 || pos + static_cast<size_t>(n) > s.size()) { ok = false; return {}; }
    std::string out = s.substr(pos, static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return out;
  }
};
}  // namespace

bool DecodeManifest(const std::string& bytes, Compiled* out) {
  Reader r{bytes};
  out->name = r.Bytes();
  out->fingerprint = r.Bytes();
  out->num_replicas = r.Int();
  out->num_partitions = r.Int();
  int64_t num_devices = r.Int();
  for (int64_t i = 0; r.ok && i < num_devices; ++i) out->device_ids.push_back(r.Int());
  out->device_assignment = r.Bytes();
  int64_t num_outputs = r.Int();
  for (int64_t i = 0; r.ok && i < num_outputs; ++i) {
    out->output_types.push_back(static_cast<PJRT_Buffer_Type>(r.Int()));
    int64_t rank = r.Int();
    std::vector<int64_t> dims;
    for (int64_t d = 0; r.ok && d < rank; ++d) dims.push_back(r.Int());
    out->output_dims.push_back(dims);
    out->output_kinds.push_back(r.Bytes());
    out->output_shardings.push_back(r.Bytes());
  }
  int64_t num_parameters = r.Int();
  for (int64_t i = 0; r.ok && i < num_parameters; ++i) {
    out->parameter_shardings.push_back(r.Bytes());
    out->parameter_ranks.push_back(r.Int());
  }
  int64_t num_donors = r.Int();
  for (int64_t i = 0; r.ok && i < num_donors; ++i) out->donors.push_back(r.Int());
  if (!r.ok || r.pos != bytes.size() ||
      static_cast<int64_t>(out->device_ids.size()) != out->num_replicas * out->num_partitions)
    return false;
  for (size_t i = 0; i < out->output_dims.size(); ++i) {
    out->flat_dims.insert(out->flat_dims.end(), out->output_dims[i].begin(),
                          out->output_dims[i].end());
    out->ranks.push_back(out->output_dims[i].size());
    out->kind_ptrs.push_back(out->output_kinds[i].data());
    out->kind_sizes.push_back(out->output_kinds[i].size());
    out->sharding_ptrs.push_back(out->output_shardings[i].data());
    out->sharding_sizes.push_back(out->output_shardings[i].size());
    if (ElementSize(out->output_types[i]) == 0) return false;
    out->output_layouts.push_back(RowMajorLayout(out->output_dims[i].size(), true));
  }
  for (size_t i = 0; i < out->parameter_shardings.size(); ++i) {
    out->parameter_sharding_ptrs.push_back(out->parameter_shardings[i].data());
    out->parameter_sharding_sizes.push_back(out->parameter_shardings[i].size());
    if (out->parameter_ranks[i] < 0) return false;
    out->parameter_layouts.push_back(RowMajorLayout(out->parameter_ranks[i], true));
  }
  // Pointers last: the vectors no longer grow.
  for (PJRT_Layouts_MemoryLayout& layout : out->output_layouts)
    out->output_layout_ptrs.push_back(&layout);
  for (PJRT_Layouts_MemoryLayout& layout : out->parameter_layouts)
    out->parameter_layout_ptrs.push_back(&layout);
  return true;
}

bool DecodeCostAnalysis(const std::string& bytes, Compiled* out) {
  Reader r{bytes};
  int64_t count = r.Int();
  std::vector<std::string> names;
  std::vector<double> values;
  for (int64_t i = 0; r.ok && i < count; ++i) {
    names.push_back(r.Bytes());
    values.push_back(r.Float());
  }
  if (!r.ok || r.pos != bytes.size()) return false;
  out->cost_names = std::move(names);
  out->cost_properties.assign(values.size(), PJRT_NamedValue{});
  for (size_t i = 0; i < values.size(); ++i) {
    PJRT_NamedValue& v = out->cost_properties[i];
    v.struct_size = sizeof(PJRT_NamedValue);
    v.name = out->cost_names[i].data();
    v.name_size = out->cost_names[i].size();
    v.type = PJRT_NV_FLOAT;  // XLA reports cost properties as floats
    v.float_value = static_cast<float>(values[i]);
    v.value_size = 1;
  }
  return true;
}

bool DecodeMemoryStats(const std::string& bytes, Compiled* out) {
  Reader r{bytes};
  for (int64_t& stat : out->memory_stats) stat = r.Int();
  return r.ok && r.pos == bytes.size();
}

void Compiled::InstallFastPath(std::unique_ptr<FastPath> offered) {
  FastPath* expected = nullptr;
  if (offered && fast.compare_exchange_strong(expected, offered.get(), std::memory_order_acq_rel))
    offered.release();  // owned by `fast` now; a second offer (a racing execution) is dropped
}

Compiled::~Compiled() {
  delete fast.load();
  // After the Python side detached (interpreter exit), never call into it again.
  if (handle && GetCallbacks().release) GetCallbacks().release(handle);
}

}  // namespace openhlo
