// The meeting point of the instances of one multi-device execution, for native collectives.
//
// An execution with num_replicas x num_partitions > 1 runs one instance of the program per
// virtual device, each on its own thread (execute_sharded in plugin.py, or the
// RUN_PARALLEL instruction of interpreter.run_parallel). Collective kernels
// (collectives.cc) exchange arrays through the Rendezvous of their execution, which
// ExecContext::rendezvous points to. Instances are numbered k = replica * num_partitions +
// partition (the spec's flattened ids).
//
// Meetings follow stablehlo/interpreter/collectives.py:ProcessGrid.rendezvous: the n-th
// exchange of an instance under (key, group) meets the n-th exchange of every other member
// of that group under the same key. The key is the op's name and channel, so the same op in
// a loop meets once per iteration, and instances that run different programs
// (run_parallel) still meet at their matching collectives.
//
// Nothing hangs: exchange throws ExecError when an instance of the execution failed
// (abort), when a member it waits for has finished its program without joining, or after
// the timeout.
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernel.h"

namespace openhlo::cpu {

class Rendezvous {
 public:
  static constexpr double kDefaultTimeoutS = 120.0;

  explicit Rendezvous(int64_t num_instances, double timeout_s = kDefaultTimeoutS);
  int64_t num_instances() const { return num_instances_; }

  // Contributes `mine` as instance `me` of `group` (instance ids, the same list in every
  // member) and blocks until every member has contributed; returns every member's
  // contribution in group order. The arrays are shared, never copied: they are immutable.
  std::vector<std::vector<Array>> exchange(const std::string& key,
                                           const std::vector<int64_t>& group, int64_t me,
                                           std::vector<Array> mine);

  // Instance `instance` failed with `error`: every exchange now waiting, or called later,
  // throws an ExecError naming it. The first failure is kept (the others follow from it).
  void abort(int64_t instance, std::exception_ptr error);
  void abort(int64_t instance, const std::string& reason);
  // The instance whose failure aborted the execution, or -1.
  int64_t failed_instance();
  // Instance `instance` has finished its program: members waiting for it stop waiting.
  void finished(int64_t instance);

 private:
  using MeetingKey = std::tuple<std::string, std::vector<int64_t>, uint64_t>;
  using ArrivalKey = std::tuple<std::string, std::vector<int64_t>, int64_t>;
  struct Meeting {
    std::vector<std::vector<Array>> values;  // per member, in group order
    std::vector<bool> arrived;
    size_t count = 0;  // members arrived
    size_t left = 0;   // members still to collect the values
  };
  std::string describe_wait(const std::string& key, const std::vector<int64_t>& group,
                            const Meeting& meeting) const;

  const int64_t num_instances_;
  const double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<MeetingKey, Meeting> meetings_;
  std::map<ArrivalKey, uint64_t> arrivals_;
  std::vector<bool> finished_;
  int64_t failed_ = -1;
  std::string failure_;
};

}  // namespace openhlo::cpu
