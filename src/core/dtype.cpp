#include "pipelink/dtype.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace pipelink {

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

bool is_floating(DType t) noexcept { return t == DType::f32 || t == DType::f64; }
bool is_integer(DType t) noexcept { return !is_floating(t); }

std::string_view device_kind_name(DeviceKind k) noexcept {
  return k == DeviceKind::cpu ? "cpu" : "cuda";
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    auto digits = text.substr(5);
    int idx = -1;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), idx);
    if (ec == std::errc() && p == digits.data() + digits.size() && idx >= 0) return cuda(idx);
  }
  throw std::invalid_argument("invalid device '" + std::string(text) +
                              "': expected cpu, cuda or cuda:N");
}

std::string Device::str() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::string_view layout_name(Layout l) noexcept {
  switch (l) {
    case Layout::unspecified: return "any";
    case Layout::rows: return "rows";
    case Layout::nhwc: return "NHWC";
    case Layout::nchw: return "NCHW";
  }
  return "?";
}

}  // namespace pipelink
