// The Rendezvous of the cpu backend's collectives (collectives.h): where the instances of one
// execution meet, within this process and, for groups that span processes, with the other
// processes through ProcessGroups (process_group.h). The kernels are in collectives.cc.
#include "collectives.h"

#include <chrono>
#include <string>
#include <vector>

namespace openhlo::cpu {

std::string id_list(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

Rendezvous::Rendezvous(int64_t num_instances, double timeout_s,
                       std::shared_ptr<const CrossProcess> across)
    : num_instances_(num_instances), timeout_s_(timeout_s), across_(std::move(across)) {
  if (num_instances < 1) throw std::invalid_argument("a rendezvous needs at least 1 instance");
  if (across_ != nullptr &&
      static_cast<int64_t>(across_->instance_process.size()) != num_instances) {
    throw std::invalid_argument("instance_process must name one process per instance");
  }
  finished_.assign(static_cast<size_t>(num_instances), false);
}

bool Rendezvous::is_local(int64_t instance) const {
  return across_ == nullptr ||
         across_->instance_process[instance] == across_->groups->process_index();
}

bool Rendezvous::shares_memory(const std::vector<int64_t>& group) const {
  return std::all_of(group.begin(), group.end(), [&](int64_t k) { return is_local(k); });
}

std::string Rendezvous::describe_wait(const std::string& key, const std::vector<int64_t>& group,
                                      const Meeting& meeting) const {
  std::vector<int64_t> missing;
  for (size_t i = 0; i < group.size(); ++i) {
    if (!meeting.arrived[i]) missing.push_back(group[i]);
  }
  return key + " of instances " + id_list(group) + " (waiting for " + id_list(missing) + ")";
}

std::vector<std::vector<Array>> Rendezvous::exchange(const std::string& key,
                                                     const std::vector<int64_t>& group,
                                                     int64_t me, std::vector<Array> mine) {
  return meet(key, group, me, std::move(mine),
              [&](std::vector<std::vector<Array>>& values, const std::string& tag,
                  const std::string& what) {
                exchange_across_processes(*across_->groups, across_->instance_process, group,
                                          tag, what, values);
              });
}

std::vector<Array> Rendezvous::meet_across(const std::string& key,
                                           const std::vector<int64_t>& group, int64_t me,
                                           std::vector<Array> mine, const AcrossStep& step) {
  if (shares_memory(group)) {
    throw ExecError(key + " of instances " + id_list(group) + " meets across processes, " +
                    "but every member runs in this process");
  }
  auto values = meet(key, group, me, std::move(mine),
                     [&](std::vector<std::vector<Array>>& values, const std::string& tag,
                         const std::string& what) {
                       values = {step(values, *across_, tag, what)};
                     });
  return std::move(values[0]);
}

std::vector<std::vector<Array>> Rendezvous::meet(const std::string& key,
                                                 const std::vector<int64_t>& group, int64_t me,
                                                 std::vector<Array> mine,
                                                 const ValuesStep& step) {
  const auto at = std::find(group.begin(), group.end(), me);
  if (at == group.end()) {
    throw ExecError("instance " + std::to_string(me) + " is not in its group " + id_list(group));
  }
  for (int64_t k : group) {
    if (k < 0 || k >= num_instances_) {
      throw ExecError("group " + id_list(group) + " names an instance outside the " +
                      std::to_string(num_instances_) + " of this execution");
    }
  }
  const size_t size = group.size();
  const bool across = !shares_memory(group);
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_ >= 0) {
    throw ExecError("instance " + std::to_string(me) + " stopped: " + failure_);
  }
  const uint64_t nth = arrivals_[ArrivalKey{key, group, me}]++;
  const MeetingKey meeting_key{key, group, nth};
  Meeting& meeting = meetings_[meeting_key];  // std::map: the reference stays valid
  if (meeting.values.empty()) {
    meeting.values.resize(size);
    meeting.arrived.assign(size, false);
    for (size_t i = 0; i < size; ++i) {
      meeting.arrived[i] = !is_local(group[i]);
      meeting.expected += meeting.arrived[i] ? 0 : 1;
    }
    meeting.left = meeting.expected;
  }
  const size_t pos = static_cast<size_t>(at - group.begin());
  meeting.values[pos] = std::move(mine);
  meeting.arrived[pos] = true;
  if (++meeting.count == meeting.expected) {
    if (across) {
      // The last member of this process to arrive exchanges with the other processes,
      // outside the lock (the wait is bounded by the process groups' own timeout).
      std::vector<std::vector<Array>> values = meeting.values;
      lock.unlock();
      std::string failure;
      try {
        step(values, across_->launch + "|" + key + "|" + id_list(group) + "|" +
                         std::to_string(nth),
             key + " of instances " + id_list(group));
      } catch (std::exception& e) {
        failure = e.what();
      }
      lock.lock();
      meeting.values = std::move(values);
      meeting.error = std::move(failure);
    }
    meeting.complete = true;
    cv_.notify_all();
  }

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s_));
  std::string error;
  while (!meeting.complete) {
    if (meeting.count == meeting.expected) {
      // Every local member is here: the exchange with the other processes is under way.
      cv_.wait(lock);
      continue;
    }
    if (failed_ >= 0) {
      error = "instance " + std::to_string(me) + " stopped in " +
              describe_wait(key, group, meeting) + ": " + failure_;
      break;
    }
    bool gone = false;
    for (size_t i = 0; i < size; ++i) gone |= !meeting.arrived[i] && finished_[group[i]];
    if (gone) {
      error = describe_wait(key, group, meeting) + ": an instance finished its program " +
              "without joining (the instances disagree on the collectives they run)";
      break;
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        meeting.count < meeting.expected) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_s_);
      error = describe_wait(key, group, meeting) + " timed out after " + seconds +
              " s in instance " + std::to_string(me);
      break;
    }
  }
  if (error.empty()) error = meeting.error;  // of the exchange with the other processes
  std::vector<std::vector<Array>> values;
  if (error.empty()) values = meeting.values;
  if (--meeting.left == 0) meetings_.erase(meeting_key);
  if (!error.empty()) throw ExecError(error);
  return values;
}

void Rendezvous::abort(int64_t instance, std::exception_ptr error) {
  // Built before locking: the message of a Python error takes the GIL.
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  abort(instance, what);
}

void Rendezvous::abort(int64_t instance, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ >= 0) return;
    failed_ = instance;
    failure_ = "instance " + std::to_string(instance) + " failed: " + reason;
  }
  cv_.notify_all();
}

int64_t Rendezvous::failed_instance() {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void Rendezvous::finished(int64_t instance) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (instance >= 0 && instance < num_instances_) finished_[instance] = true;
  }
  cv_.notify_all();
}

}  // namespace openhlo::cpu
