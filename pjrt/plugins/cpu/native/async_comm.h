// The communication thread of one executing instance (one Frame): runs the collectives that
// openhlo.async_start instructions hand it, one at a time, in the order they were started,
// while the executor goes on with the instructions between a start and its done.
//
// Order is what keeps devices from deadlocking or mismatching: every instance runs the same
// program, so every instance starts its collectives in the same order, and each instance's
// communication thread meets its peers in that order (collectives.h matches the n-th
// exchange of a key). A synchronous collective of the same instance waits until this thread
// is idle (wait_idle) before it runs, so an instance never has two native collectives in
// flight at once either.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "array.h"

namespace openhlo::cpu {

class CommThread {
 public:
  using Work = std::function<std::vector<Array>()>;

  CommThread();
  // Runs the work already submitted to its end, then joins the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `work` after every earlier submission; the future holds its results, or the
  // exception it threw.
  std::shared_future<std::vector<Array>> submit(Work work);
  // Blocks until every submission so far has finished.
  void wait_idle();
  bool idle();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<std::vector<Array>()>> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace openhlo::cpu
