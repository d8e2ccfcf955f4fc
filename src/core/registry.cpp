#include "pipelink/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>
#include <thread>

#include "core/log_internal.hpp"

namespace pipelink {

// ---- DeviceDesc ------------------------------------------------------------------------------

DeviceDesc DeviceDesc::host() {
  DeviceDesc d;
  d.kind = DeviceKind::cpu;
  d.name = "host CPU";
  d.multiprocessors = int(std::max(1u, std::thread::hardware_concurrency()));
  d.features.insert("openmp");
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) d.features.insert("avx2");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) d.features.insert("avx512f");
#endif
  return d;
}

DeviceDesc DeviceDesc::cuda_arch(std::string_view arch) {
  auto digits = arch.starts_with("sm_") ? arch.substr(3) : arch;
  int sm = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), sm);
  if (ec != std::errc() || p != digits.data() + digits.size() || sm < 30)
    throw std::invalid_argument("invalid CUDA architecture '" + std::string(arch) + "': expected e.g. sm_80 or sm_90");
  DeviceDesc d;
  d.kind = DeviceKind::cuda;
  d.name = "hypothetical sm_" + std::to_string(sm);
  d.sm = sm;
  // The opt-in limit per block (cudaDevAttrMaxSharedMemoryPerBlockOptin, as describe_device
  // reads on a real device), by architecture: 163 KB for every sm >= 80 overstated sm_86/89/120
  // and understated sm_90 (a review, session 46).
  d.shared_mem_per_block = sm >= 120               ? 99 * 1024
                           : sm >= 90               ? 227 * 1024
                           : sm == 80 || sm == 87   ? 163 * 1024
                           : sm >= 86               ? 99 * 1024
                           : sm >= 75               ? 64 * 1024
                           : sm >= 70               ? 96 * 1024
                                                    : 48 * 1024;
  if (sm >= 90) d.features.insert("vector_atomics");  // red.global.add.v4.f32 is sm_90+
  return d;
}

std::string DeviceDesc::str() const {
  std::string s = name.empty() ? std::string(device_kind_name(kind)) : name;
  if (kind == DeviceKind::cuda) s += fmt::format(" (sm_{})", sm);
  std::string f;
  for (const auto& x : features) f += (f.empty() ? "" : ",") + x;
  if (!f.empty()) s += " [" + f + "]";
  return s;
}

std::string Requirements::str() const {
  std::string s;
  if (min_sm) s += fmt::format("sm_{}+", min_sm);
  for (const auto& f : features) s += (s.empty() ? "" : ", ") + f;
  if (shared_mem) s += fmt::format("{}smem {} B", s.empty() ? "" : ", ", shared_mem);
  return s.empty() ? "none" : s;
}

// ---- OpDef / builder -------------------------------------------------------------------------

const PortContract* OpDef::find_port(std::string_view port) const {
  for (const auto& p : ports)
    if (p.name == port) return &p;
  return nullptr;
}

const TensorView& OpContext::port(std::string_view name) const {
  auto it = ports.find(name);
  if (it == ports.end()) throw std::logic_error(fmt::format("kernel asked for absent port '{}'", name));
  return it->second;
}

OpBuilder::OpBuilder(std::string name, int version) {
  def_.name = std::move(name);
  def_.version = version;
}
OpBuilder& OpBuilder::doc(std::string d) { def_.doc = std::move(d); return *this; }
OpBuilder& OpBuilder::input(PortContract p) {
  p.direction = PortDirection::in;
  def_.ports.push_back(std::move(p));
  return *this;
}
OpBuilder& OpBuilder::output(PortContract p) {
  if (p.direction == PortDirection::in) p.direction = PortDirection::out;
  def_.ports.push_back(std::move(p));
  return *this;
}
OpBuilder& OpBuilder::attr(AttrSpec a) { def_.attrs.push_back(std::move(a)); return *this; }
OpBuilder& OpBuilder::exec(ExecContract e) { def_.exec = std::move(e); return *this; }

PortContract port(std::string name, std::string_view shape_pattern, std::vector<DType> dtypes) {
  PortContract p;
  p.name = std::move(name);
  p.shape = parse_shape_pattern(shape_pattern);
  p.dtypes = std::move(dtypes);
  return p;
}

// ---- Registry --------------------------------------------------------------------------------

