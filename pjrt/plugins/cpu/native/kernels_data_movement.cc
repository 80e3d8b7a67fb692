// Native kernels of the ops that create, move or reshape data without arithmetic:
// iota, broadcast_in_dim, broadcast, reshape, transpose, reverse, slice, concatenate, pad.
//
// Semantics follow the reference interpreter (stablehlo/interpreter/data_movement.py).
// Every op works on every element type: apart from iota, the kernels only move bytes
// (strided.h). Each factory turns the op into CopyPlans at compile time; a step then
// allocates the result and runs them. Results that are the operand's bytes unchanged
// (reshape, identity transposes and broadcasts, full slices) share the operand's storage.
#include <algorithm>
#include <complex>
#include <string>
#include <vector>

#include "_generated/kernel_attrs.h"
#include "array.h"
#include "kernel.h"
#include "kernels_elementwise.h"
#include "strided.h"

namespace openhlo::cpu {
namespace {

using strided::CopyFn;
using strided::CopyPlan;
using strided::make_copy_plan;

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void require_same_dtype(const OpSpec& spec, const TensorSpec& a, const TensorSpec& b) {
  require(a.dtype == b.dtype, spec.name + ": element types " + dtype_name(a.dtype) + " and " +
                                  dtype_name(b.dtype) + " differ");
}

// A step computing results[0] with one copy from operands[0]; shares the operand's storage
// when the copy would reproduce its bytes exactly.
Step single_copy_step(const OpSpec& spec, const CopyPlan& plan) {
  const TensorSpec out = spec.results.at(0);
  const CopyFn copy = strided::copy_fn(out.dtype);
  if (plan.is_contiguous() && plan.count == num_elements(spec.operands.at(0).shape)) {
    return [out](ExecContext&, const Array* operands, Array* results) {
      results[0] = strided::share(operands[0], out.dtype, out.shape);
    };
  }
  return [out, plan, copy](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    copy(plan, operands[0].raw(), results[0].raw());
  };
}

// ---------------------------------------------------------------------------
// iota

// iota's values along its dimension, converted as the interpreter does
// (np.arange(n, dtype=int64).astype(dtype)), so every element type is covered: integers
// wrap, i1 is "nonzero", floats round to nearest even (the 16-bit ones from f32, as numpy
// and ml_dtypes convert integers), raw-byte types take the unsigned integer of their width.
Array iota_line(DType dtype, int64_t n) {
  Array line = allocate(dtype, {n});
  auto fill = [&](auto convert) {
    auto* out = line.data<decltype(convert(int64_t{0}))>();
    for (int64_t i = 0; i < n; ++i) out[i] = convert(i);
  };
  auto as = [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill([](int64_t i) { return static_cast<T>(i); });
  };
  switch (dtype) {
    case DType::PRED: fill([](int64_t i) { return i != 0; }); break;
    case DType::F16:
      fill([](int64_t i) { return f16_t{elementwise::float_to_f16(static_cast<float>(i))}; });
      break;
    case DType::BF16:
      fill([](int64_t i) { return bf16_t{elementwise::float_to_bf16(static_cast<float>(i))}; });
      break;
    case DType::C64: as(TypeTag<std::complex<float>>{}); break;
    case DType::C128: as(TypeTag<std::complex<double>>{}); break;
    case DType::B8: as(TypeTag<uint8_t>{}); break;
    case DType::B16: as(TypeTag<uint16_t>{}); break;
    case DType::B32: as(TypeTag<uint32_t>{}); break;
    case DType::B64: as(TypeTag<uint64_t>{}); break;
    default: dispatch_real(dtype, as);
  }
  return line;
}

Step make_iota(const OpSpec& spec) {
  const TensorSpec out = spec.results.at(0);
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  const int64_t dim = IotaAttrs::decode(spec).iota_dimension;
  require(0 <= dim && dim < rank, "iota_dimension " + std::to_string(dim) +
                                      " is out of range for rank " + std::to_string(rank));
  const Array line = iota_line(out.dtype, out.shape[dim]);
  std::vector<int64_t> src(rank, 0);
  src[dim] = 1;
  const CopyPlan plan = make_copy_plan(out.shape, src, row_major_strides(out.shape));
  const CopyFn copy = strided::copy_fn(out.dtype);
  return [out, plan, copy, line](ExecContext&, const Array*, Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    copy(plan, line.raw(), results[0].raw());
  };
}

// ---------------------------------------------------------------------------
// broadcasts, reshape, transpose, reverse

Step broadcast_step(const OpSpec& spec, const std::vector<int64_t>& dims) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec& out = spec.results.at(0);
  require_same_dtype(spec, in, out);
  require(dims.size() == in.shape.size(),
          "broadcast_dimensions must have one entry per operand dimension");
  const auto in_strides = row_major_strides(in.shape);
  std::vector<int64_t> src(out.shape.size(), 0);
  std::vector<bool> used(out.shape.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i];
    require(0 <= d && d < static_cast<int64_t>(out.shape.size()) && !used[d],
            "broadcast_dimensions must be unique and within the result rank");
    used[d] = true;
    require(in.shape[i] == 1 || in.shape[i] == out.shape[d],
            "operand dimension " + std::to_string(i) + " cannot broadcast to " +
                std::to_string(out.shape[d]));
    // A size-1 operand dimension repeats its one element: stride 0.
    if (in.shape[i] == out.shape[d]) src[d] = in_strides[i];
  }
  return single_copy_step(spec, make_copy_plan(out.shape, src, row_major_strides(out.shape)));
}

