// The processes of a multi-process cpu client, and the byte exchange between them that the
// Rendezvous (collectives.h) uses when a group of instances spans processes.
//
// One ProcessGroups per client. It knows this process's index, the key-value store every
// process can reach (pjrt/distributed/store.py, seen from C++ as a KeyValueStore) and, with
// gloo, one gloo context per set of processes that has met so far: created lazily by the
// first exchange among that set (its connection addresses go through the store under
// "gloo/<processes>/"), cached, and shared by every later exchange among them.
//
// Two kinds of exchange: allgather (every process's bytes to every other, for the general
// collectives) and chain_reduce (a pipelined reduction along the processes, for all_reduce).
// Exchanges run concurrently (groups of instances that differ but span the same processes
// meet at once); each is told apart by a slot that every process derives from the same tag,
// so they need no common order. Nothing hangs: every wait is bounded by the timeout, and a
// failure names the processes that did not answer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "array.h"

namespace gloo {
class Context;
}

namespace openhlo::cpu {

// The store as the native side sees it (process_group.cc adapts the Python store).
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` is set; throws std::runtime_error naming the key after timeout_s.
  virtual std::string get(const std::string& key, double timeout_s) = 0;
};

// Byte buffers reused from one exchange to the next (exchange_across_processes): a buffer
// keeps its memory, so a large exchange pays no allocation or page faults after the first.
// Exchanges that run at once take buffers of their own.
class ByteBuffers {
 public:
  // `count` buffers (empty, or with the capacity of an earlier exchange).
  std::vector<std::string> take(size_t count);
  // Keeps up to kKept of `buffers` for later exchanges; empties `buffers`.
  void give_back(std::vector<std::string>& buffers);

 private:
  static constexpr size_t kKept = 16;
  std::mutex mu_;
  std::vector<std::string> free_;
};

// Whether the extension was built with gloo (setup.py: -DOPENHLO_HAVE_GLOO).
bool have_gloo();

class ProcessGroups {
 public:
  // Throws Unsupported when built without gloo.
  ProcessGroups(int process_index, int num_processes, std::shared_ptr<KeyValueStore> store,
                std::string hostname, double timeout_s);
  ~ProcessGroups();
  int process_index() const { return process_index_; }
  int num_processes() const { return num_processes_; }
  double timeout_s() const { return timeout_s_; }

  // Every process of `processes` (sorted, distinct, holding this one) contributes `mine`
  // under `tag` (the same string in each of them for the same meeting); `received[r]`
  // (resized to the process count; each buffer's memory reused) gets the bytes of
  // processes[r], this process's own entry is left alone (its bytes are `mine`, sent
  // without a copy). Throws ExecError starting with `what` and naming the processes that
  // did not answer within the timeout (or whose connection broke).
  void allgather(const std::vector<int>& processes, const std::string& tag,
                 const std::string& mine, std::vector<std::string>& received,
                 const std::string& what);
  // The buffers exchange_across_processes reuses.
  ByteBuffers& buffers();

  // Folds this process's contribution into bytes [offset, offset + bytes) of the result
  // (which hold a partial result when `received`) and returns where the folded bytes are
  // (the result, or a contribution that needs no fold, which is then sent without a copy).
  using ChunkFold = std::function<const void*(size_t offset, size_t bytes, bool received)>;

  // A reduction along `chain` (distinct processes holding this one, in fold order; the
  // same arguments but `fold` in each of them), pipelined in chunks of `chunk_bytes`: each
  // process but the first receives chunk i of the partial result from its predecessor into
  // `result` (nbytes, the same in every process), folds its own contribution into it
  // (`fold`) and passes it on; the last process's chunks are final and go straight to every
  // other process's `result`. So the fold order is the chain's, the same as one process
  // folding every contribution in turn, and no bytes are copied on the way. With `rotate`
  // (for folds whose result does not depend on the order), chunk i's chain starts at
  // chain[i % size] instead, so every process folds and sends an equal share, as in a
  // ring all-reduce. Throws ExecError starting with `what` and naming the process that
  // did not answer.
  void chain_reduce(const std::vector<int>& chain, const std::string& tag, void* result,
                    size_t nbytes, size_t chunk_bytes, bool rotate, const ChunkFold& fold,
                    const std::string& what);

 private:
  struct Contexts;  // gloo's device and contexts, and the byte buffers (process_group.cc)
  // The gloo context of `processes` (sorted; this process is `rank` among them), connected
  // on first use and cached.
  std::shared_ptr<gloo::Context> context_for(const std::vector<int>& processes, int rank,
                                             const std::string& what);
  const int process_index_, num_processes_;
  const std::shared_ptr<KeyValueStore> store_;
  const double timeout_s_;
  std::unique_ptr<Contexts> contexts_;
};

// The cross-process step of a Rendezvous meeting (collectives.cc): `values` holds, by group
// position, the contributions of the members of `group` that run in this process
// (instance_process[k] is the process of instance k); fills in those of the other processes'
// members (the arrays' dtype, shape and bytes go through ProcessGroups::allgather under
// `tag`). Throws ExecError starting with `what`.
void exchange_across_processes(ProcessGroups& groups, const std::vector<int>& instance_process,
                               const std::vector<int64_t>& group, const std::string& tag,
                               const std::string& what, std::vector<std::vector<Array>>& values);

}  // namespace openhlo::cpu
