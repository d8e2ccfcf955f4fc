// _pipelink: the nanobind layer under the `pipelink` Python package. Arrays arrive through
// DLPack (nb::ndarray: torch, NumPy, CuPy, anything with __dlpack__) and become TensorViews of
// the same memory; nothing is copied. The pure-Python layer (python/pipelink/__init__.py) picks
// the output's framework and the caller's CUDA stream; this file maps C++ errors to Python ones.
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "pipelink/cuda.hpp"
#include "pipelink/pipelink.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace pipelink::python {
namespace {

using Array = nb::ndarray<nb::ro>;       // any dtype, any device, read-only is fine for inputs
using MutArray = nb::ndarray<>;          // outputs

// A DLPack dtype by the name NumPy and torch give it ("float16", "bfloat16", "uint32", ...).
// DLPack's codes by number: nanobind names Bool only from version 2.
std::string dlpack_dtype_name(const nb::dlpack::dtype& t) {
  static constexpr const char* kinds[] = {"int", "uint", "float", nullptr, "bfloat", "complex", "bool"};
  const char* kind = t.code < std::size(kinds) ? kinds[t.code] : nullptr;
  std::string s = kind ? std::string(kind) + (t.code == 6 ? "" : std::to_string(t.bits))
                       : "DLPack type code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits";
  if (t.lanes != 1) s += " x" + std::to_string(t.lanes) + " lanes";
  return s;
}

DType dtype_of(const nb::dlpack::dtype& t, const char* name) {
  using nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == std::uint8_t(dtype_code::Float) && t.bits == 32) return DType::f32;
    if (t.code == std::uint8_t(dtype_code::Float) && t.bits == 64) return DType::f64;
    if (t.code == std::uint8_t(dtype_code::Int) && t.bits == 32) return DType::i32;
    if (t.code == std::uint8_t(dtype_code::Int) && t.bits == 64) return DType::i64;
    if (t.code == std::uint8_t(dtype_code::UInt) && t.bits == 8) return DType::u8;
  }
  // A contract error with the dtype's name (it said "code 2, 16 bits" for float16 before).
  // Every array this module takes is an aggregate port but inspect/debug_dump's "tensor": the op
  // named "pipelink" before (a review, session 46). Each port's own dtypes, not every port's
  // (float16 x was told about indices and images: a newcomer's review, session 51).
  const std::string_view port = name;
  const char* expected = port == "src" || port == "dst" ? "int32 or int64"
                         : port == "tensor"            ? "float32, float64, int32, int64 or uint8"
                                                       : "float32 or float64";
  throw ContractViolationError(port == "tensor" ? "pipelink" : "aggregate", name, field::dtype, expected,
                               dlpack_dtype_name(t));
}

Device device_of(int type, int id, const char* name) {
  if (type == nb::device::cpu::value) return Device::cpu();
  if (type == nb::device::cuda::value) return Device{DeviceKind::cuda, id};
  throw std::invalid_argument(std::string(name) + ": unsupported device type " + std::to_string(type) +
                              " (DLPack code); PipeLink takes CPU and CUDA memory");
}

template <class A>
TensorView view_of(const A& a, const char* name) {
  const DType dt = dtype_of(a.dtype(), name);
  const Device dev = device_of(a.device_type(), a.device_id(), name);
  std::vector<std::int64_t> shape(a.ndim()), strides(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = std::int64_t(a.shape(i));
    strides[i] = std::int64_t(a.stride(i));
  }
  // The view carries the array's own pointer: a contract violation names this port, and the
  // data is never copied.
  return TensorView(const_cast<void*>(static_cast<const void*>(a.data())), dt, dev, shape, strides);
}

AggregatePath path_of(const std::string& mode) {
  if (mode == "auto" || mode == "planned") return AggregatePath::automatic;
  if (mode == "one_shot" || mode == "one-shot") return AggregatePath::one_shot;
  if (mode == "lean") return AggregatePath::lean;
  throw ContractViolationError("aggregate", "", "attribute", "mode one of auto|one_shot|lean", mode);
}

AggregateOptions options_of(const std::string& transform, bool accumulate, const std::string& mode,
                            std::uintptr_t stream) {
  AggregateOptions o;
  o.transform = parse_transform(transform);
  o.accumulate = accumulate;
  o.path = path_of(mode);
  o.stream = reinterpret_cast<void*>(stream);
  return o;
}

