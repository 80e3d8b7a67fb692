#include "executor.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "collectives.h"
#include "numpy_bridge.h"
#include "profiler.h"

namespace openhlo::cpu {

namespace {

SharedPyObject g_token;

// Errors keep the instruction's place; a Python exception from a callback passes through
// unchanged (its message already names the op) so Python sees its original type.
[[noreturn]] void rethrow_located(const Instr& instr) {
  try {
    throw;
  } catch (py::error_already_set&) {
    throw;
  } catch (ExecError& e) {
    std::string msg = e.what();
    if (msg.rfind(instr.where, 0) == 0) throw;
    throw ExecError(instr.where + ": " + msg);
  } catch (std::exception& e) {
    throw ExecError(instr.where + ": " + e.what());
  }
}

void run_program(const Program& program, Frame& frame);

// A kernel's operands or results: `n` Arrays, on the stack up to kInline (constructed only
// as far as used: an iteration of a small loop runs a few such kernels).
class LocalArrays {
 public:
  static constexpr size_t kInline = 8;
  explicit LocalArrays(size_t n) : n_(n) {
    if (n > kInline) {
      heap_.resize(n);
      p_ = heap_.data();
    } else {
      p_ = reinterpret_cast<Array*>(inline_);
      for (size_t i = 0; i < n; ++i) new (p_ + i) Array();
    }
  }
  ~LocalArrays() {
    if (n_ <= kInline) {
      for (size_t i = 0; i < n_; ++i) p_[i].~Array();
    }
  }
  LocalArrays(const LocalArrays&) = delete;
  LocalArrays& operator=(const LocalArrays&) = delete;
  Array& operator[](size_t i) { return p_[i]; }
  Array* data() { return p_; }

