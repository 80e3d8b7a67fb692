// `_native.lowp`: the low-precision GEMMs (lowp_gemm.h) on numpy arrays, for their tests and
// tools/bench_lowp.py, and the ISA report the lowering warns with. Each class packs its
// weight once at construction, as the backend does for a program's weights.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "cpu_isa.h"
#include "lowp_gemm.h"

namespace openhlo::cpu {

namespace py = pybind11;

namespace {

template <typename T>
using Matrix = py::array_t<T, py::array::c_style | py::array::forcecast>;

void require_matrix(const py::array& a, const char* what) {
  if (a.ndim() != 2) throw py::value_error(std::string(what) + " must be a matrix");
}

py::dict isa_dict(const LowPrecisionIsa& isa) {
  py::dict d;
  d["avx512"] = isa.avx512;
  d["vnni"] = isa.vnni;
  d["bf16"] = isa.bf16;
  d["amx"] = isa.amx;
  return d;
}

// The test hook's levels: everything detected, AVX-512 but no AMX, the portable loops.
IsaLimit isa_limit(const std::string& level) {
  if (level == "detected") return IsaLimit::kDetected;
  if (level == "avx512") return IsaLimit::kNoAmx;
  if (level == "portable") return IsaLimit::kPortable;
  throw py::value_error("lowp.limit_isa: level must be 'detected', 'avx512' or 'portable', not '" +
                        level + "'");
}

struct S8Weight {
  lowp::PackedS8 packed;
  explicit S8Weight(const Matrix<int8_t>& b) {
    require_matrix(b, "b");
    packed = lowp::pack_s8({b.data(), b.shape(1), false}, b.shape(0), b.shape(1));
  }
  py::array matmul(const Matrix<int8_t>& a, std::optional<Matrix<float>> scale) const {
    require_matrix(a, "a");
    if (a.shape(1) != packed.k) throw py::value_error("a's columns must match b's rows");
    const int64_t m = a.shape(0), n = packed.n;
    lowp::S8Epilogue epilogue;
    py::array out;
    if (scale) {
      if (scale->size() != n) throw py::value_error("scale needs one value per column");
      py::array_t<float> f({m, n});
      epilogue.out_f32 = f.mutable_data();
      epilogue.column_scale = scale->data();
      out = f;
    } else {
      py::array_t<int32_t> s({m, n});
      epilogue.out_s32 = s.mutable_data();
      out = s;
    }
    py::gil_scoped_release release;
    lowp::gemm_s8(m, {a.data(), packed.k, false}, packed, epilogue);
    return out;
  }
};

struct BF16Weight {
  lowp::PackedBF16 packed;
  explicit BF16Weight(const Matrix<uint16_t>& b) {
    require_matrix(b, "b");
    packed = lowp::pack_bf16({b.data(), b.shape(1), false}, b.shape(0), b.shape(1));
  }
  py::array_t<float> matmul(const Matrix<uint16_t>& a) const {
    require_matrix(a, "a");
    if (a.shape(1) != packed.k) throw py::value_error("a's columns must match b's rows");
    py::array_t<float> out({static_cast<int64_t>(a.shape(0)), packed.n});
    float* c = out.mutable_data();
    py::gil_scoped_release release;
    lowp::gemm_bf16(a.shape(0), {a.data(), packed.k, false}, packed, c);
    return out;
  }
};

struct QuantizedWeight {
  lowp::PackedWeight packed;
  QuantizedWeight(const Matrix<int8_t>& w, const Matrix<float>& scales, int bits, int64_t group) {
    require_matrix(w, "w");
    const int64_t k = w.shape(0), n = w.shape(1);
    if (group <= 0 || k % group != 0) throw py::value_error("group must divide k");
    if (scales.ndim() != 2 || scales.shape(0) != k / group || scales.shape(1) != n) {
      throw py::value_error("scales must be [k / group, n]");
    }
    try {
      packed = lowp::pack_weight({w.data(), n, false}, k, n, bits, scales.data(), group);
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
  }
  py::array_t<float> matmul(const Matrix<float>& x) const {
    require_matrix(x, "x");
    if (x.shape(1) != packed.k) throw py::value_error("x's columns must match w's rows");
    py::array_t<float> out({static_cast<int64_t>(x.shape(0)), packed.n});
    float* y = out.mutable_data();
    py::gil_scoped_release release;
    lowp::gemm_weight(x.shape(0), x.data(), packed, y);
    return out;
  }
  int64_t nbytes() const { return static_cast<int64_t>(packed.blocks.size()); }
};

}  // namespace

void bind_lowp(py::module_& parent) {
  py::module_ m = parent.def_submodule("lowp", "low-precision GEMMs (lowp_gemm.h)");
  m.def("detected_isa", [] { return isa_dict(detected_isa()); });
  m.def("active_isa", [] { return isa_dict(active_isa()); });
  m.def("limit_isa", [](const std::string& level) { limit_lowp_isa(isa_limit(level)); },
        py::arg("level"));
  py::class_<S8Weight>(m, "S8Weight")
      .def(py::init<const Matrix<int8_t>&>(), py::arg("b"))
      .def("matmul", &S8Weight::matmul, py::arg("a"), py::arg("scale") = py::none());
  py::class_<BF16Weight>(m, "BF16Weight")
      .def(py::init<const Matrix<uint16_t>&>(), py::arg("b"))
      .def("matmul", &BF16Weight::matmul, py::arg("a"));
  py::class_<QuantizedWeight>(m, "QuantizedWeight")
      .def(py::init<const Matrix<int8_t>&, const Matrix<float>&, int, int64_t>(), py::arg("w"),
           py::arg("scales"), py::arg("bits"), py::arg("group"))
      .def("matmul", &QuantizedWeight::matmul, py::arg("x"))
      .def_property_readonly("nbytes", &QuantizedWeight::nbytes);
}

}  // namespace openhlo::cpu
