// Signals and the dispatch thread (see dispatch.h).
#include "dispatch.h"

#include <chrono>
#include <thread>
#include <utility>

namespace openhlo {

std::shared_ptr<Signal> Signal::Done(PJRT_Error_Code code, std::string message) {
  auto signal = std::make_shared<Signal>();
  signal->Set(code, std::move(message));
  return signal;
}

Dispatcher& Dispatcher::Get() {
  static Dispatcher* dispatcher = new Dispatcher;  // leaked on purpose (see dispatch.h)
  return *dispatcher;
}

Dispatcher::Dispatcher() { std::thread([this] { Loop(); }).detach(); }

void Dispatcher::Push(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
}

bool Dispatcher::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !running_;
}

bool Dispatcher::Closed() {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void Dispatcher::CountRefused() {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_;
}

int64_t Dispatcher::Refused() {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

bool Dispatcher::CloseAndDrain(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;
  return idle_.wait_for(lock, std::chrono::duration<double>(seconds),
                        [this] { return queue_.empty() && !running_; });
}

void Dispatcher::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return !queue_.empty(); });
      work = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    work();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }
}

}  // namespace openhlo

// Called from Python's atexit (pjrt/c_api/loader.py) before the callbacks are detached: no
// new executions from now on; those queued get `seconds` to finish. Returns 1 when they did.
extern "C" __attribute__((visibility("default"))) int openhlo_drain(double seconds) {
  return openhlo::Dispatcher::Get().CloseAndDrain(seconds) ? 1 : 0;
}

// How many executions were refused since the exit hook closed the dispatcher: the hook waits
// until this stops growing, so threads still dispatching see their error and end before the
// interpreter finalizes (pjrt/c_api/loader.py).
extern "C" __attribute__((visibility("default"))) int64_t openhlo_refused() {
  return openhlo::Dispatcher::Get().Refused();
}
