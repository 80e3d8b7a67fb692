#include "runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <chrono>

#include "collectives.h"
#include "numpy_bridge.h"

namespace openhlo::cpu {

Array BufferState::get() {
  done_.wait();
  if (done_.status().error) std::rethrow_exception(done_.status().error);
  return done_.status().array;
}

namespace {
// Executions queued and not yet finished, over all runtimes.
struct InFlight {
  std::mutex mu;
  std::condition_variable idle;
  int64_t count = 0;
};
InFlight& in_flight() {
  static auto* f = new InFlight();  // leaked: used by detached threads until the very end
  return *f;
}

}  // namespace

DeviceQueue::DeviceQueue() : state_(std::make_shared<State>()) {
  std::thread(loop, state_).detach();
}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
}

void DeviceQueue::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(in_flight().mu);
    ++in_flight().count;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->work.push_back(std::move(work));
  }
  state_->cv.notify_one();
}

void DeviceQueue::loop(std::shared_ptr<State> state) {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->cv.wait(lock, [&] { return state->stop || !state->work.empty(); });
      if (state->work.empty()) return;
      work = std::move(state->work.front());
      state->work.pop_front();
    }
    work();
    // Counted done only once the work and everything it captured (Python references
    // included) are gone: after that, the thread touches nothing of Python's.
    work = nullptr;
    auto& f = in_flight();
    std::lock_guard<std::mutex> lock(f.mu);
    if (--f.count == 0) f.idle.notify_all();
  }
}

Runtime::Runtime(int num_devices) {
  if (num_devices < 1) throw std::invalid_argument("num_devices must be at least 1");
  for (int i = 0; i < num_devices; ++i) queues_.push_back(std::make_unique<DeviceQueue>());
}

DeviceQueue& Runtime::queue(int device) {
  if (device < 0 || device >= num_devices()) {
    throw std::out_of_range("device " + std::to_string(device) + " does not exist");
  }
  return *queues_[device];
}