Step make_broadcast_in_dim(const OpSpec& spec) {
  return broadcast_step(spec, BroadcastInDimAttrs::decode(spec).broadcast_dimensions);
}

// broadcast prepends the broadcast_sizes dimensions to the operand's.
Step make_broadcast(const OpSpec& spec) {
  const size_t rank = spec.operands.at(0).shape.size();
  require(spec.results.at(0).shape.size() >= rank, "result rank is below the operand rank");
  const size_t added = spec.results.at(0).shape.size() - rank;
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) dims[i] = static_cast<int64_t>(added + i);
  return broadcast_step(spec, dims);
}

Step make_reshape(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec out = spec.results.at(0);
  require_same_dtype(spec, in, out);
  require(num_elements(in.shape) == num_elements(out.shape),
          "cannot reshape " + shape_str(in.shape) + " to " + shape_str(out.shape));
  return [out](ExecContext&, const Array* operands, Array* results) {
    results[0] = strided::share(operands[0], out.dtype, out.shape);
  };
}

Step make_transpose(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec& out = spec.results.at(0);
  require_same_dtype(spec, in, out);
  const auto perm = TransposeAttrs::decode(spec).permutation;
  const size_t rank = in.shape.size();
  require(perm.size() == rank, "permutation must have one entry per dimension");
  const auto in_strides = row_major_strides(in.shape);
  std::vector<int64_t> src(rank);
  std::vector<bool> seen(rank, false);
  for (size_t d = 0; d < rank; ++d) {
    require(0 <= perm[d] && perm[d] < static_cast<int64_t>(rank) && !seen[perm[d]],
            "permutation is not a permutation of the dimensions");
    seen[perm[d]] = true;
    require(out.shape[d] == in.shape[perm[d]], "result shape does not match the permutation");
    src[d] = in_strides[perm[d]];
  }
  return single_copy_step(spec, make_copy_plan(out.shape, src, row_major_strides(out.shape)));
}

Step make_reverse(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  require_same_dtype(spec, in, spec.results.at(0));
  const auto dims = ReverseAttrs::decode(spec).dimensions;
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  auto src = row_major_strides(in.shape);
  std::vector<bool> seen(rank, false);
  int64_t base = 0;
  for (int64_t d : dims) {
    require(0 <= d && d < rank && !seen[d], "dimensions must be unique and within the rank");
    seen[d] = true;
    // Read the dimension backwards: start at its last element, step -stride.
    if (in.shape[d] > 0) base += (in.shape[d] - 1) * src[d];
    src[d] = -src[d];
  }
  return single_copy_step(spec, make_copy_plan(in.shape, src, row_major_strides(in.shape), base));
}

// ---------------------------------------------------------------------------
// slice, concatenate

Step make_slice(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec& out = spec.results.at(0);
  require_same_dtype(spec, in, out);
  const size_t rank = in.shape.size();
  const SliceAttrs a = SliceAttrs::decode(spec);
  const auto& starts = a.start_indices;
  const auto& limits = a.limit_indices;
  const auto steps = a.strides.value_or(std::vector<int64_t>(rank, 1));
  require(starts.size() == rank && limits.size() == rank && steps.size() == rank,
          "start/limit/stride lists must have one entry per dimension");
  const auto in_strides = row_major_strides(in.shape);
  std::vector<int64_t> src(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    require(steps[d] > 0 && 0 <= starts[d] && starts[d] <= limits[d] && limits[d] <= in.shape[d],
            "invalid slice of dimension " + std::to_string(d));
    require(out.shape[d] == (limits[d] - starts[d] + steps[d] - 1) / steps[d],
            "result shape does not match the slice");
    base += starts[d] * in_strides[d];
    src[d] = steps[d] * in_strides[d];
  }
  return single_copy_step(spec, make_copy_plan(out.shape, src, row_major_strides(out.shape), base));
}

