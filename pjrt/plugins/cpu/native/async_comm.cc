#include "async_comm.h"

namespace openhlo::cpu {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_future<std::vector<Array>> CommThread::submit(Work work) {
  std::packaged_task<std::vector<Array>()> task(std::move(work));
  std::shared_future<std::vector<Array>> result = task.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
  return result;
}

void CommThread::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

bool CommThread::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && running_ == 0;
}

void CommThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing is left to run
    auto task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task();  // a packaged task keeps the work's exception for the future
    lock.lock();
    --running_;
    cv_.notify_all();
  }
}

}  // namespace openhlo::cpu
