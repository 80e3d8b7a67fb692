// pjrt.plugins.cuda._cuda_runtime: the CUDA runtime's Python face. Python (runtime.py) opens
// the driver, makes devices, moves arrays and loads executables whose executable.json it has
// parsed and checked; everything per step runs here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "driver_api.h"
#include "executable.h"

namespace py = pybind11;
using namespace openhlo_cuda;

namespace {

std::shared_ptr<DriverApi> open_driver(const std::string& path) {
  auto driver = std::make_shared<DriverApi>(path);
  driver->check(driver->cuInit(0), "cuInit");
  return driver;
}

BufferRef buffer_ref(const py::handle& value) {
  py::tuple pair = py::reinterpret_borrow<py::tuple>(value);
  return BufferRef{pair[0].cast<int>(), pair[1].cast<size_t>()};
}

template <typename T>
T field(const py::dict& d, const char* key) {
  return d[key].cast<T>();
}

void dims(const py::dict& d, const char* key, unsigned out[3]) {
  std::vector<unsigned> values = field<std::vector<unsigned>>(d, key);
  for (size_t i = 0; i < 3; ++i) {
    out[i] = i < values.size() ? values[i] : 1;
  }
}

// The executable from the checked description runtime.py builds (dicts with buffer indices
// already dense and every field present).
std::shared_ptr<Executable> load_executable(std::shared_ptr<Device> device, py::bytes cubin,
                                            std::vector<std::string> kernels,
                                            py::list buffer_dicts, py::list step_dicts,
                                            std::vector<int> results, int num_params,
                                            std::vector<int> written_params, bool use_graph) {
  std::vector<BufferSpec> buffers;
  for (py::handle item : buffer_dicts) {
    py::dict d = py::reinterpret_borrow<py::dict>(item);
    BufferSpec spec;
    spec.bytes = field<size_t>(d, "bytes");
    std::string kind = field<std::string>(d, "kind");
    spec.kind = kind == "param" ? BufferKind::kParam
                : kind == "const" ? BufferKind::kConst : BufferKind::kTemp;
    spec.param = field<int>(d, "param");
    spec.alias_param = field<int>(d, "alias_param");
    spec.const_data = field<std::string>(d, "data");
    buffers.push_back(std::move(spec));
  }
  std::vector<Step> steps;
  std::vector<LaunchStep> launches;
  std::vector<GemmStep> gemms;
  std::vector<CopyStep> copies;
  for (py::handle item : step_dicts) {
    py::dict d = py::reinterpret_borrow<py::dict>(item);
    std::string op = field<std::string>(d, "op");
    if (op == "launch") {
      LaunchStep launch;
      launch.kernel = field<std::string>(d, "kernel");
      dims(d, "grid", launch.grid);
      dims(d, "block", launch.block);
      launch.shared = field<unsigned>(d, "shared");
      for (py::handle arg : py::reinterpret_borrow<py::list>(d["args"])) {
        launch.args.push_back(buffer_ref(arg));
      }
      steps.push_back(Step{StepKind::kLaunch, static_cast<int>(launches.size())});
      launches.push_back(std::move(launch));
    } else if (op == "gemm") {
      GemmStep gemm;
      gemm.data_type = field<int>(d, "data_type");
      gemm.m = field<int>(d, "m");
      gemm.n = field<int>(d, "n");
      gemm.k = field<int>(d, "k");
      gemm.batch = field<int>(d, "batch");
      gemm.trans_a = field<bool>(d, "trans_a");
      gemm.trans_b = field<bool>(d, "trans_b");
      gemm.a = buffer_ref(d["a"]);
      gemm.b = buffer_ref(d["b"]);
      gemm.c = buffer_ref(d["c"]);
      gemm.lda = field<int>(d, "lda");
      gemm.ldb = field<int>(d, "ldb");
      gemm.ldc = field<int>(d, "ldc");
      gemm.stride_a = field<long long>(d, "stride_a");
      gemm.stride_b = field<long long>(d, "stride_b");
      gemm.stride_c = field<long long>(d, "stride_c");
      steps.push_back(Step{StepKind::kGemm, static_cast<int>(gemms.size())});
      gemms.push_back(gemm);
    } else if (op == "copy") {
      CopyStep copy{buffer_ref(d["src"]), buffer_ref(d["dst"]), field<size_t>(d, "bytes")};
      steps.push_back(Step{StepKind::kCopy, static_cast<int>(copies.size())});
      copies.push_back(copy);
    } else {
      throw std::invalid_argument("unknown step op " + op);
    }
  }
  std::string image = cubin;  // copied with the GIL held
  py::gil_scoped_release release;
  return std::make_shared<Executable>(std::move(device), image, kernels,
                                      std::move(buffers), std::move(steps), std::move(launches),
                                      std::move(gemms), std::move(copies), std::move(results),
                                      num_params, std::move(written_params), use_graph);
}

py::dict allocator_stats(Device& device) {
  AllocatorStats s = device.allocator().stats();
  py::dict d;
  d["bytes_in_use"] = s.bytes_in_use;
  d["peak_bytes_in_use"] = s.peak_bytes_in_use;
  d["bytes_cached"] = s.bytes_cached;
  d["allocations"] = s.allocations;
  d["cache_hits"] = s.cache_hits;
  d["driver_allocations"] = s.driver_allocations;
  d["driver_frees"] = s.driver_frees;
  return d;
}

}  // namespace

