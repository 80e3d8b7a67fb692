#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace openhlo::cpu {

namespace {

thread_local bool t_inside_pool_task = false;

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()); }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    t_inside_pool_task = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (stop_ && tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

Pool& pool() {
  // Leaked on purpose: joining threads during static destruction at interpreter exit can
  // deadlock, and the OS reclaims them anyway.
  static Pool* p = new Pool(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1));
  return *p;
}

}  // namespace

int parallel_width() { return pool().size() + 1; }

void schedule(std::function<void()> task) { pool().submit(std::move(task)); }

namespace {

// fn over [0, n) in blocks of `block` items (the last may be shorter), taken from a shared
// counter by the caller and up to `runners - 1` pool threads. A thread that falls behind
// (another process on its core) leaves its remaining blocks to the others.
//
// Note [Helpers that never started]: the caller waits only for the helpers that joined while
// blocks were left, not for every helper it asked for. A helper still queued or not yet
// scheduled when the caller has taken the last block finds the work closed and returns
// without touching `fn` (which lives on the caller's stack). On a loaded machine a woken
// helper can wait a scheduler quantum (milliseconds) before it runs: waiting for it made a
// small op cost that much; on an idle one the caller of a small op no longer waits for a
// wake-up whose blocks it has already done itself.
void run_blocks_shared(int64_t n, int64_t block, int64_t runners,
                       const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t blocks = (n + block - 1) / block;
  struct Shared {
    std::atomic<int64_t> next{0};
    std::mutex mu;
    std::condition_variable cv;
    int64_t active = 0;   // helpers running blocks
    bool closed = false;  // the caller is done: helpers that start now do nothing
  };
  auto shared = std::make_shared<Shared>();
  auto run_blocks = [&fn, n, block, blocks](Shared& state) {
    for (;;) {
      const int64_t b = state.next.fetch_add(1, std::memory_order_relaxed);
      if (b >= blocks) return;
      fn(b * block, std::min(n, (b + 1) * block));
    }
  };
  for (int64_t r = 1; r < runners; ++r) {
    pool().submit([shared, run_blocks] {
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        if (shared->closed) return;
        ++shared->active;
      }
      run_blocks(*shared);
      std::lock_guard<std::mutex> lock(shared->mu);
      if (--shared->active == 0 && shared->closed) shared->cv.notify_one();
    });
  }
  const bool was_inside = t_inside_pool_task;
  t_inside_pool_task = true;  // the caller's blocks must not fan out again
  run_blocks(*shared);
  t_inside_pool_task = was_inside;
  // Every block is taken; the helpers that took some finish them before they leave.
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->closed = true;
  shared->cv.wait(lock, [&] { return shared->active == 0; });
}

}  // namespace

void parallel_for(int64_t n, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_blocks = (n + min_chunk - 1) / min_chunk;
  const int64_t runners = std::min<int64_t>(parallel_width(), max_blocks);
  if (runners <= 1 || t_inside_pool_task) {
    fn(0, n);
    return;
  }
  // Up to four blocks per runner: few enough that cheap items are not dispatched one by one.
  const int64_t blocks_wanted = std::min<int64_t>(max_blocks, runners * 4);
  run_blocks_shared(n, (n + blocks_wanted - 1) / blocks_wanted, runners, fn);
}

void parallel_for_each(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t runners = std::min<int64_t>(parallel_width(), n);
  if (runners <= 1 || t_inside_pool_task) {
    fn(0, n);
    return;
  }
  run_blocks_shared(n, 1, runners, fn);
}

}  // namespace openhlo::cpu