Step make_concatenate(const OpSpec& spec) {
  const TensorSpec out = spec.results.at(0);
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  const int64_t dim = ConcatenateAttrs::decode(spec).dimension;
  require(!spec.operands.empty(), "concatenate needs at least one operand");
  require(0 <= dim && dim < rank, "dimension is out of range");
  const auto out_strides = row_major_strides(out.shape);
  // One plan per operand: the operand, contiguous, into its block of the result.
  std::vector<CopyPlan> plans;
  int64_t offset = 0;
  for (const TensorSpec& in : spec.operands) {
    require_same_dtype(spec, in, out);
    require(static_cast<int64_t>(in.shape.size()) == rank, "operand ranks differ");
    for (int64_t d = 0; d < rank; ++d) {
      require(d == dim || in.shape[d] == out.shape[d], "operand shapes differ off dimension");
    }
    plans.push_back(make_copy_plan(in.shape, row_major_strides(in.shape), out_strides, 0,
                                   offset * out_strides[dim]));
    offset += in.shape[dim];
  }
  require(offset == out.shape[dim], "result shape does not match the operands");
  if (plans.size() == 1) return single_copy_step(spec, plans[0]);
  const CopyFn copy = strided::copy_fn(out.dtype);
  return [out, plans, copy](ExecContext&, const Array* operands, Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    for (size_t i = 0; i < plans.size(); ++i) copy(plans[i], operands[i].raw(), results[0].raw());
  };
}

// ---------------------------------------------------------------------------
// pad

// Operand element o of a dimension lands at result index low + o * (interior + 1); negative
// edge padding crops, so only the operand elements landing inside [0, result size) are
// copied. Everything else is the padding value.
Step make_pad(const OpSpec& spec) {
  const TensorSpec& in = spec.operands.at(0);
  const TensorSpec out = spec.results.at(0);
  require_same_dtype(spec, in, out);
  require_same_dtype(spec, spec.operands.at(1), out);
  require(spec.operands.at(1).shape.empty(), "padding_value must be a scalar");
  const size_t rank = in.shape.size();
  const PadAttrs a = PadAttrs::decode(spec);
  const auto& low = a.edge_padding_low;
  const auto& high = a.edge_padding_high;
  const auto& interior = a.interior_padding;
  require(low.size() == rank && high.size() == rank && interior.size() == rank,
          "padding lists must have one entry per dimension");
  const auto in_strides = row_major_strides(in.shape);
  const auto out_strides = row_major_strides(out.shape);
  Shape kept(rank);
  std::vector<int64_t> dst(rank);
  int64_t src_base = 0, dst_base = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = in.shape[d], step = interior[d] + 1;
    require(interior[d] >= 0, "interior padding must be non-negative");
    const int64_t spread = n + std::max<int64_t>(n - 1, 0) * interior[d];
    require(low[d] + spread + high[d] == out.shape[d] && out.shape[d] >= 0,
            "result shape does not match the padding");
    // First and one-past-last operand elements that land inside the result.
    const int64_t first = low[d] >= 0 ? 0 : (-low[d] + step - 1) / step;
    const int64_t last = out.shape[d] - low[d] <= 0
                             ? 0
                             : std::min(n, (out.shape[d] - low[d] + step - 1) / step);
    kept[d] = std::max<int64_t>(0, last - first);
    src_base += first * in_strides[d];
    dst_base += (low[d] + first * step) * out_strides[d];
    dst[d] = step * out_strides[d];
  }
  const CopyPlan plan = num_elements(kept) == 0
                            ? CopyPlan{}
                            : make_copy_plan(kept, in_strides, dst, src_base, dst_base);
  const bool covers_all = plan.count == num_elements(out.shape);
  const CopyFn copy = strided::copy_fn(out.dtype);
  const strided::FillFn fill = strided::fill_fn(out.dtype);
  return [out, plan, covers_all, copy, fill](ExecContext&, const Array* operands,
                                             Array* results) {
    results[0] = allocate(out.dtype, out.shape);
    if (!covers_all) fill(results[0].raw(), num_elements(out.shape), operands[1].raw());
    copy(plan, operands[0].raw(), results[0].raw());
  };
}

OPENHLO_KERNEL(stablehlo_iota, "stablehlo.iota", make_iota);
OPENHLO_KERNEL(stablehlo_broadcast_in_dim, "stablehlo.broadcast_in_dim", make_broadcast_in_dim);
OPENHLO_KERNEL(stablehlo_broadcast, "stablehlo.broadcast", make_broadcast);
OPENHLO_KERNEL(stablehlo_reshape, "stablehlo.reshape", make_reshape);
OPENHLO_KERNEL(stablehlo_transpose, "stablehlo.transpose", make_transpose);
OPENHLO_KERNEL(stablehlo_reverse, "stablehlo.reverse", make_reverse);
OPENHLO_KERNEL(stablehlo_slice, "stablehlo.slice", make_slice);
OPENHLO_KERNEL(stablehlo_concatenate, "stablehlo.concatenate", make_concatenate);
OPENHLO_KERNEL(stablehlo_pad, "stablehlo.pad", make_pad);

}  // namespace
}  // namespace openhlo::cpu
