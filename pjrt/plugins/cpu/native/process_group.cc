// process_group.h: the processes of a multi-process client and the byte exchange among them
// (gloo point-to-point over TCP), and the Python bindings of both.
#include "process_group.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "executor.h"
#include "kernel.h"

#ifdef OPENHLO_HAVE_GLOO
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "gloo_store.h"
#endif

namespace openhlo::cpu {

namespace {

std::string process_list(const std::vector<int>& processes) {
  std::string out = "[";
  for (size_t i = 0; i < processes.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(processes[i]);
  }
  return out + "]";
}

}  // namespace

#ifdef OPENHLO_HAVE_GLOO

bool have_gloo() { return true; }

struct ProcessGroups::Contexts {
  std::shared_ptr<gloo::transport::Device> device;
  std::mutex mu;
  std::map<std::vector<int>, std::shared_ptr<gloo::Context>> by_processes;
  ByteBuffers buffers;
};

ProcessGroups::ProcessGroups(int process_index, int num_processes,
                             std::shared_ptr<KeyValueStore> store, std::string hostname,
                             double timeout_s)
    : process_index_(process_index), num_processes_(num_processes), store_(std::move(store)),
      timeout_s_(timeout_s), contexts_(std::make_unique<Contexts>()) {
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  contexts_->device = gloo::transport::tcp::CreateDevice(attr);
}

ProcessGroups::~ProcessGroups() = default;

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

Clock::time_point deadline_from_now(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

// The slot of an exchange: the same in every process for the same tag. Bit 0 tells the
// two messages of an exchange (sizes, then bytes) apart.
uint64_t slot_of(const std::string& tag, int phase) {
  return (std::hash<std::string>{}(tag) << 1) | static_cast<uint64_t>(phase);
}

}  // namespace

std::shared_ptr<gloo::Context> ProcessGroups::context_for(const std::vector<int>& processes,
                                                          int rank, const std::string& what) {
  const int size = static_cast<int>(processes.size());
  std::lock_guard<std::mutex> lock(contexts_->mu);
  auto& cached = contexts_->by_processes[processes];
  if (cached == nullptr) {
    auto created = std::make_shared<gloo::rendezvous::Context>(rank, size);
    created->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
    const std::string prefix = "gloo/" + process_list(processes) + "/";
    GlooStore store(store_, prefix, timeout_s_);
    try {
      created->connectFullMesh(store, contexts_->device);
    } catch (std::exception& e) {
      // gloo publishes each rank's addresses under its rank: the ranks without a key
      // never came.
      std::vector<int> missing;
      for (int r = 0; r < size; ++r) {
        try {
          store_->get(prefix + std::to_string(r), 0.0);
        } catch (std::exception&) {
          missing.push_back(processes[r]);
        }
      }
      throw ExecError(what + ": process(es) " + process_list(missing) + " of " +
                      process_list(processes) + " did not arrive within " +
                      seconds_text(timeout_s_) +
                      " s (in process " + std::to_string(process_index_) +
                      ", connecting: " + e.what() + ")");
    }
    cached = created;
  }
  return cached;
}

void ProcessGroups::allgather(const std::vector<int>& processes, const std::string& tag,
                              const std::string& mine, std::vector<std::string>& received,
                              const std::string& what) {
  const auto me_at = std::find(processes.begin(), processes.end(), process_index_);
  if (me_at == processes.end()) {
    throw ExecError(what + ": process " + std::to_string(process_index_) +
                    " is not one of the processes " + process_list(processes));
  }
  const int rank = static_cast<int>(me_at - processes.begin());
  const int size = static_cast<int>(processes.size());
  std::vector<std::string>& out = received;
  out.resize(size);
  if (size == 1) return;

  const auto deadline = deadline_from_now(timeout_s_);
  const auto context = context_for(processes, rank, what);

  // Sizes first (8 bytes from and to every peer), then the bytes: one recv per peer, so a
  // peer that never answers is known by name.
  constexpr uint64_t kNotReceived = ~uint64_t{0};
  std::vector<uint64_t> sizes(size, kNotReceived);
  sizes[rank] = mine.size();
  std::vector<std::string> failed(size);
  auto run_phase = [&](int phase, const std::function<std::pair<void*, size_t>(int)>& recv_into,
                       void* send_ptr, size_t send_bytes) {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(size);
    auto send = context->createUnboundBuffer(send_ptr, send_bytes);
    const uint64_t slot = slot_of(tag, phase);
    for (int r = 0; r < size; ++r) {
      if (r == rank || !failed[r].empty()) continue;
      auto [ptr, bytes] = recv_into(r);
      recvs[r] = context->createUnboundBuffer(ptr, bytes);
      try {
        recvs[r]->recv(r, slot);
        send->send(r, slot);
      } catch (std::exception& e) {
        failed[r] = e.what();
      }
    }
    for (int r = 0; r < size; ++r) {
      if (r == rank || recvs[r] == nullptr || !failed[r].empty()) continue;
      try {
        if (!recvs[r]->waitRecv(left_until(deadline))) failed[r] = "aborted";
      } catch (std::exception& e) {
        failed[r] = e.what();
      }
    }
    for (int r = 0; r < size; ++r) {
      if (r == rank || recvs[r] == nullptr || !failed[r].empty()) continue;
      try {
        send->waitSend(left_until(deadline));
      } catch (std::exception& e) {
        failed[r] = e.what();
      }
    }
  };
  run_phase(0, [&](int r) { return std::pair<void*, size_t>(&sizes[r], sizeof(uint64_t)); },
            &sizes[rank], sizeof(uint64_t));
  bool ok = true;
  for (int r = 0; r < size; ++r) {
    // A recv that gloo reports complete although the peer sent nothing (its connection
    // closed) leaves the size unset: that peer did not arrive either.
    if (failed[r].empty() && sizes[r] == kNotReceived) failed[r] = "no size received";
    ok &= failed[r].empty();
  }
  if (ok) {
    for (int r = 0; r < size; ++r) {
      if (r != rank) out[r].resize(sizes[r]);
    }
    // gloo's buffers take a non-const pointer; a send only reads it.
    run_phase(1, [&](int r) { return std::pair<void*, size_t>(out[r].data(), out[r].size()); },
              const_cast<char*>(mine.data()), mine.size());
    for (int r = 0; r < size; ++r) ok &= failed[r].empty();
  }
  if (!ok) {
    std::vector<int> missing;
    std::string reasons;
    for (int r = 0; r < size; ++r) {
      if (failed[r].empty()) continue;
      missing.push_back(processes[r]);
      reasons += "; process " + std::to_string(processes[r]) + ": " + failed[r];
    }
    throw ExecError(what + ": process(es) " + process_list(missing) + " of " +
                    process_list(processes) + " did not arrive within " +
                    seconds_text(timeout_s_) +
                    " s or their connection broke (in process " +
                    std::to_string(process_index_) + reasons + ")");
  }
}

void ProcessGroups::chain_reduce(const std::vector<int>& chain, const std::string& tag,
                                 void* result, size_t nbytes, size_t chunk_bytes, bool rotate,
                                 const ChunkFold& fold, const std::string& what) {
  const auto me_at = std::find(chain.begin(), chain.end(), process_index_);
  if (me_at == chain.end()) {
    throw ExecError(what + ": process " + std::to_string(process_index_) +
                    " is not one of the processes " + process_list(chain));
  }
  const size_t links = chain.size();
  const size_t at = static_cast<size_t>(me_at - chain.begin());
  char* const out = static_cast<char*>(result);
  const size_t chunks = (nbytes + chunk_bytes - 1) / chunk_bytes;
  auto offset_of = [&](size_t i) { return i * chunk_bytes; };
  auto bytes_of = [&](size_t i) { return std::min(chunk_bytes, nbytes - i * chunk_bytes); };
  if (links == 1) {
    for (size_t i = 0; i < chunks; ++i) {
      const void* done = fold(offset_of(i), bytes_of(i), false);
      if (done != out + offset_of(i)) std::memcpy(out + offset_of(i), done, bytes_of(i));
    }
    return;
  }
  std::vector<int> processes = chain;
  std::sort(processes.begin(), processes.end());
  // Chunk i's chain starts at chain[start(i)]; this process is step_of(i) along it.
  auto start = [&](size_t i) { return rotate ? i % links : 0; };
  auto step_of = [&](size_t i) { return (at + links - start(i)) % links; };
  auto process_at = [&](size_t i, size_t step) { return chain[(start(i) + step) % links]; };
  auto rank_of = [&](int process) {
    return static_cast<int>(std::find(processes.begin(), processes.end(), process) -
                            processes.begin());
  };
  const auto deadline = deadline_from_now(timeout_s_);
  const auto context = context_for(processes, rank_of(process_index_), what);
  // Chunk i's partial result and its final value travel under slots of their own, so they
  // never need a common order with other exchanges.
  auto slot = [&](size_t i, int phase) {
    return std::hash<std::string>{}(tag + "/" + std::to_string(2 * i + phase));
  };
  auto fail = [&](int process, const std::string& reason) {
    return ExecError(what + ": process " + std::to_string(process) + " of " +
                     process_list(chain) + " did not answer within " +
                     seconds_text(timeout_s_) + " s or its connection broke (in process " +
                     std::to_string(process_index_) + ": " + reason + ")");
  };
  auto wait = [&](gloo::transport::UnboundBuffer& buffer, bool recv, int process) {
    try {
      const bool done = recv ? buffer.waitRecv(left_until(deadline))
                             : buffer.waitSend(left_until(deadline));
      if (!done) throw std::runtime_error("aborted");
    } catch (std::exception& e) {
      throw fail(process, e.what());
    }
  };
  using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;
  std::vector<Buffer> partials(chunks), finals(chunks), sends(chunks);
  // Every receive is posted first: the peers' chunks land in `result` as they come. A
  // chunk's final value cannot arrive before this process has passed its partial on, so
  // the two receives into the same bytes never overlap.
  for (size_t i = 0; i < chunks; ++i) {
    const size_t step = step_of(i);
    const int from = process_at(i, step > 0 ? step - 1 : links - 1);
    try {
      if (step > 0) {
        partials[i] = context->createUnboundBuffer(out + offset_of(i), bytes_of(i));
        partials[i]->recv(rank_of(from), slot(i, 0));
      }
      if (step + 1 < links) {
        finals[i] = context->createUnboundBuffer(out + offset_of(i), bytes_of(i));
        finals[i]->recv(rank_of(process_at(i, links - 1)), slot(i, 1));
      }
    } catch (std::exception& e) {
      throw fail(from, e.what());
    }
  }
  for (size_t i = 0; i < chunks; ++i) {
    const size_t step = step_of(i);
    if (step > 0) wait(*partials[i], true, process_at(i, step - 1));
    // gloo's buffers take a non-const pointer; a send only reads it.
    void* done = const_cast<void*>(fold(offset_of(i), bytes_of(i), step > 0));
    sends[i] = context->createUnboundBuffer(done, bytes_of(i));
    const int next = process_at(i, (step + 1) % links);
    try {
      if (step + 1 < links) {
        sends[i]->send(rank_of(next), slot(i, 0));
      } else {
        for (size_t c = 0; c + 1 < links; ++c) {
          sends[i]->send(rank_of(process_at(i, c)), slot(i, 1));
        }
      }
    } catch (std::exception& e) {
      throw fail(next, e.what());
    }
  }
  for (size_t i = 0; i < chunks; ++i) {
    const size_t step = step_of(i);
    if (step + 1 < links) wait(*finals[i], true, process_at(i, links - 1));
    const size_t count = step + 1 < links ? 1 : links - 1;
    for (size_t n = 0; n < count; ++n) wait(*sends[i], false, process_at(i, (step + 1) % links));
  }
}

#else  // without gloo: multi-process clients are refused (pjrt/plugins/cpu/plugin.py says so)

bool have_gloo() { return false; }

struct ProcessGroups::Contexts {
  ByteBuffers buffers;
};

ProcessGroups::ProcessGroups(int process_index, int num_processes,
                             std::shared_ptr<KeyValueStore> store, std::string, double timeout_s)
    : process_index_(process_index), num_processes_(num_processes), store_(std::move(store)),
      timeout_s_(timeout_s) {
  throw Unsupported("the cpu backend was built without gloo (install libgloo-dev and rebuild)");
}

ProcessGroups::~ProcessGroups() = default;

void ProcessGroups::allgather(const std::vector<int>&, const std::string&, const std::string&,
                              std::vector<std::string>&, const std::string& what) {
  throw ExecError(what + ": the cpu backend was built without gloo");
}

void ProcessGroups::chain_reduce(const std::vector<int>&, const std::string&, void*, size_t,
                                 size_t, bool, const ChunkFold&, const std::string& what) {
  throw ExecError(what + ": the cpu backend was built without gloo");
}

#endif  // OPENHLO_HAVE_GLOO

ByteBuffers& ProcessGroups::buffers() { return contexts_->buffers; }

std::vector<std::string> ByteBuffers::take(size_t count) {
  std::vector<std::string> out(count);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < count && !free_.empty(); ++i) {
    out[i] = std::move(free_.back());
    free_.pop_back();
  }
  return out;
}