namespace {

// What Python holds for a buffer.
struct NativeBuffer {
  std::shared_ptr<BufferState> state;
  int device = 0;
  TensorSpec spec;
  bool is_token = false;
  bool deleted = false;
};

Array wait_array(const std::shared_ptr<BufferState>& state) {
  py::gil_scoped_release release;
  return state->get();
}

py::object buffer_to_numpy(NativeBuffer& buffer) {
  if (buffer.deleted) throw std::runtime_error("buffer was deleted");
  Array a = wait_array(buffer.state);
  if (buffer.is_token) return py::none();
  return array_to_numpy(a);
}

std::shared_ptr<NativeBuffer> buffer_from_numpy(const py::handle& array,
                                                const std::string& dtype, int device) {
  auto buffer = std::make_shared<NativeBuffer>();
  buffer->spec.dtype = dtype_from_name(dtype);
  buffer->state = std::make_shared<BufferState>();
  buffer->device = device;
  Array a = array_from_numpy(array, buffer->spec.dtype);
  buffer->spec.shape = a.shape;
  buffer->state->set_value(std::move(a));
  return buffer;
}

// The place of one instance in its execution: its replica and partition in a grid of
// num_replicas x num_partitions instances, which meet in `rendezvous` (null: one instance).
struct Instance {
  int64_t replica_id = 0, partition_id = 0, num_replicas = 1, num_partitions = 1;
  std::shared_ptr<Rendezvous> rendezvous;
};

// Queues one execution of `exe` on `device`; returns its result buffers at once, and last a
// token buffer that completes with the execution.
std::vector<std::shared_ptr<NativeBuffer>> execute_async(
    Runtime& runtime, std::shared_ptr<const Executable> exe, int device,
    const std::vector<std::shared_ptr<NativeBuffer>>& args, Instance instance,
    py::object host_state) {
  std::vector<std::shared_ptr<BufferState>> inputs;
  for (const auto& b : args) {
    if (b->deleted) throw std::runtime_error("buffer was deleted");
    inputs.push_back(b->state);
  }
  std::vector<std::shared_ptr<NativeBuffer>> results;
  std::vector<std::shared_ptr<BufferState>> outputs;
  for (size_t i = 0; i < exe->result_specs.size(); ++i) {
    auto b = std::make_shared<NativeBuffer>();
    b->state = std::make_shared<BufferState>();
    b->device = device;
    b->spec = exe->result_specs[i];
    b->is_token = exe->result_is_token[i];
    outputs.push_back(b->state);
    results.push_back(std::move(b));
  }
  // A last, hidden token buffer completes when the execution does (with its error): the
  // execution's event, also for programs without results.
  auto done = std::make_shared<NativeBuffer>();
  done->state = std::make_shared<BufferState>();
  done->device = device;
  done->spec = {DType::PRED, {}};
  done->is_token = true;
  results.push_back(done);
  auto done_state = done->state;
  SharedPyObject state(std::move(host_state));
  DeviceQueue& queue = runtime.queue(device);
  queue.enqueue([exe, inputs, outputs, done_state, instance, device, state] {
    const int64_t k = instance.replica_id * instance.num_partitions + instance.partition_id;
    try {
      std::vector<Array> arrays;
      arrays.reserve(inputs.size());
      for (const auto& in : inputs) arrays.push_back(in->get());
      ExecContext ctx;
      ctx.replica_id = instance.replica_id;
      ctx.partition_id = instance.partition_id;
      ctx.device_ordinal = device;
      ctx.num_replicas = instance.num_replicas;
      ctx.num_partitions = instance.num_partitions;
      ctx.rendezvous = instance.rendezvous.get();
      std::vector<Array> values = run_executable(*exe, std::move(arrays), ctx, state);
      if (instance.rendezvous) instance.rendezvous->finished(k);
      for (size_t i = 0; i < outputs.size(); ++i) outputs[i]->set_value(std::move(values[i]));
      done_state->set_value(Array());
    } catch (...) {
      auto error = std::current_exception();
      // The other instances must not wait for this one, in native collectives or in the
      // interpreter fallbacks' process grid.
      if (instance.rendezvous) {
        instance.rendezvous->abort(k, error);
        if (python_usable() && !state.is_none()) {
          py::gil_scoped_acquire gil;
          try {
            py::object host = state.get();
            if (py::hasattr(host, "abort")) {
              host.attr("abort")("instance " + std::to_string(k) + " failed");
            }
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable("openhlo cpu: aborting the process grid");
          }
        }
      }
      for (auto& out : outputs) out->set_error(error);
      done_state->set_error(error);
    }
  });
  return results;
}

}  // namespace

bool wait_until_idle(double seconds) {
  auto& f = in_flight();
  std::unique_lock<std::mutex> lock(f.mu);
  return f.idle.wait_for(lock, std::chrono::duration<double>(seconds),
                         [&] { return f.count == 0; });
}

