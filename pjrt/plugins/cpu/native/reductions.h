// Shared pieces of the reduction kernels: kernels_reduction.cc (reduce, reduce_window and
// select_and_scatter with one combiner per operand) and kernels_pair_select.cc (reduce and
// reduce_window whose body keeps one of two (value, index) pairs: argmax, max pooling with
// indices). Both walk indices and windows the same way, in the interpreter's order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "array.h"
#include "kernel.h"

namespace openhlo::cpu {

// Input offsets of every index of `dims` ({size, stride} pairs), in row-major index order.
inline std::vector<int64_t> odometer_offsets(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  std::vector<int64_t> offsets{0};
  for (const auto& [size, stride] : dims) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * size);
    for (int64_t base : offsets) {
      for (int64_t i = 0; i < size; ++i) next.push_back(base + i * stride);
    }
    offsets.swap(next);
  }
  return offsets;
}

// Checks the variadic reducer operand/result types (inputs..., inits...) -> results... and
// returns the operand count; all of one element type per operand.
inline size_t check_reducer_types(const OpSpec& spec) {
  require(!spec.operands.empty() && spec.operands.size() % 2 == 0,
          "expected inputs and as many init values");
  const size_t n = spec.operands.size() / 2;
  require(spec.results.size() == n, "expected one result per input");
  for (size_t i = 0; i < n; ++i) {
    const DType dtype = spec.operands[i].dtype;
    require(spec.operands[n + i].dtype == dtype && spec.results[i].dtype == dtype,
            "reducer with promoted element types");
    require(spec.operands[n + i].shape.empty(), "init values must be scalars");
    require(spec.operands[i].shape == spec.operands[0].shape, "inputs of different shapes");
  }
  return n;
}

// Per-dimension attributes of a windowed op, validated against the operand rank.
struct WindowAttrs {
  std::vector<int64_t> window, strides, base, dilation, pad_low, pad_high;
};

// `given`, or ones where the attribute is absent.
inline std::vector<int64_t> positive_ints(const std::optional<std::vector<int64_t>>& given,
                                          const char* name, size_t rank) {
  std::vector<int64_t> values = given.value_or(std::vector<int64_t>(rank, 1));
  require(values.size() == rank, std::string(name) + " does not match the operand rank");
  for (int64_t v : values) require(v > 0, std::string(name) + " must be positive");
  return values;
}

// The window of reduce_window or select_and_scatter (which has no dilations: nullopt).
template <typename A>
WindowAttrs window_attrs(const A& a, const std::optional<std::vector<int64_t>>& base_dilations,
                         const std::optional<std::vector<int64_t>>& window_dilations,
                         size_t rank) {
  WindowAttrs w;
  w.window = positive_ints(a.window_dimensions, "window_dimensions", rank);
  w.strides = positive_ints(a.window_strides, "window_strides", rank);
  w.base = positive_ints(base_dilations, "base_dilations", rank);
  w.dilation = positive_ints(window_dilations, "window_dilations", rank);
  split_padding(a.padding, rank, w.pad_low, w.pad_high);
  return w;
}

// Number of windows along a dimension of `size` elements (spec: padded, base-dilated).
inline int64_t window_count(int64_t size, const WindowAttrs& w, size_t d) {
  const int64_t dilated = size == 0 ? 0 : (size - 1) * w.base[d] + 1;
  const int64_t padded = w.pad_low[d] + dilated + w.pad_high[d];
  const int64_t span = (w.window[d] - 1) * w.dilation[d] + 1;
  return (padded <= 0 || span > padded) ? 0 : (padded - span) / w.strides[d] + 1;
}

// table[o * window + k]: the operand index times `stride` read by tap k of window o, or -1
// where that tap falls on padding or between base-dilated elements.
inline std::vector<int64_t> tap_table(int64_t size, int64_t stride, int64_t windows,
                                      const WindowAttrs& w, size_t d) {
  const int64_t dilated = size == 0 ? 0 : (size - 1) * w.base[d] + 1;
  std::vector<int64_t> table(windows * w.window[d]);
  for (int64_t o = 0; o < windows; ++o) {
    for (int64_t k = 0; k < w.window[d]; ++k) {
      const int64_t q = o * w.strides[d] + k * w.dilation[d] - w.pad_low[d];
      const bool valid = q >= 0 && q < dilated && q % w.base[d] == 0;
      table[o * w.window[d] + k] = valid ? (q / w.base[d]) * stride : -1;
    }
  }
  return table;
}

// The steps of reduce and reduce_window for a (value, index) body given as its pick table
// (attrs.py "pair_picks"); kernels_pair_select.cc. `make_reduce`/`make_reduce_window`
// delegate to them when the op's record has a table.
Step make_pair_reduce(const OpSpec& spec, const std::vector<int64_t>& dimensions,
                      const std::vector<int64_t>& picks);
Step make_pair_reduce_window(const OpSpec& spec, const WindowAttrs& window,
                             const std::vector<int64_t>& picks);

}  // namespace openhlo::cpu
