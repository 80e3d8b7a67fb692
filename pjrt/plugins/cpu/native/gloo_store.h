// gloo's rendezvous store over the client's KeyValueStore (process_group.h), for
// connecting one gloo context: gloo publishes and reads each rank's addresses through it.
// Only built with gloo (OPENHLO_HAVE_GLOO).
#pragma once

#ifdef OPENHLO_HAVE_GLOO

#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>
#include <vector>

#include "process_group.h"

namespace openhlo::cpu {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // Keys go to `store` under `prefix`; gets wait at most timeout_s.
  GlooStore(std::shared_ptr<KeyValueStore> store, std::string prefix, double timeout_s);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  const std::shared_ptr<KeyValueStore> store_;
  const std::string prefix_;
  const double timeout_s_;
};

}  // namespace openhlo::cpu

#endif  // OPENHLO_HAVE_GLOO
