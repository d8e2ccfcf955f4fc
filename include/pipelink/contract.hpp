#pragma once
// Memory and execution contracts: data that describes what an operator accepts and how it runs,
// checked before every launch (CUTLASS's can_implement, CV-CUDA's per-port tables).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pipelink/dtype.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink {

/// One dimension of a shape pattern: a fixed size, `-1` (any), or a named symbol such as `N`
/// that must take the same value on every port of the op where it appears.
struct Dim {
  enum class Kind : std::uint8_t { fixed, any, symbol } kind = Kind::any;
  std::int64_t size = -1;
  std::string symbol;

  static Dim of(std::int64_t n) { return {n < 0 ? Kind::any : Kind::fixed, n, {}}; }
  static Dim any() { return {Kind::any, -1, {}}; }
  static Dim sym(std::string name) { return {Kind::symbol, -1, std::move(name)}; }
  std::string str() const;
};

/// Parses "[N, F]", "[E]", "[-1, 3]", "[]" into dims. Throws std::invalid_argument.
std::vector<Dim> parse_shape_pattern(std::string_view text);
std::string shape_pattern_str(const std::vector<Dim>& dims);

enum class PortDirection : std::uint8_t { in, out, inout };
enum class Contiguity : std::uint8_t { any, rows, contiguous };
std::string_view contiguity_name(Contiguity c) noexcept;

inline constexpr std::uint32_t device_bit(DeviceKind k) { return 1u << unsigned(k); }
std::string_view direction_name(PortDirection d) noexcept;  // "in" | "out" | "inout"
std::string dtypes_str(const std::vector<DType>& ts);          // "float32|float64"
std::string device_kinds_str(std::uint32_t mask);              // "cpu|cuda"

inline constexpr std::uint32_t kAllDevices = device_bit(DeviceKind::cpu) | device_bit(DeviceKind::cuda);

struct PortContract {
  std::string name;
  PortDirection direction = PortDirection::in;
  bool optional = false;
  std::vector<Dim> shape;            // rank == shape.size()
  std::vector<DType> dtypes;         // allowed element types
  std::string dtype_group;           // ports sharing a non-empty group must share a dtype
  Layout layout = Layout::unspecified;  // unspecified: any
  std::size_t alignment = 0;         // bytes; 0 means the element size
  Contiguity contiguity = Contiguity::contiguous;
  std::uint32_t device_kinds = kAllDevices;
  bool cross_device = false;         // may live on a device other than the op's execution device
  std::string doc;
};

/// Contract field names, as reported in ContractViolationError::field().
namespace field {
inline constexpr const char* presence = "presence";
inline constexpr const char* rank = "rank";
inline constexpr const char* shape = "shape";
inline constexpr const char* dtype = "dtype";
inline constexpr const char* layout = "layout";
inline constexpr const char* alignment = "alignment";
inline constexpr const char* contiguity = "contiguity";
inline constexpr const char* device = "device";
inline constexpr const char* cross_device = "cross_device";
inline constexpr const char* alias = "alias";
inline constexpr const char* attribute = "attribute";
inline constexpr const char* plan = "plan";  // PlanWeights made for another plan
}  // namespace field

/// Op attributes (non-tensor parameters), also part of the contract.
using AttrValue = std::variant<bool, std::int64_t, double, std::string>;
using Attrs = std::map<std::string, AttrValue, std::less<>>;

struct AttrSpec {
  std::string name;
  AttrValue default_value;
  std::vector<std::string> choices;  // for string attributes: the allowed values
  std::string doc;
};

/// Symbol → size after a successful check (e.g. N=169343, E=1166243, F=64).
using ShapeBindings = std::map<std::string, std::int64_t, std::less<>>;

struct ExecContract {
  bool async = false;              // returns before the work completes (CUDA streams)
  int max_streams = 1;             // streams the op may use concurrently
  bool needs_event_sync = false;   // consumers on other streams must wait on an event
  bool deterministic = true;       // bitwise-identical output for identical inputs
  /// Scratch bytes the op needs for the given shapes (0 when absent).
  std::function<std::size_t(const ShapeBindings&, const Attrs&)> workspace_bytes;
  /// (input port, output port) pairs that may share memory (in-place). Every other pair of an
  /// output with any other port must not overlap.
  std::vector<std::pair<std::string, std::string>> may_alias;
};

/// Named views handed to an op. Absent optional ports are simply missing.
using PortMap = std::map<std::string, TensorView, std::less<>>;

struct CheckResult {
  ShapeBindings dims;
  Device device;  // execution device: that of the first non-cross-device port
  Attrs attrs;    // with defaults filled in
};

/// Checks every port and attribute against the contracts, in port order, field by field.
/// Throws ContractViolationError on the first violation.
CheckResult check_contract(const std::string& op, const std::vector<PortContract>& ports,
                           const std::vector<AttrSpec>& attr_specs, const ExecContract& exec,
                           const PortMap& views, const Attrs& attrs);

std::string attr_str(const AttrValue& v);

}  // namespace pipelink