std::string unmet_requirement(const Variant& v, const DeviceDesc& dev) {
  if (v.requires_.min_sm && dev.sm < v.requires_.min_sm)
    return fmt::format("needs sm_{}, device is sm_{}", v.requires_.min_sm, dev.sm);
  for (const auto& f : v.requires_.features)
    if (!dev.features.contains(f)) return "needs feature '" + f + "'";
  if (v.requires_.shared_mem > dev.shared_mem_per_block)
    return fmt::format("needs {} B shared memory, device has {}", v.requires_.shared_mem, dev.shared_mem_per_block);
  return {};
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add_op(OpDef def) {
  std::lock_guard lock(mu_);
  for (const auto& d : defs_)
    if (d->name == def.name && d->version == def.version)
      throw std::invalid_argument(fmt::format("op '{}' version {} is already registered", def.name, def.version));
  PIPELINK_LOG_DEBUG("registered op {} v{}", def.name, def.version);
  defs_.push_back(std::make_unique<OpDef>(std::move(def)));
}

void Registry::add_variant(Variant v) {
  std::lock_guard lock(mu_);
  for (const auto& x : variants_)
    if (x->op == v.op && x->name == v.name && x->backend == v.backend)
      throw std::invalid_argument(fmt::format("variant '{}' of op '{}' on {} is already registered", v.name, v.op,
                                              device_kind_name(v.backend)));
  variants_.push_back(std::make_unique<Variant>(std::move(v)));
}

const OpDef& Registry::op(std::string_view name) const {
  std::lock_guard lock(mu_);
  const OpDef* best = nullptr;
  for (const auto& d : defs_)
    if (d->name == name && (!best || d->version > best->version)) best = d.get();
  if (best) return *best;
  std::vector<std::string> names;
  for (const auto& d : defs_) names.push_back(d->name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  throw LookupError(fmt::format("no op named '{}'; registered ops: {}", name, fmt::join(names, ", ")));
}

bool Registry::has_op(std::string_view name) const {
  std::lock_guard lock(mu_);
  return std::any_of(defs_.begin(), defs_.end(), [&](const auto& d) { return d->name == name; });
}

std::vector<const OpDef*> Registry::ops() const {
  std::lock_guard lock(mu_);
  std::map<std::string, const OpDef*> latest;
  for (const auto& d : defs_) {
    auto& slot = latest[d->name];
    if (!slot || d->version > slot->version) slot = d.get();
  }
  std::vector<const OpDef*> out;
  for (auto& [n, d] : latest) out.push_back(d);
  return out;
}

std::vector<const Variant*> Registry::variants(std::string_view op) const {
  std::lock_guard lock(mu_);
  std::vector<const Variant*> out;
  for (const auto& v : variants_)
    if (v->op == op) out.push_back(v.get());
  std::stable_sort(out.begin(), out.end(), [](const Variant* a, const Variant* b) {
    return a->backend != b->backend ? a->backend < b->backend : a->priority > b->priority;
  });
  return out;
}

VariantChoice Registry::select(std::string_view op_name, const DeviceDesc& dev) const {
  return select_impl(op_name, dev, std::nullopt);
}

VariantChoice Registry::select(std::string_view op_name, const DeviceDesc& dev, bool deterministic) const {
  return select_impl(op_name, dev, deterministic);
}

VariantChoice Registry::select_impl(std::string_view op_name, const DeviceDesc& dev,
                                    std::optional<bool> deterministic) const {
  (void)op(op_name);  // LookupError for an unknown op
  VariantChoice choice;
  for (const Variant* v : variants(op_name)) {
    if (v->backend != dev.kind) continue;
    if (deterministic && v->deterministic != *deterministic) continue;
    const std::string why = unmet_requirement(*v, dev);
    if (!why.empty()) {
      choice.rejected.emplace_back(v, why);
    } else if (!choice.chosen) {
      choice.chosen = v;  // variants() is sorted by priority
    } else {
      choice.rejected.emplace_back(v, fmt::format("lower priority than '{}'", choice.chosen->name));
    }
  }
  return choice;
}

// ---- device descriptions ---------------------------------------------------------------------

namespace {
DeviceDesc (*g_cuda_describer)(int) = nullptr;
int (*g_cuda_counter)() noexcept = nullptr;
}  // namespace

void set_cuda_describer(DeviceDesc (*fn)(int)) { g_cuda_describer = fn; }
void set_cuda_device_counter(int (*fn)() noexcept) { g_cuda_counter = fn; }
bool cuda_backend_built() noexcept { return g_cuda_counter != nullptr; }
int cuda_device_count() noexcept { return g_cuda_counter ? g_cuda_counter() : 0; }

const DeviceDesc& describe(Device d) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, DeviceDesc> cache;
  std::lock_guard lock(mu);
  auto key = std::make_pair(int(d.kind), d.index);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (d.kind == DeviceKind::cpu) return cache.emplace(key, DeviceDesc::host()).first->second;
  if (!g_cuda_describer)
    throw BackendUnavailableError("device " + d.str() + " requested but this PipeLink build has no CUDA backend");
  return cache.emplace(key, g_cuda_describer(d.index)).first->second;
}

// ---- invoke ----------------------------------------------------------------------------------

CheckResult check(std::string_view op_name, const PortMap& ports, const Attrs& attrs) {
  const OpDef& def = Registry::global().op(op_name);
  return check_contract(def.name, def.ports, def.attrs, def.exec, ports, attrs);
}

void invoke(std::string_view op_name, const PortMap& ports, const Attrs& attrs, void* stream,
            const std::string& force_variant) {
  InvokeOptions o;
  o.stream = stream;
  o.variant = force_variant;
  invoke(op_name, ports, attrs, o);
}

void invoke(std::string_view op_name, const PortMap& ports, const Attrs& attrs, const InvokeOptions& options) {
  const std::string& force_variant = options.variant;
  const OpDef& def = Registry::global().op(op_name);
  CheckResult checked = check_contract(def.name, def.ports, def.attrs, def.exec, ports, attrs);
  const DeviceDesc& dev = describe(checked.device);

  const Variant* chosen = nullptr;
  if (!force_variant.empty()) {
    std::vector<std::string> names;
    for (const Variant* v : Registry::global().variants(op_name)) {
      if (v->backend != dev.kind) continue;
      names.push_back(v->name);
      if (v->name == force_variant) chosen = v;
    }
    if (chosen) {
      if (const std::string why = unmet_requirement(*chosen, dev); !why.empty())
        throw LookupError(fmt::format("op '{}': variant '{}' cannot run on {}: {}", op_name, force_variant, dev.str(), why));
      // A forced variant still answers the call's determinism: a non-deterministic one asked for
      // deterministic output ran without a word (a review, session 46).
      if (options.deterministic && chosen->deterministic != *options.deterministic)
        throw LookupError(fmt::format("op '{}': variant '{}' is {}deterministic, and the call asks for {}deterministic "
                                      "output",
                                      op_name, force_variant, chosen->deterministic ? "" : "not ",
                                      *options.deterministic ? "" : "non-"));
    }
    if (!chosen)
      throw LookupError(fmt::format("op '{}' has no variant '{}' on {}; available: {}", op_name, force_variant,
                                    device_kind_name(dev.kind), names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  } else {
    VariantChoice choice = options.deterministic ? Registry::global().select(op_name, dev, *options.deterministic)
                                                 : Registry::global().select(op_name, dev);
    chosen = choice.chosen;
    if (!chosen) {
      std::vector<std::string> have;
      for (const Variant* v : Registry::global().variants(op_name))
        have.push_back(fmt::format("{}/{}", device_kind_name(v->backend), v->name));
      std::vector<std::string> why;
      for (auto& [v, r] : choice.rejected) why.push_back(v->name + ": " + r);
      throw LookupError(fmt::format("op '{}' has no runnable {}kernel for backend {} ({}); registered kernels: {}{}", op_name,
                                    !options.deterministic ? "" : *options.deterministic ? "deterministic " : "non-deterministic (lean) ",
                                    device_kind_name(dev.kind), dev.str(),
                                    have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", ")),
                                    why.empty() ? "" : fmt::format("; rejected: {}", fmt::join(why, "; "))));
    }
  }
  PIPELINK_LOG_DEBUG("invoke {} -> {}/{}", def.name, device_kind_name(dev.kind), chosen->name);
  OpContext ctx;
  ctx.op = &def;
  ctx.ports = ports;
  ctx.attrs = std::move(checked.attrs);
  ctx.dims = std::move(checked.dims);
  ctx.device = checked.device;
  ctx.device_desc = dev;
  ctx.stream = options.stream;
  chosen->fn(ctx);
}

namespace detail {
bool register_op_static(OpDef (*make)()) {
  Registry::global().add_op(make());
  return true;
}
bool register_variant_static(Variant (*make)()) {
  Registry::global().add_variant(make());
  return true;
}
}  // namespace detail

}  // namespace pipelink
