#pragma once
// Operator registry: ops register their contracts once (statically with PIPELINK_REGISTER_OP or
// at run time with Registry::add_op); backends register kernels as variants with requirements.
// A downgrade policy picks the best variant a device can run.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <source_location>
#include <string>
#include <vector>

#include "pipelink/contract.hpp"

namespace pipelink {

/// What a device offers, as seen by the downgrade policy.
struct DeviceDesc {
  DeviceKind kind = DeviceKind::cpu;
  std::string name;
  int sm = 0;                         // compute capability ×10 (90 = sm_90); 0 for CPU
  std::set<std::string, std::less<>> features;  // "avx2", "avx512f", "openmp", "vector_atomics", ...
  std::size_t shared_mem_per_block = 0;
  int multiprocessors = 0;            // SMs or hardware threads
  std::size_t l2_bytes = 0;
  std::size_t memory_bytes = 0;

  static DeviceDesc host();          // this machine's CPU
  /// A hypothetical CUDA device for the static checker: "sm_80", "sm_90".
  static DeviceDesc cuda_arch(std::string_view arch);
  std::string str() const;
};

struct Requirements {
  int min_sm = 0;
  std::vector<std::string> features;
  std::size_t shared_mem = 0;
  std::string str() const;
};

class OpDef;

/// Everything a kernel needs: checked views, bound dims, attributes, device.
struct OpContext {
  const OpDef* op = nullptr;
  PortMap ports;
  Attrs attrs;
  ShapeBindings dims;
  Device device;
  DeviceDesc device_desc;
  void* stream = nullptr;  // cudaStream_t on CUDA, unused on CPU

  bool has(std::string_view port) const { return ports.find(port) != ports.end(); }
  const TensorView& port(std::string_view name) const;
  template <class T> T attr(std::string_view name) const { return std::get<T>(attrs.find(name)->second); }
  std::int64_t dim(std::string_view symbol) const { return dims.find(symbol)->second; }
};

using KernelFn = std::function<void(OpContext&)>;

struct Variant {
  std::string op;       // op this variant implements
  std::string name;     // algorithm name: "csr_row_serial", "atomic_vec4"
  DeviceKind backend = DeviceKind::cpu;
  Requirements requires_;
  int priority = 0;     // higher wins among runnable variants
  bool deterministic = true;
  std::string doc;
  KernelFn fn;
};

/// The usual way to describe a kernel in a PIPELINK_REGISTER_VARIANT body.
inline Variant make_variant(std::string op, std::string name, DeviceKind backend, int priority, bool deterministic,
                            KernelFn fn, std::string doc) {
  Variant v;
  v.op = std::move(op);
  v.name = std::move(name);
  v.backend = backend;
  v.priority = priority;
  v.deterministic = deterministic;
  v.fn = std::move(fn);
  v.doc = std::move(doc);
  return v;
}

class OpDef {
 public:
  std::string name;
  int version = 1;
  std::string doc;
  std::vector<PortContract> ports;
  std::vector<AttrSpec> attrs;
  ExecContract exec;

  const PortContract* find_port(std::string_view port) const;
};

/// Builder used inside PIPELINK_REGISTER_OP bodies.
class OpBuilder {
 public:
  OpBuilder(std::string name, int version);
  OpBuilder& doc(std::string d);
  /// pattern like "[N, F]"; dtypes allowed; further fields through the returned port.
  OpBuilder& input(PortContract p);
  OpBuilder& output(PortContract p);
  OpBuilder& attr(AttrSpec a);
  OpBuilder& exec(ExecContract e);
  OpDef build() const { return def_; }

 private:
  OpDef def_;
};

/// Shorthand for a port contract.
PortContract port(std::string name, std::string_view shape_pattern, std::vector<DType> dtypes);

/// Why `v` cannot run on `dev` (empty when it can).
std::string unmet_requirement(const Variant& v, const DeviceDesc& dev);

struct VariantChoice {
  const Variant* chosen = nullptr;
  std::vector<std::pair<const Variant*, std::string>> rejected;  // variant, why not
};

class Registry {
 public:
  static Registry& global();