std::optional<TensorView> optional_view(const std::optional<Array>& a, const char* name) {
  if (!a) return std::nullopt;
  return view_of(*a, name);
}

void aggregate_py(const Array& x, const Array& src, const Array& dst, const std::optional<Array>& w, const MutArray& out,
                  const std::string& transform, bool accumulate, const std::string& mode, std::uintptr_t stream) {
  const TensorView xv = view_of(x, "x"), sv = view_of(src, "src"), dv = view_of(dst, "dst"), ov = view_of(out, "out");
  const std::optional<TensorView> wv = optional_view(w, "w");
  const AggregateOptions opts = options_of(transform, accumulate, mode, stream);
  nb::gil_scoped_release release;
  aggregate(xv, sv, dv, wv, ov, opts);
}

struct PyPlan {
  AggregatePlan plan;
};

PyPlan build_plan_py(const Array& src, const Array& dst, std::int64_t num_nodes, std::uintptr_t stream) {
  const TensorView sv = view_of(src, "src"), dv = view_of(dst, "dst");
  nb::gil_scoped_release release;
  return PyPlan{AggregatePlan::build(sv, dv, num_nodes, reinterpret_cast<void*>(stream))};
}

void run_plan_py(const PyPlan& p, const Array& x, const std::optional<Array>& w, const MutArray& out,
                 const std::string& transform, bool accumulate, std::uintptr_t stream) {
  const TensorView xv = view_of(x, "x"), ov = view_of(out, "out");
  const std::optional<TensorView> wv = optional_view(w, "w");
  const AggregateOptions opts = options_of(transform, accumulate, "auto", stream);
  nb::gil_scoped_release release;
  aggregate(p.plan, xv, wv, ov, opts);
}

void prepare_weights_py(const PyPlan& p, const std::string& dtype, std::uintptr_t stream) {
  const auto t = parse_dtype(dtype);
  if (!t) throw ContractViolationError("prepare_weights", "w", field::dtype, "float32 or float64", dtype);
  nb::gil_scoped_release release;
  p.plan.prepare_weights(*t, reinterpret_cast<void*>(stream));
}

struct PyPlanWeights {
  PlanWeights weights;  // its view's storage is the Python PlanWeights' `values` array (read-only there)
};

PyPlanWeights permute_weights_py(const PyPlan& p, const Array& w, const MutArray& out, std::uintptr_t stream) {
  const TensorView wv = view_of(w, "w"), ov = view_of(out, "out");
  nb::gil_scoped_release release;
  return PyPlanWeights{p.plan.permute_weights(wv, ov, reinterpret_cast<void*>(stream))};
}

void run_plan_weights_py(const PyPlan& p, const Array& x, const PyPlanWeights& w, const Array& values,
                         const MutArray& out, const std::string& transform, bool accumulate, std::uintptr_t stream) {
  const TensorView xv = view_of(x, "x"), ov = view_of(out, "out");
  // The weights' storage is the Python object's `values`: resized or rebound since
  // permute_weights (torch's resize_ or set_), the native view would read freed memory (a
  // review, session 43). Each run checks that `values` still is that memory.
  const TensorView vv = view_of(values, "w");
  const TensorView& held = w.weights.values();
  if (vv.data() != held.data() || vv.numel() != held.numel() || vv.dtype() != held.dtype() || vv.rank() != 1 ||
      vv.stride(0) != 1)
    throw ContractViolationError("aggregate", "w", "storage", "the PlanWeights' values as permute_weights wrote them",
                                 "values resized or rebound since: permute the weights again");
  const AggregateOptions opts = options_of(transform, accumulate, "auto", stream);
  nb::gil_scoped_release release;
  aggregate(p.plan, xv, w.weights, ov, opts);
}

// Host seconds to issue `n` plan runs from C++ (no synchronization inside the loop): the baseline
// that bench/compare_torch.py subtracts from the same loop in Python to get the call overhead.
double issue_seconds_py(const PyPlan& p, const Array& x, const std::optional<Array>& w, const MutArray& out,
                        const std::string& transform, std::uintptr_t stream, int n) {
  const TensorView xv = view_of(x, "x"), ov = view_of(out, "out");
  const std::optional<TensorView> wv = optional_view(w, "w");
  const AggregateOptions opts = options_of(transform, false, "auto", stream);
  nb::gil_scoped_release release;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) aggregate(p.plan, xv, wv, ov, opts);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Per-call milliseconds of `n` plan runs issued from C++ in this process, each between two CUDA
