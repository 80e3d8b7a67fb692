// Permuted copies of arrays: the contraction kernels bring operands to the layout of their
// GEMMs with them, converting element types on the way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "array.h"
#include "float16.h"
#include "thread_pool.h"

namespace openhlo::cpu {

// Permuted copies: out dim j = in dim perm[j] (row-major both), converting elements.

class Permute {
 public:
  Permute() = default;
  Permute(const Shape& shape, const std::vector<int64_t>& perm) {
    const auto in_strides = row_major_strides(shape);
    for (int64_t d : perm) {
      if (shape[d] == 1) continue;  // no effect on the order of elements
      if (!sizes_.empty() && strides_.back() == in_strides[d] * shape[d]) {
        sizes_.back() *= shape[d];  // consecutive in memory: one dimension
        strides_.back() = in_strides[d];
      } else {
        sizes_.push_back(shape[d]);
        strides_.push_back(in_strides[d]);
      }
    }
    total_ = num_elements(shape);
    for (size_t j = 0; j + 1 < sizes_.size(); ++j) {
      if (strides_[j] == 1) tile_dim_ = static_cast<int64_t>(j);
    }
  }

  // Whether the permuted array has the same memory order as the input.
  bool identity() const { return sizes_.empty() || (sizes_.size() == 1 && strides_[0] == 1); }

  template <typename S, typename D>
  void run(const S* in, D* out) const {
    if (total_ == 0) return;
    if (sizes_.empty()) {
      out[0] = convert<D>(in[0]);
      return;
    }
    if (tile_dim_ >= 0 && strides_.back() != 1) {
      run_tiled(in, out);
      return;
    }
    // Rows of the output along its last dimension.
    const int64_t rank = static_cast<int64_t>(sizes_.size());
    const int64_t last = sizes_.back();
    const int64_t step = strides_.back();
    parallel_for(total_ / last, std::max<int64_t>(1, 32768 / last), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t offset = 0;
        for (int64_t j = rank - 2, rest = r; j >= 0; --j) {
          offset += (rest % sizes_[j]) * strides_[j];
          rest /= sizes_[j];
        }
        const S* src = in + offset;
        D* dst = out + r * last;
        for (int64_t i = 0; i < last; ++i) dst[i] = convert<D>(src[i * step]);
      }
    });
  }

 private:
  // The input's contiguous dimension is output dim tile_dim_ (the "rows" r), the output's is
  // the last one (the "columns" c): out[r * row_out + c] = in[r + c * col_step]. Tasks take
  // 64 rows; 8x8 tiles go through a register-sized buffer, which the compiler turns into
  // vector loads and stores (10x faster than element-wise strided copies).
  template <typename S, typename D>
  void run_tiled(const S* in, D* out) const {
    constexpr int64_t kRows = 64;
    const int64_t rank = static_cast<int64_t>(sizes_.size());
    const auto out_strides = row_major_strides(sizes_);
    const int64_t rows = sizes_[tile_dim_];
    const int64_t cols = sizes_.back();
    const int64_t col_step = strides_.back();
    const int64_t row_out = out_strides[tile_dim_];
    const int64_t outer = total_ / (rows * cols);
    const int64_t row_tiles = (rows + kRows - 1) / kRows;
    parallel_for(outer * row_tiles, std::max<int64_t>(1, 32768 / (kRows * cols)),
                 [&](int64_t b, int64_t e) {
      for (int64_t task = b; task < e; ++task) {
        int64_t in_off = 0, out_off = 0;
        for (int64_t j = rank - 2, rest = task / row_tiles; j >= 0; --j) {
          if (j == tile_dim_) continue;
          const int64_t i = rest % sizes_[j];
          rest /= sizes_[j];
          in_off += i * strides_[j];
          out_off += i * out_strides[j];
        }
        const int64_t r_begin = (task % row_tiles) * kRows;
        const int64_t r_end = std::min(rows, r_begin + kRows);
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
          for (int64_t r0 = r_begin; r0 < r_end; r0 += 8) {
            const S* src = in + in_off + r0 + c0 * col_step;
            D* dst = out + out_off + r0 * row_out + c0;
            if (r0 + 8 <= r_end && c0 + 8 <= cols) {
              transpose8(src, col_step, dst, row_out);
              continue;
            }
            for (int64_t c = 0; c < std::min<int64_t>(8, cols - c0); ++c) {
              for (int64_t r = 0; r < std::min<int64_t>(8, r_end - r0); ++r) {
                dst[r * row_out + c] = convert<D>(src[r + c * col_step]);
              }
            }
          }
        }
      }
    });
  }

  template <typename S, typename D>
  static void transpose8(const S* __restrict src, int64_t col_step, D* __restrict dst,
                         int64_t row_out) {
    D tile[8][8];
    for (int64_t c = 0; c < 8; ++c) {
      for (int64_t r = 0; r < 8; ++r) tile[r][c] = convert<D>(src[c * col_step + r]);
    }
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t c = 0; c < 8; ++c) dst[r * row_out + c] = tile[r][c];
    }
  }

  std::vector<int64_t> sizes_, strides_;
  int64_t total_ = 0;
  int64_t tile_dim_ = -1;
};

// The dimension lists one after the other (a permutation built from its parts).
inline std::vector<int64_t> concat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace openhlo::cpu