void ByteBuffers::give_back(std::vector<std::string>& buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::string& buffer : buffers) {
    if (free_.size() < kKept) free_.push_back(std::move(buffer));
  }
  buffers.clear();
}

namespace {

// Contributions on the wire: per member, its group position and its arrays (defined flag,
// dtype, rank, dims, bytes), native-endian (every process runs on the same kind of machine).
template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T take(const std::string& in, size_t& at, const std::string& what) {
  if (at + sizeof(T) > in.size()) throw ExecError(what + ": a truncated contribution");
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

// Into `out` (cleared; its memory reused): the contributions of this process's members.
void pack(const std::vector<std::vector<Array>>& values, const std::vector<bool>& mine,
          std::string& out) {
  size_t bytes = 0;
  for (size_t pos = 0; pos < values.size(); ++pos) {
    if (!mine[pos]) continue;
    bytes += 2 * sizeof(uint64_t);
    for (const Array& a : values[pos]) {
      bytes += 1 + (a.defined() ? 1 + sizeof(uint64_t) * (1 + a.shape.size()) + a.nbytes() : 0);
    }
  }
  out.clear();
  out.reserve(bytes);
  for (size_t pos = 0; pos < values.size(); ++pos) {
    if (!mine[pos]) continue;
    put<uint64_t>(out, pos);
    put<uint64_t>(out, values[pos].size());
    for (const Array& a : values[pos]) {
      put<uint8_t>(out, a.defined());
      if (!a.defined()) continue;
      put<uint8_t>(out, static_cast<uint8_t>(a.dtype));
      put<uint64_t>(out, a.shape.size());
      for (int64_t d : a.shape) put<int64_t>(out, d);
      out.append(static_cast<const char*>(a.raw()), a.nbytes());
    }
  }
}

void unpack(const std::string& in, std::vector<std::vector<Array>>& values,
            std::vector<bool>& filled, const std::string& what) {
  size_t at = 0;
  while (at < in.size()) {
    const auto pos = take<uint64_t>(in, at, what);
    const auto count = take<uint64_t>(in, at, what);
    if (pos >= values.size()) throw ExecError(what + ": a contribution for no member");
    std::vector<Array> arrays(count);
    for (Array& a : arrays) {
      if (!take<uint8_t>(in, at, what)) continue;
      const auto dtype = static_cast<DType>(take<uint8_t>(in, at, what));
      Shape shape(take<uint64_t>(in, at, what));
      for (int64_t& d : shape) d = take<int64_t>(in, at, what);
      a = allocate(dtype, shape);
      const size_t bytes = a.nbytes();
      if (at + bytes > in.size()) throw ExecError(what + ": a truncated contribution");
      std::memcpy(a.raw(), in.data() + at, bytes);
      at += bytes;
    }
    values[pos] = std::move(arrays);
    filled[pos] = true;
  }
}

}  // namespace

void exchange_across_processes(ProcessGroups& groups, const std::vector<int>& instance_process,
                               const std::vector<int64_t>& group, const std::string& tag,
                               const std::string& what, std::vector<std::vector<Array>>& values) {
  std::vector<int> processes;
  std::vector<bool> mine(group.size());
  for (size_t pos = 0; pos < group.size(); ++pos) {
    const int process = instance_process.at(static_cast<size_t>(group[pos]));
    mine[pos] = process == groups.process_index();
    if (std::find(processes.begin(), processes.end(), process) == processes.end()) {
      processes.push_back(process);
    }
  }
  std::sort(processes.begin(), processes.end());
  // buffers[0]: this process's contributions; buffers[1 + r]: those of processes[r].
  auto buffers = groups.buffers().take(1 + processes.size());
  std::vector<std::string> received(std::make_move_iterator(buffers.begin() + 1),
                                    std::make_move_iterator(buffers.end()));
  buffers.resize(1);
  std::vector<bool> filled = mine;
  try {
    pack(values, mine, buffers[0]);
    groups.allgather(processes, tag, buffers[0], received,
                     what + " across processes " + process_list(processes));
    for (size_t r = 0; r < processes.size(); ++r) {
      if (processes[r] != groups.process_index()) unpack(received[r], values, filled, what);
    }
  } catch (...) {
    groups.buffers().give_back(buffers);
    groups.buffers().give_back(received);
    throw;
  }
  groups.buffers().give_back(buffers);
  groups.buffers().give_back(received);
  for (size_t pos = 0; pos < group.size(); ++pos) {
    if (!filled[pos]) {
      throw ExecError(what + ": no contribution of instance " + std::to_string(group[pos]) +
                      " came from process " +
                      std::to_string(instance_process[static_cast<size_t>(group[pos])]));
    }
  }
}

namespace {

// The Python store (pjrt/distributed/store.py) as a KeyValueStore: called with the GIL,
// only while gloo contexts connect.
class PythonStore : public KeyValueStore {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override {
    call([&] { store_.get().attr("set")(key, py::bytes(value)); }, key);
  }