// events on `stream` and waited for, as compare_torch's Clock times a Python call: the same
// tensors and process state, without the binding. Why: Python's planned rows ran 0.08-0.27 ms
// over the C++ bench's in some calls (v25) and matched in others (v24); the C++ bench is
// another process. CUDA plans only.
std::vector<double> time_plan_ms_py(const PyPlan& p, const Array& x, const std::optional<Array>& w, const MutArray& out,
                                    const std::string& transform, std::uintptr_t stream, int n) {
  if (p.plan.device().kind != DeviceKind::cuda) throw std::invalid_argument("time_plan_ms: a CUDA plan only");
  const TensorView xv = view_of(x, "x"), ov = view_of(out, "out");
  const std::optional<TensorView> wv = optional_view(w, "w");
  const AggregateOptions opts = options_of(transform, false, "auto", stream);
  nb::gil_scoped_release release;
  const cuda::DeviceGuard device_guard(p.plan.device().index);  // the events are the current device's
  cuda::Event start, stop;
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    start.record(reinterpret_cast<void*>(stream));
    aggregate(p.plan, xv, wv, ov, opts);
    stop.record(reinterpret_cast<void*>(stream));
    stop.synchronize();
    ms.push_back(stop.elapsed_ms(start));
  }
  return ms;
}

std::string inspect_py(const Array& a) { return inspect_tensor(view_of(a, "tensor")); }
void dump_py(const Array& a, const std::string& path) { debug_dump(view_of(a, "tensor"), path); }

// A host Tensor handed to Python as a NumPy array that owns its storage.
nb::object numpy_of(Tensor t) {
  if (t.device().kind != DeviceKind::cpu) t = to_device(t, Device::cpu());
  // Held by a unique_ptr until the capsule owns it: a failing capsule (out of memory) leaked it.
  auto held = std::make_unique<Tensor>(std::move(t));
  Tensor* keep = held.get();
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  (void)held.release();
  const TensorView& v = keep->view();
  std::vector<std::size_t> shape(std::size_t(v.rank()));
  std::vector<std::int64_t> strides(std::size_t(v.rank()));
  for (int i = 0; i < v.rank(); ++i) {
    shape[std::size_t(i)] = std::size_t(v.dim(i));
    strides[std::size_t(i)] = v.stride(i);
  }
  nb::dlpack::dtype dt;
  switch (v.dtype()) {
    case DType::f32: dt = nb::dtype<float>(); break;
    case DType::f64: dt = nb::dtype<double>(); break;
    case DType::i32: dt = nb::dtype<std::int32_t>(); break;
    case DType::i64: dt = nb::dtype<std::int64_t>(); break;
    default: dt = nb::dtype<std::uint8_t>(); break;
  }
  nb::ndarray<nb::numpy> arr(v.data(), std::size_t(v.rank()), shape.data(), owner, strides.data(), dt);
  return nb::cast(arr, nb::rv_policy::reference);
}

// debug_load returns a host Tensor.
nb::object load_py(const std::string& path) { return numpy_of(debug_load(path)); }

// A named workload of PROTOCOL.md 1, as `pipelink bench aggregate` makes it for the same name,
// order, seed, edge scale and relabelling (the same graph, x and w): (x, src, dst, w) as NumPy
// arrays, int64 indices.
nb::tuple workload_py(const std::string& name, const std::string& order, std::uint64_t seed, double edge_scale,
                      bool relabel) {
  WorkloadSpec spec = scale_edges(workload_spec(name), edge_scale);
  spec.relabel = relabel;
  WorkloadData d = make_workload(spec, parse_edge_order(order), seed);
  return nb::make_tuple(numpy_of(std::move(d.x)), numpy_of(std::move(d.graph.src)), numpy_of(std::move(d.graph.dst)),
                        numpy_of(std::move(d.w)));
}

