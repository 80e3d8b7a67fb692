// Asynchronous execution: completion signals and the dispatch thread.
//
// JAX dispatches asynchronously: an execution returns its result buffers at once and the
// framework waits only when it reads them. Executions that run natively (a backend's fast
// path, no Python) and are not tiny go to one dispatch thread, in launch order, so a queued
// execution always finds its inputs computed by the ones queued before it. Each result buffer
// carries the Signal of the execution that defines it; reading it waits for that signal.
#ifndef OPENHLO_PJRT_C_API_DISPATCH_H_
#define OPENHLO_PJRT_C_API_DISPATCH_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/native/completion.h"
#include "pjrt_abi.h"

namespace openhlo {

// A completion set once (with a status) by whoever does the work; waiters block or register
// callbacks, which run on the setting thread (never under the signal's lock). A Completion
// (pjrt/native/completion.h) whose status is a PJRT error code and message.
class Signal {
 public:
  using Callback = std::function<void(PJRT_Error_Code, const std::string&)>;
  static std::shared_ptr<Signal> Done(PJRT_Error_Code code = PJRT_OK, std::string message = "");
  // Set once; a second status is ignored.
  void Set(PJRT_Error_Code code, std::string message) { done_.set({code, std::move(message)}); }
  void Wait() { done_.wait(); }
  bool IsSet() { return done_.is_set(); }
  void OnSet(Callback callback) {  // at once if already set
    done_.on_set(
        [callback = std::move(callback)](const Status& s) { callback(s.code, s.message); });
  }
  // Only after the signal is set (Wait or IsSet first).
  PJRT_Error_Code code() const { return done_.status().code; }
  const std::string& message() const { return done_.status().message; }

 private:
  struct Status {
    PJRT_Error_Code code = PJRT_OK;
    std::string message;
  };
  Completion<Status> done_;
};

// One thread running queued work in order. Never destroyed: jaxlib may release objects after
// the interpreter began to exit; CloseAndDrain() (called from Python's atexit) empties it first.
// Closing comes before draining: a thread that keeps dispatching while the process exits
// would otherwise refill the queue for ever; once closed, executions fail at once.
class Dispatcher {
 public:
  static Dispatcher& Get();
  void Push(std::function<void()> work);
  bool Idle();    // nothing queued or running
  bool Closed();  // the process is exiting: accept no new executions
  // Counts an execution refused because the dispatcher was closed (see openhlo_refused).
  void CountRefused();
  int64_t Refused();
  // Closes, then waits until idle or `seconds` passed; returns whether it became idle.
  bool CloseAndDrain(double seconds);

 private:
  Dispatcher();
  void Loop();
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;
  bool closed_ = false;
  int64_t refused_ = 0;
};

}  // namespace openhlo

#endif  // OPENHLO_PJRT_C_API_DISPATCH_H_