PYBIND11_MODULE(_cuda_runtime, m) {
  m.doc() = "The CUDA runtime over the driver API (loaded at run time).";
  py::register_exception<CudaError>(m, "CudaError", PyExc_RuntimeError);
  py::register_exception<DriverNotFound>(m, "DriverNotFound", PyExc_OSError);

  py::class_<DriverApi, std::shared_ptr<DriverApi>>(m, "Driver")
      .def_readonly("path", &DriverApi::path)
      .def("version", [](const DriverApi& d) {
        int version = 0;
        d.check(d.cuDriverGetVersion(&version), "cuDriverGetVersion");
        return version;
      })
      .def("device_count", [](const DriverApi& d) {
        int count = 0;
        d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
        return count;
      });
  m.def("open_driver", &open_driver, py::arg("path"),
        "Load the driver library at `path` and cuInit it.");

  py::class_<DeviceBuffer, std::shared_ptr<DeviceBuffer>>(m, "DeviceBuffer")
      .def_readonly("nbytes", &DeviceBuffer::bytes)
      .def_property_readonly("address", &DeviceBuffer::address)
      .def_property_readonly("released", [](const DeviceBuffer& b) { return !b.block; })
      .def("release", [](DeviceBuffer& b) { b.block.reset(); })
      .def("shares_storage_with", [](const DeviceBuffer& a, const DeviceBuffer& b) {
        return a.block && a.block == b.block;
      });

  py::class_<Event, std::shared_ptr<Event>>(m, "Event")
      .def("is_ready", &Event::is_ready)
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>());

  py::class_<Device, std::shared_ptr<Device>>(m, "Device")
      .def(py::init<std::shared_ptr<DriverApi>, int, std::string>(), py::arg("driver"),
           py::arg("ordinal"), py::arg("cublas_path"))
      .def_property_readonly("name", &Device::name)
      .def_property_readonly("ordinal", &Device::ordinal)
      .def_property_readonly("compute_capability", &Device::compute_capability)
      .def_property_readonly("multiprocessors", &Device::multiprocessors)
      .def("total_memory", &Device::total_memory)
      .def("allocate", [](Device& d, size_t bytes) {
        return std::make_shared<DeviceBuffer>(d.allocate(bytes));
      })
      .def("upload", [](Device& d, py::array array) {
        if (!(array.flags() & py::array::c_style)) {
          throw std::invalid_argument("upload takes a C-contiguous array");
        }
        size_t bytes = array.nbytes();
        auto buffer = std::make_shared<DeviceBuffer>(d.allocate(bytes));
        const void* data = array.data();
        py::gil_scoped_release release;
        d.upload(*buffer, data, bytes);
        return buffer;
      })
      .def("download", [](Device& d, const DeviceBuffer& src, py::array out) {
        if (!(out.flags() & py::array::c_style) || !out.writeable()) {
          throw std::invalid_argument("download takes a writable C-contiguous array");
        }
        if (static_cast<size_t>(out.nbytes()) > src.bytes || !src.block) {
          throw std::invalid_argument("download: the array is larger than the buffer");
        }
        void* data = out.mutable_data();
        size_t bytes = out.nbytes();
        py::gil_scoped_release release;
        d.download(data, src, bytes);
      })
      .def("copy", [](Device& d, const DeviceBuffer& src) {
        auto dst = std::make_shared<DeviceBuffer>(d.allocate(src.bytes));
        d.make_current();
        d.copy_async(dst->address(), src.address(), src.bytes);
        return dst;
      })
      .def("synchronize", &Device::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("record_event", &Device::record_event)
      .def("allocator_stats", &allocator_stats)
      .def("release_cached", [](Device& d) { d.allocator().release_cached(); });

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable")
      .def("run", [](Executable& e, const std::vector<std::shared_ptr<DeviceBuffer>>& args,
                     const std::vector<bool>& donated) {
        std::vector<DeviceBuffer> outputs;
        std::shared_ptr<Event> event;
        {
          py::gil_scoped_release release;
          std::tie(outputs, event) = e.run(args, donated);
        }
        std::vector<std::shared_ptr<DeviceBuffer>> results;
        for (DeviceBuffer& out : outputs) {
          results.push_back(std::make_shared<DeviceBuffer>(std::move(out)));
        }
        return py::make_tuple(results, event);
      })
      .def("stats", [](Executable& e) {
        ExecutableStats s = e.stats();
        py::dict d;
        d["runs"] = s.runs;
        d["graph_captures"] = s.graph_captures;
        d["graph_launches"] = s.graph_launches;
        return d;
      });
  m.def("load_executable", &load_executable, py::arg("device"), py::arg("cubin"),
        py::arg("kernels"), py::arg("buffers"), py::arg("steps"), py::arg("results"),
        py::arg("num_params"), py::arg("written_params"), py::arg("use_graph"));
}