 private:
  size_t n_;
  Array* p_;
  alignas(Array) unsigned char inline_[kInline * sizeof(Array)];
  std::vector<Array> heap_;
};

// Which of the body's results may be moved out of their slots at the end of an iteration:
// those the body defines (a parameter or an instruction's result), at their last place in
// the results. A value from outside the loop is read again by the next iteration.
std::vector<bool> movable_results(const Program& body) {
  std::vector<int32_t> defined(body.params);
  for (const Instr& instr : body.instrs) {
    defined.insert(defined.end(), instr.out.begin(), instr.out.end());
  }
  std::sort(defined.begin(), defined.end());
  const size_t n = body.results.size();
  std::vector<bool> movable(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t s = body.results[i];
    bool later = false;
    for (size_t j = i + 1; j < n; ++j) later |= body.results[j] == s;
    movable[i] = !later && std::binary_search(defined.begin(), defined.end(), s);
  }
  return movable;
}

void run_while(const Instr& instr, Frame& frame) {
  const Program& cond = *instr.regions[0];
  const Program& body = *instr.regions[1];
  auto& slots = frame.slots;
  const size_t n = instr.in.size();
  const std::vector<bool> movable = movable_results(body);
  // The carried values live in the condition's parameter slots between iterations. The
  // condition borrows them (it releases no parameter: lend_params in executor_bindings.cc),
  // then they move on to the body's parameters, and the body's results move back: the body's
  // next iteration holds the only reference to a carried array, so a kernel may take its
  // storage over (no second owner in a slot), and no value is copied on the way.
  for (size_t i = 0; i < n; ++i) slots[cond.params[i]] = slots[instr.in[i]];
  for (;;) {
    run_program(cond, frame);
    if (!*slots[cond.results[0]].data<bool>()) break;
    for (size_t i = 0; i < n; ++i) slots[body.params[i]] = std::move(slots[cond.params[i]]);
    run_program(body, frame);
    // Body slots and the condition's parameters are distinct, so a result read twice is
    // copied at its earlier places before its last place moves it.
    for (size_t i = 0; i < n; ++i) {
      Array& result = slots[body.results[i]];
      slots[cond.params[i]] = movable[i] ? std::move(result) : result;
    }
    for (int32_t p : body.params) {
      if (slots[p].defined()) slots[p] = Array();  // a parameter that is not a result
    }
  }
  for (size_t i = 0; i < n; ++i) slots[instr.out[i]] = std::move(slots[cond.params[i]]);
}

void run_branch(const Program& branch, const Instr& instr, Frame& frame) {
  run_program(branch, frame);
  for (size_t i = 0; i < instr.out.size(); ++i) {
    frame.slots[instr.out[i]] = frame.slots[branch.results[i]];
  }
}

void require_python(const char* what) {
  if (!python_usable()) throw ExecError(std::string(what) + ": the Python interpreter is exiting");
}

void run_callback(const Instr& instr, Frame& frame) {
  auto& slots = frame.slots;
  require_python("interpreter fallback");
  py::gil_scoped_acquire gil;
  py::list args;
  for (int32_t s : instr.in) {
    const Array& a = slots[s];
    if (!a.defined()) {
      args.append(g_token.get());
    } else {
      py::array view = array_to_numpy(a);
      // The interpreter never writes into operands; make sure of it.
      view.attr("flags").attr("writeable") = false;
      args.append(std::move(view));
    }
  }
  py::object state = frame.host_state.is_none() ? py::none() : frame.host_state.get();
  py::object ctx_ids = py::make_tuple(frame.ctx.replica_id, frame.ctx.partition_id);
  py::sequence results = instr.callback.get()(state, ctx_ids, args);
  if (static_cast<size_t>(py::len(results)) != instr.out.size()) {
    throw ExecError("interpreter fallback returned " + std::to_string(py::len(results)) +
                    " values, expected " + std::to_string(instr.out.size()));
  }
  for (size_t i = 0; i < instr.out.size(); ++i) {
    if (instr.out_is_token[i]) {
      slots[instr.out[i]] = Array();
      continue;
    }
    Array a = array_from_numpy(results[i], instr.out_specs[i].dtype);
    if (a.shape != instr.out_specs[i].shape) {
      throw ExecError("interpreter fallback returned a result of the wrong shape");
    }
    slots[instr.out[i]] = std::move(a);
  }
}

Array scalar_u32(int64_t value) {
  Array a = allocate(DType::U32, {});
  *a.data<uint32_t>() = static_cast<uint32_t>(value);
  return a;
}

void run_parallel_instr(const Instr& instr, Frame& frame) {
  const size_t count = instr.parallel.size();
  std::vector<std::vector<Array>> inputs(count), outputs(count);
  size_t at = 0;
  for (size_t k = 0; k < count; ++k) {
    const size_t n = instr.parallel[k]->param_specs.size();
    for (size_t i = 0; i < n; ++i) inputs[k].push_back(frame.slots[instr.in[at + i]]);
    at += n;
  }
  std::vector<SharedPyObject> states(count);
  {
    require_python("run_parallel");
    py::gil_scoped_acquire gil;
    py::list made = instr.make_host_states.get()(count);
    for (size_t k = 0; k < count; ++k) states[k] = SharedPyObject(made[k]);
  }
  std::vector<std::exception_ptr> errors(count);
  // Native collectives of the instances meet here (collectives.h); interpreter fallbacks
  // meet in the Python process grid of their host states.
  Rendezvous rendezvous(static_cast<int64_t>(count));
  auto work = [&](size_t k) {
    ExecContext ctx;
    ctx.replica_id = static_cast<int64_t>(k) / instr.num_partitions;
    ctx.partition_id = static_cast<int64_t>(k) % instr.num_partitions;
    ctx.device_ordinal = static_cast<int64_t>(k);
    ctx.num_replicas = static_cast<int64_t>(count) / instr.num_partitions;
    ctx.num_partitions = instr.num_partitions;
    ctx.rendezvous = &rendezvous;
    try {
      outputs[k] = run_executable(*instr.parallel[k], std::move(inputs[k]), ctx, states[k]);
      rendezvous.finished(static_cast<int64_t>(k));
    } catch (...) {
      errors[k] = std::current_exception();
      // Unblock the other instances waiting in a rendezvous for this one.
      rendezvous.abort(static_cast<int64_t>(k), errors[k]);
      if (!python_usable()) return;
      py::gil_scoped_acquire gil;
      py::object state = states[k].get();
      if (py::hasattr(state, "abort")) state.attr("abort")("instance " + std::to_string(k) + " failed");
    }
  };
  // One thread per instance: they rendezvous in collectives, so all must run at once.
  std::vector<std::thread> threads;
  for (size_t k = 1; k < count; ++k) threads.emplace_back(work, k);
  work(0);
  for (auto& t : threads) t.join();
  // The instance that failed first is the cause; the others stopped because of it.
  const int64_t root = rendezvous.failed_instance();
  if (root >= 0 && errors[root]) std::rethrow_exception(errors[root]);
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  size_t o = 0;
  for (auto& outs : outputs) {
    for (auto& a : outs) frame.slots[instr.out[o++]] = std::move(a);
  }
}

// Queues the instruction's collective on the frame's communication thread. The task holds
// its own references to the operands (released as soon as it has run) and a copy of the
// context; the Program outlives the frame, whose destructor joins the thread.
void start_async(const Instr& instr, Frame& frame) {
  std::vector<Array> operands;
  operands.reserve(instr.in.size());
  for (int32_t s : instr.in) operands.push_back(frame.slots[s]);
  if (!frame.comm) frame.comm = std::make_unique<CommThread>();
  const Instr* at = &instr;
  ExecContext ctx = frame.ctx;
  frame.started[instr.out[0]] = frame.comm->submit(
      [at, ctx, operands = std::move(operands)]() mutable {
        std::vector<Array> results(at->out_specs.size());
        const bool profiling = profiling_enabled();
        const auto start = std::chrono::steady_clock::now();
        try {
          at->step(ctx, operands.data(), results.data());
        } catch (...) {
          rethrow_located(*at);  // the done reports it, naming the start
        }
        if (profiling) {
          profile_record(at->where, at, ctx, start, std::chrono::steady_clock::now(),
                         "communication");
        }
        operands.clear();
        return results;
      });
}

void finish_async(const Instr& instr, Frame& frame) {
  auto it = frame.started.find(instr.in[0]);
  if (it == frame.started.end()) throw ExecError("no started collective to wait for");
  std::shared_future<std::vector<Array>> pending = std::move(it->second);
  frame.started.erase(it);
  // Bounded: the collective itself gives up after its rendezvous timeout (collectives.h).
  std::vector<Array> results = pending.get();
  for (size_t i = 0; i < instr.out.size(); ++i) frame.slots[instr.out[i]] = std::move(results[i]);
}

void run_instr(const Instr& instr, Frame& frame) {
  auto& slots = frame.slots;
  switch (instr.kind) {
    case InstrKind::KERNEL: {
      const size_t n = instr.in.size();
      if (frame.operands.size() < n) frame.operands.resize(n);
      Array* operands = frame.operands.data();
      // The operands' storage goes when the step is done (or fails): memory follows
      // liveness, and a later step sees only the slots' references to an array.
      struct DropStorage {
        Array* operands;
        size_t n;
        ~DropStorage() {
          for (size_t i = 0; i < n; ++i) operands[i].storage.reset();
        }
      } drop{operands, n};
      LocalArrays results(instr.out.size());
      // Slots dead after this instruction are dropped before it runs, so a step holding the
      // last reference to an operand may reuse its storage (generated in-place results): an
      // operand's last use here moves it out of its slot. An operand its slot keeps is lent
      // as a view (no reference counted: the slot holds it until the step is done), which no
      // step takes over.
      for (size_t i = 0; i < n; ++i) {
        Array& slot = slots[instr.in[i]];
        switch (instr.pass[i]) {
          case Pass::MOVE:
            operands[i] = std::move(slot);
            break;
          case Pass::COPY:
            operands[i] = slot;
            break;
          case Pass::VIEW:
            operands[i].dtype = slot.dtype;
            operands[i].shape = slot.shape;
            operands[i].storage = StorageRef::view(slot.storage);
            break;
        }
      }
      for (int32_t s : instr.release) slots[s] = Array();
      if (instr.communicates && frame.comm) frame.comm->wait_idle();
      instr.step(frame.ctx, operands, results.data());
      for (size_t i = 0; i < instr.out.size(); ++i) slots[instr.out[i]] = std::move(results[i]);
      break;
    }
    case InstrKind::ALIAS:
      for (size_t i = 0; i < instr.out.size(); ++i) slots[instr.out[i]] = slots[instr.in[i]];
      break;
    case InstrKind::WHILE:
      run_while(instr, frame);
      break;
    case InstrKind::IF: {
      const bool pred = *slots[instr.in[0]].data<bool>();
      run_branch(*instr.regions[pred ? 0 : 1], instr, frame);
      break;
    }
    case InstrKind::CASE: {
      int64_t index = *slots[instr.in[0]].data<int32_t>();
      const int64_t n = static_cast<int64_t>(instr.regions.size());
      if (index < 0 || index >= n) index = n - 1;  // the spec's default branch
      run_branch(*instr.regions[index], instr, frame);
      break;
    }
    case InstrKind::CALLBACK:
      run_callback(instr, frame);
      break;
    case InstrKind::REPLICA_ID:
      slots[instr.out[0]] = scalar_u32(frame.ctx.replica_id);
      break;
    case InstrKind::PARTITION_ID:
      slots[instr.out[0]] = scalar_u32(frame.ctx.partition_id);
      break;
    case InstrKind::TOKEN:
      slots[instr.out[0]] = Array();
      break;
    case InstrKind::RUN_PARALLEL:
      run_parallel_instr(instr, frame);
      break;
    case InstrKind::ASYNC_START:
      start_async(instr, frame);
      break;
    case InstrKind::ASYNC_DONE:
      finish_async(instr, frame);
      break;
  }
}

void run_program(const Program& program, Frame& frame) {
  const bool profiling = profiling_enabled();
  for (const Instr& instr : program.instrs) {
    try {
      if (profiling) {
        const auto start = std::chrono::steady_clock::now();
        run_instr(instr, frame);
        profile_record(instr.where, &instr, frame.ctx, start, std::chrono::steady_clock::now());
      } else {
        run_instr(instr, frame);
      }
    } catch (...) {
      rethrow_located(instr);
    }
    // A kernel released its slots before its step ran.
    if (instr.kind != InstrKind::KERNEL) {
      for (int32_t s : instr.release) frame.slots[s] = Array();
    }
  }
}

}  // namespace

void set_release(Instr& instr, std::vector<int32_t> slots) {
  instr.release = std::move(slots);
  const size_t n = instr.in.size();
  instr.pass.assign(n, Pass::VIEW);
  for (size_t i = 0; i < n; ++i) {
    const int32_t s = instr.in[i];
    if (std::find(instr.release.begin(), instr.release.end(), s) == instr.release.end()) continue;
    bool read_later = false;
    for (size_t j = i + 1; j < n; ++j) read_later |= instr.in[j] == s;
    instr.pass[i] = read_later ? Pass::COPY : Pass::MOVE;
  }
}

namespace {
std::atomic<bool> g_python_exiting{false};
}  // namespace

bool python_usable() { return !g_python_exiting.load() && Py_IsInitialized(); }
void mark_python_exiting() { g_python_exiting.store(true); }

SharedPyObject::SharedPyObject(py::object obj) {
  if (obj.is_none()) return;
  PyObject* raw = obj.release().ptr();
  ptr_ = std::shared_ptr<PyObject>(raw, [](PyObject* p) {
    if (!python_usable()) return;  // leaked: the process is ending
    py::gil_scoped_acquire gil;
    Py_DECREF(p);
  });
}

py::object SharedPyObject::get() const {
  if (!ptr_) return py::none();
  return py::reinterpret_borrow<py::object>(ptr_.get());
}

void set_token_object(py::object token) { g_token = SharedPyObject(std::move(token)); }

bool is_token_object(const py::handle& value) {
  return !g_token.is_none() && value.is(g_token.get());
}

std::vector<Array> run_executable(const Executable& exe, std::vector<Array> args,
                                  const ExecContext& ctx, const SharedPyObject& host_state) {
  Frame frame;
  frame.slots.resize(exe.num_slots);
  frame.ctx = ctx;
  frame.host_state = host_state;
  const Program& main = *exe.main;
  if (args.size() != main.params.size()) {
    throw ExecError(exe.name + ": expected " + std::to_string(main.params.size()) +
                    " arguments, got " + std::to_string(args.size()));
  }
  for (const auto& [slot, value] : exe.constants) frame.slots[slot] = value;
  for (size_t i = 0; i < args.size(); ++i) frame.slots[main.params[i]] = std::move(args[i]);
  try {
    run_program(main, frame);
  } catch (...) {
    // Collectives still queued or running would wait for peers that may now never come:
    // fail this instance's meetings so the communication thread ends before the frame does.
    if (frame.comm && !frame.comm->idle() && ctx.rendezvous != nullptr) {
      ctx.rendezvous->abort(ctx.replica_id * ctx.num_partitions + ctx.partition_id,
                            std::current_exception());
    }
    throw;
  }
  std::vector<Array> results;
  results.reserve(main.results.size());
  for (int32_t s : main.results) results.push_back(frame.slots[s]);
  // Note [Results own their storage]: the caller gets storage that nobody else can see or
  // change. With the frame gone, a fresh result is held by `results` alone; one that is
  // still held elsewhere is the executable's constant (or a view of it), an argument, or a
  // value returned twice, and is copied, so writing into it cannot change a later call or
  // another result. A value returned twice keeps its storage in its last place.
  frame.slots.clear();
  for (Array& result : results) {
    if (result.defined() && (!result.storage->owned || result.storage.use_count() > 1)) {
      result = copy_array(result);
    }
  }
  return results;
}

}  // namespace openhlo::cpu