  /// Throws std::invalid_argument if an op of the same name and version exists.
  void add_op(OpDef def);
  void add_variant(Variant v);

  /// Throws LookupError listing the registered ops.
  const OpDef& op(std::string_view name) const;
  bool has_op(std::string_view name) const;
  std::vector<const OpDef*> ops() const;  // sorted by name
  std::vector<const Variant*> variants(std::string_view op) const;

  /// Downgrade policy: among the op's variants for the device's backend, the highest priority one
  /// whose requirements the device meets. `chosen` is null when none runs (the reasons say why).
  VariantChoice select(std::string_view op, const DeviceDesc& device) const;
  /// The same, among the variants whose determinism matches `deterministic`.
  VariantChoice select(std::string_view op, const DeviceDesc& device, bool deterministic) const;

 private:
  VariantChoice select_impl(std::string_view op, const DeviceDesc& device, std::optional<bool> deterministic) const;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<OpDef>> defs_;
  std::vector<std::unique_ptr<Variant>> variants_;
};

/// Check a registered op's contract without running it (ContractViolationError on a violation).
CheckResult check(std::string_view op, const PortMap& ports, const Attrs& attrs = {});

/// Check the contract, pick a variant for the execution device, run it.
/// Throws ContractViolationError, LookupError (no variant for the backend, listing what exists),
/// BackendUnavailableError, IndexOutOfRangeError, or what the kernel throws.
void invoke(std::string_view op, const PortMap& ports, const Attrs& attrs = {},
            void* stream = nullptr, const std::string& force_variant = {});

struct InvokeOptions {
  void* stream = nullptr;
  std::string variant;                 // force this variant by name
  std::optional<bool> deterministic;   // restrict the policy to (non-)deterministic variants
};
void invoke(std::string_view op, const PortMap& ports, const Attrs& attrs, const InvokeOptions& options);

/// Every registered op as JSON (name, version, doc, ports with their contract fields,
/// attributes, variants, execution contract); with `target`, also the variant selected there.
/// The CLI's `pipelink ops --json` and the Python package's `pipelink.ops()` print this.
std::string ops_json(const DeviceDesc* target = nullptr);

/// The device description used for a given device (cached).
const DeviceDesc& describe(Device d);
/// Installed by the CUDA backend.
void set_cuda_describer(DeviceDesc (*fn)(int index));
void set_cuda_device_counter(int (*fn)() noexcept);
/// Whether this build has the CUDA backend, and how many CUDA devices are usable now (0 when the
/// backend is not built, no driver is loaded or no GPU is present).
bool cuda_backend_built() noexcept;
int cuda_device_count() noexcept;

namespace detail {
bool register_op_static(OpDef (*make)());
bool register_variant_static(Variant (*make)());
}  // namespace detail

}  // namespace pipelink

#define PIPELINK_CONCAT_INNER(a, b) a##b
#define PIPELINK_CONCAT(a, b) PIPELINK_CONCAT_INNER(a, b)

/// Static op registration:
///   PIPELINK_REGISTER_OP(my_op) { return OpBuilder("my_op", 1).input(...).build(); }
#define PIPELINK_REGISTER_OP(ident)                                                       \
  static ::pipelink::OpDef pipelink_make_op_##ident();                                     \
  [[maybe_unused]] static const bool pipelink_op_registered_##ident =                      \
      ::pipelink::detail::register_op_static(&pipelink_make_op_##ident);                   \
  static ::pipelink::OpDef pipelink_make_op_##ident()

/// Static kernel registration, one per (op, backend, algorithm):
///   PIPELINK_REGISTER_VARIANT(agg_cpu) { Variant v; ...; return v; }
#define PIPELINK_REGISTER_VARIANT(ident)                                                  \
  static ::pipelink::Variant pipelink_make_variant_##ident();                              \
  [[maybe_unused]] static const bool pipelink_variant_registered_##ident =                 \
      ::pipelink::detail::register_variant_static(&pipelink_make_variant_##ident);         \
  static ::pipelink::Variant pipelink_make_variant_##ident()
