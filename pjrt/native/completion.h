// The one completion primitive of the native runtimes: set once, with a status, by whoever
// does the work; waiters block (optionally with a timeout) or register callbacks.
//
// Used by the cpu backend's buffers (pjrt/plugins/cpu/native/runtime.h: BufferState, the
// status an Array or an error) and the PJRT C API's events (pjrt/c_api/dispatch.h: Signal,
// the status a PJRT error code and message). Python-side completions use pjrt.api.HostEvent.
//
// Callbacks run on the setting thread, or at once on the registering one when the status is
// already set, never under the lock: a callback may set or wait on other completions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace openhlo {

template <typename Status>
class Completion {
 public:
  using Callback = std::function<void(const Status&)>;

  // Sets the status and runs the callbacks; a second set changes nothing and returns false.
  bool set(Status status) {
    std::vector<Callback> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (set_) return false;
      status_ = std::move(status);
      set_ = true;
      callbacks.swap(callbacks_);
    }
    cv_.notify_all();
    for (Callback& callback : callbacks) callback(status_);
    return true;
  }

  bool is_set() {
    std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }

  // Blocks until set; false on timeout (seconds < 0: no timeout). Callers that hold the
  // Python GIL must release it first.
  bool wait(double seconds = -1) {
    std::unique_lock<std::mutex> lock(mu_);
    if (seconds < 0) {
      cv_.wait(lock, [this] { return set_; });
      return true;
    }
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return set_; });
  }

  void on_set(Callback callback) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!set_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback(status_);
  }

  // Only once set (after is_set() or wait() returned true): it never changes after that.
  const Status& status() const { return status_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
  Status status_{};
  std::vector<Callback> callbacks_;
};

}  // namespace openhlo
