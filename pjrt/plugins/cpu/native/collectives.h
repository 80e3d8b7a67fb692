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
//
// Multi-process executions (a client over several processes, plugin.py): each process runs
// the instances of its devices, and the Rendezvous of each process knows which process runs
// every instance (CrossProcess). A group whose members all run here meets as above. A group
// that spans processes meets here first (its local members); then the last local member to
// arrive sends their contributions to the group's other processes and receives theirs
// (process_group.h: exchange_across_processes, over gloo), and every local member gets the
// full list. Contributions then are copies: kernels that hand out arrays for the others to
// write into (all_reduce, all_gather) ask shares_memory first. all_reduce instead reduces
// across processes (meet_across: the last local member folds the local contributions and
// passes the partial result along the processes, ProcessGroups::chain_reduce).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernel.h"
#include "process_group.h"

namespace openhlo::cpu {

// Where the instances of a multi-process execution run; the same in every process.
struct CrossProcess {
  std::shared_ptr<ProcessGroups> groups;
  std::vector<int> instance_process;  // per instance: the process that runs it
  std::string launch;  // the execution's key, the same in every process (its launch id)
};

class Rendezvous {
 public:
  static constexpr double kDefaultTimeoutS = 120.0;

  explicit Rendezvous(int64_t num_instances, double timeout_s = kDefaultTimeoutS,
                      std::shared_ptr<const CrossProcess> across = nullptr);
  int64_t num_instances() const { return num_instances_; }
  // Whether every member of `group` runs in this process (exchanged arrays are then shared,
  // and a member may write into arrays it received).
  bool shares_memory(const std::vector<int64_t>& group) const;

  // Contributes `mine` as instance `me` of `group` (instance ids, the same list in every
  // member) and blocks until every member has contributed; returns every member's
  // contribution in group order. The arrays are shared, never copied: they are immutable.
  std::vector<std::vector<Array>> exchange(const std::string& key,
                                           const std::vector<int64_t>& group, int64_t me,
                                           std::vector<Array> mine);

  // What the last local member of a meeting that spans processes makes of the local
  // members' contributions (`local`, by group position; the other processes' members'
  // entries are empty), given the execution's processes, the meeting's tag (the same in
  // every process) and a description for errors. Runs without the lock.
  using AcrossStep = std::function<std::vector<Array>(
      const std::vector<std::vector<Array>>& local, const CrossProcess& across,
      const std::string& tag, const std::string& what)>;
  // For a group that spans processes (!shares_memory(group)): the local members meet as in
  // exchange, the last of them runs `step`, and every local member returns its result (one
  // computation per process, e.g. all_reduce's reduction across processes).
  std::vector<Array> meet_across(const std::string& key, const std::vector<int64_t>& group,
                                 int64_t me, std::vector<Array> mine, const AcrossStep& step);

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
    std::vector<bool> arrived;  // members of other processes count as arrived
    size_t count = 0;     // members of this process arrived
    size_t expected = 0;  // members of this process
    size_t left = 0;      // members still to collect the values
    bool complete = false;  // values hold every member's contribution, or error is set
    std::string error;      // of the exchange with the other processes
  };
  // exchange and meet_across: `step` replaces the values of a meeting that spans processes
  // by what every local member receives.
  using ValuesStep = std::function<void(std::vector<std::vector<Array>>& values,
                                        const std::string& tag, const std::string& what)>;
  std::vector<std::vector<Array>> meet(const std::string& key, const std::vector<int64_t>& group,
                                       int64_t me, std::vector<Array> mine,
                                       const ValuesStep& step);
  bool is_local(int64_t instance) const;
  std::string describe_wait(const std::string& key, const std::vector<int64_t>& group,
                            const Meeting& meeting) const;

  const int64_t num_instances_;
  const double timeout_s_;
  const std::shared_ptr<const CrossProcess> across_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<MeetingKey, Meeting> meetings_;
  std::map<ArrivalKey, uint64_t> arrivals_;
  std::vector<bool> finished_;
  int64_t failed_ = -1;
  std::string failure_;
};

// "[1, 2, 3]": instance ids as the collectives' messages name them (rendezvous.cc).
std::string id_list(const std::vector<int64_t>& ids);

}  // namespace openhlo::cpu
