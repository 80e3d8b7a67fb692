#include "kernel.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace openhlo::cpu {

namespace {
std::map<std::string, KernelFactory>& registry() {
  static auto* r = new std::map<std::string, KernelFactory>();
  return *r;
}
}  // namespace

bool register_kernel(const std::string& name, KernelFactory factory) {
  auto [it, inserted] = registry().emplace(name, std::move(factory));
  if (!inserted) {
    std::fprintf(stderr, "openhlo cpu: native kernel %s registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

const KernelFactory* find_kernel(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

AttrReader::AttrReader(const OpSpec& spec, const char* op, size_t fields)
    : record_(spec.attrs), op_(op) {
  if (spec.name != op || spec.attrs.size() != fields) {
    throw std::logic_error(spec.name + ": an attribute record of " +
                           std::to_string(spec.attrs.size()) + " fields, but the struct of " +
                           op + " has " + std::to_string(fields) +
                           " (regenerate native/_generated and rebuild)");
  }
}

std::vector<std::vector<int64_t>> AttrReader::int_rows(size_t i, const char* member) const {
  if (const auto* empty = std::get_if<std::vector<int64_t>>(&record_[i]); empty && empty->empty()) {
    return {};
  }
  return get<std::vector<std::vector<int64_t>>>(i, member);
}

void split_padding(const std::optional<std::vector<std::vector<int64_t>>>& padding, size_t rank,
                   std::vector<int64_t>& low, std::vector<int64_t>& high) {
  low.assign(rank, 0);
  high.assign(rank, 0);
  if (!padding) return;
  require(padding->size() == rank, "padding must be a [rank, 2] array");
  for (size_t d = 0; d < rank; ++d) {
    require((*padding)[d].size() == 2, "padding must be a [rank, 2] array");
    low[d] = (*padding)[d][0];
    high[d] = (*padding)[d][1];
  }
}

void AttrReader::mismatch(const char* member) const {
  throw std::logic_error(std::string(op_) + ": attribute record field " + member +
                         " has the wrong kind (regenerate native/_generated and rebuild)");
}

}  // namespace openhlo::cpu