  std::string get(const std::string& key, double timeout_s) override {
    std::string value;
    call([&] { value = store_.get().attr("get")(key, timeout_s).cast<std::string>(); }, key);
    return value;
  }

 private:
  void call(const std::function<void()>& fn, const std::string& key) {
    if (!python_usable()) throw std::runtime_error("key " + key + ": Python is exiting");
    std::string error;
    {
      py::gil_scoped_acquire gil;
      try {
        fn();
        return;
      } catch (py::error_already_set& e) {
        error = e.what();
      }
    }
    throw std::runtime_error(error);
  }

  SharedPyObject store_;
};

}  // namespace

void bind_process_groups(py::module_& m) {
  m.attr("HAVE_GLOO") = have_gloo();
  py::class_<ProcessGroups, std::shared_ptr<ProcessGroups>>(m, "ProcessGroups",
      "The processes of a multi-process cpu client (native/process_group.h).")
      .def(py::init([](int process_index, int num_processes, py::object store,
                       std::string hostname, double timeout_s) {
             return std::make_shared<ProcessGroups>(
                 process_index, num_processes, std::make_shared<PythonStore>(std::move(store)),
                 std::move(hostname), timeout_s);
           }),
           py::arg("process_index"), py::arg("num_processes"), py::arg("store"),
           py::arg("hostname"), py::arg("timeout_s"))
      .def_property_readonly("process_index", &ProcessGroups::process_index)
      .def_property_readonly("num_processes", &ProcessGroups::num_processes)
      .def("allgather", [](ProcessGroups& groups, const std::vector<int>& processes,
                           const std::string& tag, const py::bytes& mine) {
             std::string data = mine;
             std::vector<std::string> out;
             {
               py::gil_scoped_release release;
               groups.allgather(processes, tag, data, out, "allgather " + tag);
             }
             py::list result;
             for (size_t r = 0; r < out.size(); ++r) {
               result.append(py::bytes(processes[r] == groups.process_index() ? data : out[r]));
             }
             return result;
           }, "Test entry point: every process of `processes` contributes bytes; returns all.");
}

}  // namespace openhlo::cpu
