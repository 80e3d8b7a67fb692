// Devices, buffers and asynchronous execution of the cpu backend.
//
// Each virtual device owns a worker thread that runs the executions queued on it in order;
// N devices run in parallel. A Buffer is a future Array: it is returned at dispatch, filled
// by the worker, and waited on by to_numpy(). Work queued on a device holds references to
// its input buffers, so deleting or donating a buffer while an execution still reads it is
// safe: the memory goes when the last user is done.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "executor.h"
#include "pjrt/native/completion.h"

namespace openhlo::cpu {

// The completion state of one buffer: pending, ready with an Array, or failed (a
// Completion, pjrt/native/completion.h, whose status is the Array or the error).
class BufferState {
 public:
  void set_value(Array array) { done_.set({std::move(array), nullptr}); }
  void set_error(std::exception_ptr error) { done_.set({Array(), std::move(error)}); }
  bool is_ready() { return done_.is_set(); }
  // Blocks until ready (GIL must not be held); returns false on timeout (seconds < 0: none).
  bool wait(double seconds = -1) { return done_.wait(seconds); }
  // The Array, or rethrows the failure. Waits first.
  Array get();
  // nullptr while pending or when ready
  std::exception_ptr error() { return done_.is_set() ? done_.status().error : nullptr; }
  // Runs fn (from the completing thread, or at once if already done).
  void on_ready(std::function<void()> fn) {
    done_.on_set([fn = std::move(fn)](const Result&) { fn(); });
  }

 private:
  struct Result {
    Array array;
    std::exception_ptr error;
  };
  Completion<Result> done_;
};

// One device's worker thread. Destroying the queue lets queued work finish and the thread
// end on its own (detached): joining could deadlock when the owner is dropped while holding
// the GIL that a queued Python fallback is waiting for.
class DeviceQueue {
 public:
  DeviceQueue();
  ~DeviceQueue();
  void enqueue(std::function<void()> work);

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> work;
    bool stop = false;
  };
  static void loop(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

class Runtime {
 public:
  explicit Runtime(int num_devices);
  int num_devices() const { return static_cast<int>(queues_.size()); }
  DeviceQueue& queue(int device);

 private:
  std::vector<std::unique_ptr<DeviceQueue>> queues_;
};

// Blocks (GIL released by the caller) until no queued execution is left, or `seconds` pass;
// returns whether the queues are idle. Used at interpreter exit: executions still running
// would otherwise meet a finalizing interpreter.
bool wait_until_idle(double seconds);

void bind_runtime(py::module_& m);

}  // namespace openhlo::cpu