// C++ exceptions -> the Python classes of pipelink/_errors.py (which carry the fields). If that
// module cannot be imported the builtin base class is raised with the same message, so the
// original error is never replaced by an ImportError.
template <class Make>
void raise_as(const char* cls_name, PyObject* fallback, const char* what, Make&& make) {
  try {
    nb::object cls = nb::module_::import_("pipelink._errors").attr(cls_name);
    nb::object err = make(cls);
    PyErr_SetObject(cls.ptr(), err.ptr());
  } catch (const nb::python_error&) {
    PyErr_SetString(fallback, what);
  }
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ContractViolationError& e) {
    raise_as("ContractViolationError", PyExc_ValueError, e.what(),
             [&](nb::object& cls) { return cls(e.what(), e.op(), e.port(), e.field(), e.expected(), e.actual()); });
  } catch (const IndexOutOfRangeError& e) {
    raise_as("IndexOutOfRangeError", PyExc_IndexError, e.what(),
             [&](nb::object& cls) { return cls(e.what(), e.op(), e.port(), e.position(), e.value(), e.bound()); });
  } catch (const BackendUnavailableError& e) {
    raise_as("BackendUnavailableError", PyExc_RuntimeError, e.what(), [&](nb::object& cls) { return cls(e.what()); });
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const LookupError& e) {
    PyErr_SetString(PyExc_LookupError, e.what());
  } catch (const ParseError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

}  // namespace

NB_MODULE(_pipelink, m) {
  m.doc() = "PipeLink native layer (use the `pipelink` package, not this module)";
  nb::register_exception_translator(&translate);

  m.def("aggregate", &aggregate_py, "x"_a, "src"_a, "dst"_a, "w"_a.none(), "out"_a, "transform"_a, "accumulate"_a,
        "mode"_a, "stream"_a);
  nb::class_<PyPlan>(m, "AggregatePlan")
      .def_prop_ro("num_nodes", [](const PyPlan& p) { return p.plan.num_nodes(); })
      .def_prop_ro("num_edges", [](const PyPlan& p) { return p.plan.num_edges(); })
      .def_prop_ro("nbytes", [](const PyPlan& p) { return p.plan.bytes(); })
      .def_prop_ro("device", [](const PyPlan& p) { return p.plan.device().str(); });
  m.def("build_plan", &build_plan_py, "src"_a, "dst"_a, "num_nodes"_a, "stream"_a);
  m.def("prepare_weights", &prepare_weights_py, "plan"_a, "dtype"_a, "stream"_a);
  m.def("run_plan", &run_plan_py, "plan"_a, "x"_a, "w"_a.none(), "out"_a, "transform"_a, "accumulate"_a, "stream"_a);
  nb::class_<PyPlanWeights>(m, "PlanWeights")
      .def_prop_ro("plan_id", [](const PyPlanWeights& w) { return w.weights.plan_id(); });
  m.def("permute_weights", &permute_weights_py, "plan"_a, "w"_a, "out"_a, "stream"_a);
  m.def("run_plan_weights", &run_plan_weights_py, "plan"_a, "x"_a, "w"_a, "values"_a, "out"_a, "transform"_a,
        "accumulate"_a, "stream"_a);
  m.def("ops_json", [] { return ops_json(); });
  m.def("inspect_tensor", &inspect_py, "tensor"_a);
  m.def("debug_dump", &dump_py, "tensor"_a, "path"_a);
  m.def("debug_load", &load_py, "path"_a);
  m.def("workload", &workload_py, "name"_a, "order"_a, "seed"_a, "edge_scale"_a, "relabel"_a);
  m.def("time_plan_ms", &time_plan_ms_py, "plan"_a, "x"_a, "w"_a.none(), "out"_a, "transform"_a, "stream"_a, "n"_a);
  m.def("issue_seconds", &issue_seconds_py, "plan"_a, "x"_a, "w"_a.none(), "out"_a, "transform"_a, "stream"_a, "n"_a);
  m.def("memory_stats", [] {
    const auto st = cuda::memory_stats();
    return nb::make_tuple(st.current, st.peak);
  }, "(current, peak) bytes PipeLink holds on CUDA devices");
  m.def("reset_peak_memory", [] { cuda::reset_peak_memory(); });
  m.def("release_cached_memory", [](int device) { cuda::release_cached_memory(device); }, "device"_a = 0);
  m.def("scratch_pool_stats", [](int device) {
    const auto st = cuda::scratch_pool_stats(device);
    return nb::make_tuple(st.reserved, st.used, st.used_peak);
  }, "device"_a = 0, "(reserved, used, used_peak) bytes of PipeLink's scratch pool, where one-shot calls allocate");
  m.def("cuda_backend_built", &cuda_backend_built);
  m.def("cuda_device_count", &cuda_device_count);
}

}  // namespace pipelink::python
