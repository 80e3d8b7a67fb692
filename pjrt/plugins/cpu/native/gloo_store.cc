// gloo_store.h: gloo's rendezvous store over the client's KeyValueStore.
#include "gloo_store.h"

#ifdef OPENHLO_HAVE_GLOO

namespace openhlo::cpu {

GlooStore::GlooStore(std::shared_ptr<KeyValueStore> store, std::string prefix, double timeout_s)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_s_(timeout_s) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(prefix_ + key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::string value = store_->get(prefix_ + key, timeout_s_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  // Our store has no separate wait: a get that waits is one, its value dropped.
  for (const auto& key : keys) store_->get(prefix_ + key, timeout.count() / 1000.0);
}

}  // namespace openhlo::cpu

#endif  // OPENHLO_HAVE_GLOO
