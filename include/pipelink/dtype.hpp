#pragma once
// Element types and devices: the two axes every port contract is checked on.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipelink {

enum class DType : std::uint8_t { f32, f64, i32, i64, u8 };

std::size_t dtype_size(DType t) noexcept;
std::string_view dtype_name(DType t) noexcept;  // "float32", "int64", ...
std::optional<DType> parse_dtype(std::string_view name) noexcept;
bool is_floating(DType t) noexcept;
bool is_integer(DType t) noexcept;

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }

enum class DeviceKind : std::uint8_t { cpu, cuda };
std::string_view device_kind_name(DeviceKind k) noexcept;

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  /// "cpu", "cuda", "cuda:1". Throws std::invalid_argument on anything else.
  static Device parse(std::string_view text);
  std::string str() const;
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

/// Layout tag carried by a view and required by a port. `unspecified` on a view means
/// "not tagged" and matches any port layout; on a port it means "any layout".
enum class Layout : std::uint8_t { unspecified, rows, nhwc, nchw };
std::string_view layout_name(Layout l) noexcept;

}  // namespace pipelink