void bind_runtime(py::module_& m) {
  py::class_<NativeBuffer, std::shared_ptr<NativeBuffer>>(m, "NativeBuffer")
      .def_property_readonly("shape", [](const NativeBuffer& b) {
        return py::tuple(py::cast(b.spec.shape));
      })
      .def_property_readonly("dtype_name", [](const NativeBuffer& b) {
        return std::string(dtype_name(b.spec.dtype));
      })
      .def_property_readonly("device", [](const NativeBuffer& b) { return b.device; })
      .def_property_readonly("is_token", [](const NativeBuffer& b) { return b.is_token; })
      .def_property_readonly("nbytes", [](const NativeBuffer& b) {
        return b.is_token ? 0 : static_cast<int64_t>(num_bytes(b.spec.dtype, b.spec.shape));
      })
      .def_property_readonly("is_deleted", [](const NativeBuffer& b) { return b.deleted; })
      .def("delete", [](NativeBuffer& b) {
        b.deleted = true;
        // Pending executions keep their own reference; the memory goes with the last one.
        auto fresh = std::make_shared<BufferState>();
        fresh->set_error(std::make_exception_ptr(std::runtime_error("buffer was deleted")));
        b.state = fresh;
      })
      .def("is_ready", [](NativeBuffer& b) { return b.state->is_ready(); })
      .def("wait", [](NativeBuffer& b, double timeout) {
        auto state = b.state;
        py::gil_scoped_release release;
        return state->wait(timeout);
      }, py::arg("timeout") = -1.0)
      .def("error", [](NativeBuffer& b) -> py::object {
        if (!b.state->is_ready()) return py::none();
        auto error = b.state->error();
        if (!error) return py::none();
        try {
          std::rethrow_exception(error);
        } catch (py::error_already_set& e) {
          return e.value();
        } catch (std::exception& e) {
          return py::str(e.what());
        }
      })
      .def("on_ready", [](NativeBuffer& b, py::function fn) {
        SharedPyObject callback(std::move(fn));
        b.state->on_ready([callback] {
          if (!python_usable()) return;
          py::gil_scoped_acquire gil;
          try {
            callback.get()();
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable("openhlo cpu buffer on_ready callback");
          }
        });
      })
      .def("to_numpy", &buffer_to_numpy);

  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def(py::init<int>(), py::arg("num_devices"))
      .def_property_readonly("num_devices", &Runtime::num_devices)
      .def("buffer_from_numpy", [](Runtime& rt, py::handle array, const std::string& dtype,
                                   int device) {
        rt.queue(device);  // validates the device
        return buffer_from_numpy(array, dtype, device);
      })
      .def("copy_buffer", [](Runtime& rt, const NativeBuffer& src, int device) {
        rt.queue(device);
        if (src.deleted) throw std::runtime_error("buffer was deleted");
        auto b = std::make_shared<NativeBuffer>(src);
        b->device = device;  // arrays are immutable: the copy may share the storage
        return b;
      })
      .def("execute", [](Runtime& rt, std::shared_ptr<const Executable> exe, int device,
                         const std::vector<std::shared_ptr<NativeBuffer>>& args,
                         int64_t replica_id, int64_t partition_id, py::object host_state,
                         std::shared_ptr<Rendezvous> rendezvous, int64_t num_replicas,
                         int64_t num_partitions) {
        // One instance of a multi-device execution (rendezvous shared by all of them), or a
        // single-device execution (no rendezvous, a grid of one).
        Instance instance{replica_id, partition_id, num_replicas, num_partitions,
                          std::move(rendezvous)};
        return execute_async(rt, std::move(exe), device, args, std::move(instance),
                             std::move(host_state));
      }, py::arg("executable"), py::arg("device"), py::arg("args"), py::arg("replica_id") = 0,
         py::arg("partition_id") = 0, py::arg("host_state") = py::none(),
         py::arg("rendezvous") = nullptr, py::arg("num_replicas") = 1,
         py::arg("num_partitions") = 1);
  // `_native.Rendezvous(num_instances, timeout_s=120[, processes, instance_process, launch])`:
  // plugin.py makes one per multi-device execution and passes it to each instance's execute.
  py::class_<Rendezvous, std::shared_ptr<Rendezvous>>(m, "Rendezvous",
      "Where the instances of one multi-device execution meet in native collectives.")
      .def(py::init<int64_t, double>(), py::arg("num_instances"),
           py::arg("timeout_s") = Rendezvous::kDefaultTimeoutS)
      .def(py::init([](int64_t num_instances, double timeout_s,
                       std::shared_ptr<ProcessGroups> processes,
                       std::vector<int> instance_process, std::string launch) {
             auto across = std::make_shared<CrossProcess>(
                 CrossProcess{std::move(processes), std::move(instance_process),
                              std::move(launch)});
             return std::make_shared<Rendezvous>(num_instances, timeout_s, std::move(across));
           }),
           py::arg("num_instances"), py::arg("timeout_s"), py::arg("processes"),
           py::arg("instance_process"), py::arg("launch"),
           "A multi-process execution: instance k runs in process instance_process[k].")
      .def_property_readonly("num_instances", &Rendezvous::num_instances);
}

}  // namespace openhlo::cpu
