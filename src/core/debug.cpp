#include "pipelink/debug.hpp"

#include "core/strided.hpp"
#include "pipelink/atomic_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipelink {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kDumpFormat = "pipelink-dump";
constexpr int kDumpVersion = 1;

std::string int_list_str(std::span<const std::int64_t> xs) {
  std::string s = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

// Calls fn(const std::byte*) for every element of a CPU view in C order. Strided views are
// walked with an index counter so that pitched and sliced views need no copy.
template <class Fn>
void for_each_element(const TensorView& v, Fn&& fn) {
  const auto item = std::int64_t(v.itemsize());
  const auto* base = static_cast<const std::byte*>(v.data());
  detail::for_each_offset(v, [&](std::int64_t, std::int64_t off) { fn(base + off * item); });
}

template <class T>
T load_elem(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));  // views need not be aligned to sizeof(T)
  return x;
}

template <class T>
void float_stats(const TensorView& v, std::string& out) {
  std::int64_t nans = 0, infs = 0, finite = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0.0;
  for_each_element(v, [&](const std::byte* p) {
    const double x = double(load_elem<T>(p));
    if (std::isnan(x)) {
      ++nans;
    } else if (std::isinf(x)) {
      ++infs;
    } else {
      ++finite;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
  });
  if (finite > 0) {
    out += fmt::format("  min:        {}\n  max:        {}\n  mean:       {} (over {} finite values)\n", lo, hi,
                       sum / double(finite), finite);
  } else {
    out += "  min/max:    none (no finite values)\n";
  }
  out += fmt::format("  nan:        {}\n  inf:        {}\n", nans, infs);
}

template <class T>
void int_stats(const TensorView& v, std::string& out) {
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
  for_each_element(v, [&](const std::byte* p) {
    const T x = load_elem<T>(p);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  });
  // `+` promotes uint8 so that fmt prints a number rather than a character.
  out += fmt::format("  min:        {}\n  max:        {}\n", +lo, +hi);
}

std::string contiguity_str(const TensorView& v) {
  if (v.is_contiguous()) return "contiguous (C order)";
  if (v.rows_contiguous()) return "rows only (unit inner stride, pitched or sliced rows)";
  return "no (strided)";
}

std::string utc_now_iso() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  const auto n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf.data(), n);
}

// The payload format is little-endian; a big-endian host swaps each element on the way.
void to_little_endian_inplace(std::byte* data, std::size_t nbytes, std::size_t item) {
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = 0; i + item <= nbytes; i += item) std::reverse(data + i, data + i + item);
  } else {
    (void)data, (void)nbytes, (void)item;
  }
}

[[noreturn]] void parse_fail(const std::string& path, const std::string& what, std::int64_t line = 0) {
  throw ParseError(path, line, what);
}

std::int64_t line_of_byte(const std::string& text, std::size_t byte) {
  byte = std::min(byte, text.size());
  return 1 + std::int64_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(byte), '\n'));
}

std::string read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) parse_fail(path, fmt::format("cannot open dump metadata: {}", std::strerror(errno)));
  std::string text;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) text.append(buf.data(), n);
  const bool bad = std::ferror(f) != 0;
  const int err = errno;  // a folder opens and fails at its first read: EISDIR, said (a probe, session 53)
  std::fclose(f);
  if (bad) parse_fail(path, fmt::format("read error: {}", std::strerror(err)));
  return text;
}

// A non-negative JSON integer that fits in int64, or ParseError naming the key.
std::int64_t get_size(const json& j, const std::string& path, const std::string& what) {
  if (!j.is_number_integer()) parse_fail(path, fmt::format("{} must be an integer, got {}", what, j.dump()));
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      parse_fail(path, fmt::format("{} is too large ({})", what, u));
    return std::int64_t(u);
  }
  const auto s = j.get<std::int64_t>();
  if (s < 0) parse_fail(path, fmt::format("{} is negative ({})", what, s));
  return s;
}

Layout parse_layout_name(const std::string& s, const std::string& path) {
  for (Layout l : {Layout::unspecified, Layout::rows, Layout::nhwc, Layout::nchw})
    if (layout_name(l) == s) return l;
  parse_fail(path, fmt::format("unknown layout '{}' (expected any|rows|NHWC|NCHW)", s));
}

}  // namespace

// ---- inspect_tensor --------------------------------------------------------------------------

std::string inspect_tensor(const TensorView& v) {
  const auto numel = v.numel();
  std::string s = fmt::format("tensor {} {} on {}\n", dtype_name(v.dtype()), v.shape_str(), v.device().str());
  s += fmt::format("  dtype:      {} ({} bytes per element)\n", dtype_name(v.dtype()), v.itemsize());
  s += fmt::format("  shape:      {} (rank {})\n", v.shape_str(), v.rank());
  s += fmt::format("  strides:    {} (elements)\n", int_list_str(v.strides()));
  s += fmt::format("  device:     {}\n", v.device().str());
  s += fmt::format("  data:       {} (base {} + {} bytes)\n", v.data(), v.base(), v.byte_offset());
  s += fmt::format("  alignment:  {} bytes\n", v.alignment());
  s += fmt::format("  layout:     {}\n", layout_name(v.layout()));
  s += fmt::format("  contiguous: {}\n", contiguity_str(v));
  s += fmt::format("  origin:     {}\n", v.origin().str());
  s += fmt::format("  numel:      {} ({} bytes)\n", numel, numel * std::int64_t(v.itemsize()));

  if (v.device().kind != DeviceKind::cpu) {
    s += fmt::format("  stats:      skipped (data on {} is not readable from the host)\n", v.device().str());
  } else if (numel == 0) {
    s += "  stats:      none (empty tensor)\n";
  } else if (v.base() == nullptr) {
    s += "  stats:      none (view has no data pointer)\n";
  } else {
    switch (v.dtype()) {
      case DType::f32: float_stats<float>(v, s); break;
      case DType::f64: float_stats<double>(v, s); break;
      case DType::i32: int_stats<std::int32_t>(v, s); break;
      case DType::i64: int_stats<std::int64_t>(v, s); break;
      case DType::u8: int_stats<std::uint8_t>(v, s); break;
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// ---- debug_dump / debug_load -----------------------------------------------------------------

void debug_dump(const TensorView& v, const std::string& path) {
  if (!v.defined())
    throw std::invalid_argument(fmt::format("debug_dump('{}'): the view has no data pointer", path));
  const std::size_t item = v.itemsize();
  const std::size_t nbytes = std::size_t(v.numel()) * item;

  // Only copy when the bytes cannot be written as they are: strided views, device memory, or
  // a big-endian host.
  Tensor host_copy;
  const void* payload = v.data();
  const bool direct = v.device().kind == DeviceKind::cpu && v.is_contiguous() &&
                      std::endian::native == std::endian::little;
  if (!direct && nbytes > 0) {
    host_copy = to_device(v, Device::cpu());
    to_little_endian_inplace(static_cast<std::byte*>(host_copy.data()), nbytes, item);
    payload = host_copy.data();
  }

  json meta;
  meta["format"] = kDumpFormat;
  meta["version"] = kDumpVersion;
  meta["dtype"] = std::string(dtype_name(v.dtype()));
  meta["shape"] = std::vector<std::int64_t>(v.shape().begin(), v.shape().end());
  meta["strides"] = std::vector<std::int64_t>(v.strides().begin(), v.strides().end());
  meta["byte_order"] = "little";
  meta["nbytes"] = nbytes;
  meta["device"] = v.device().str();
  meta["layout"] = std::string(layout_name(v.layout()));
  meta["origin"] = v.origin().known() ? json(v.origin().str()) : json(nullptr);
  meta["created"] = utc_now_iso();
  const std::string text = meta.dump(2) + "\n";

  // Both files are written and closed before either replaces anything, so a failed write (a
  // full disk, a file size limit) leaves the old dump as it was. (Renaming the .bin first and
  // failing on the .json once left a new int32 payload under the old float32 metadata, which
  // loaded as wrong values without a word: a review, session 46.) Then the old .json is moved
  // aside, so that no reader pairs it with the new .bin, and put back if the .bin's rename fails;
  // the new .json goes last: its presence means the payload next to it is the one it describes.
  AtomicFile bin(path + ".bin", "debug_dump"), meta_file(path + ".json", "debug_dump");
  bin.write(payload, nbytes);
  meta_file.write(text);
  bin.close();
  meta_file.close();
  const std::string& json_path = meta_file.target();
  std::string aside;
  struct stat old {};
  if (::lstat(json_path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    aside = AtomicFile::unique_name(json_path);
    if (::rename(json_path.c_str(), aside.c_str()) != 0)
      throw Error(fmt::format("debug_dump: cannot replace '{}': {}", json_path, std::strerror(errno)));
  }
  try {
    bin.commit();
  } catch (...) {
    if (!aside.empty()) ::rename(aside.c_str(), json_path.c_str());  // the old dump, whole again
    throw;
  }
  try {
    meta_file.commit();
  } catch (...) {
    // The new .bin is in place without its .json: no dump loads from here (the error says so),
    // rather than the old metadata over the new payload.
    if (!aside.empty()) ::unlink(aside.c_str());
    throw;
  }
  if (!aside.empty()) ::unlink(aside.c_str());
}

Tensor debug_load(const std::string& path) {
  const std::string meta_path = path + ".json";
  const std::string bin_path = path + ".bin";
  const std::string text = read_text_file(meta_path);

  json meta;
  try {
    meta = json::parse(text);
  } catch (const json::parse_error& e) {
    parse_fail(meta_path, fmt::format("invalid JSON: {}", e.what()), line_of_byte(text, e.byte));
  }
  if (!meta.is_object()) parse_fail(meta_path, "dump metadata must be a JSON object");

  auto field = [&](const char* key) -> const json& {
    auto it = meta.find(key);
    if (it == meta.end()) parse_fail(meta_path, fmt::format("missing key '{}'", key));
    return *it;
  };

  const json& format = field("format");
  if (!format.is_string() || format.get<std::string>() != kDumpFormat)
    parse_fail(meta_path, fmt::format("not a PipeLink dump: format is {}, expected \"{}\"", format.dump(), kDumpFormat));
  const json& version = field("version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != kDumpVersion)
    parse_fail(meta_path, fmt::format("unsupported dump version {} (this build reads version {})", version.dump(),
                                      kDumpVersion));

  const json& dtype_j = field("dtype");
  if (!dtype_j.is_string()) parse_fail(meta_path, fmt::format("dtype must be a string, got {}", dtype_j.dump()));
  const auto dtype = parse_dtype(dtype_j.get<std::string>());
  if (!dtype)
    parse_fail(meta_path, fmt::format("unknown dtype '{}' (expected float32|float64|int32|int64|uint8)",
                                      dtype_j.get<std::string>()));

  const json& shape_j = field("shape");
  if (!shape_j.is_array()) parse_fail(meta_path, "shape must be an array");
  if (shape_j.size() > std::size_t(kMaxRank))
    parse_fail(meta_path, fmt::format("rank {} exceeds the maximum {}", shape_j.size(), kMaxRank));
  std::vector<std::int64_t> shape;
  // The nonzero dimensions must fit on their own, as read_npy asks: with a zero first the product
  // stayed 0, and [0, 2^62, 2^62] failed later in TensorBuilder without the file's name (a probe,
  // session 53).
  std::int64_t nonzero_bytes = std::int64_t(dtype_size(*dtype));
  bool overflow = false, empty = false;
  for (std::size_t i = 0; i < shape_j.size(); ++i) {
    const auto n = get_size(shape_j[i], meta_path, fmt::format("shape[{}]", i));
    shape.push_back(n);
    if (n == 0) empty = true;
    else overflow = overflow || __builtin_mul_overflow(nonzero_bytes, n, &nonzero_bytes);
  }
  if (overflow) parse_fail(meta_path, fmt::format("shape {} is too large", shape_j.dump()));
  const std::int64_t expect_bytes = empty ? 0 : nonzero_bytes;

  if (auto it = meta.find("strides"); it != meta.end()) {
    // Informational (the payload is always contiguous), but a malformed value means a corrupt file.
    if (!it->is_array() || it->size() != shape.size() ||
        !std::all_of(it->begin(), it->end(), [](const json& x) { return x.is_number_integer(); }))
      parse_fail(meta_path, fmt::format("strides must be {} integers, got {}", shape.size(), it->dump()));
  }
  if (auto it = meta.find("byte_order"); it != meta.end() && *it != "little")
    parse_fail(meta_path, fmt::format("unsupported byte_order {} (expected \"little\")", it->dump()));
  Layout layout = Layout::unspecified;
  if (auto it = meta.find("layout"); it != meta.end() && !it->is_null()) {
    if (!it->is_string()) parse_fail(meta_path, fmt::format("layout must be a string, got {}", it->dump()));
    layout = parse_layout_name(it->get<std::string>(), meta_path);
  }

  const auto nbytes = get_size(field("nbytes"), meta_path, "nbytes");
  if (nbytes != expect_bytes)
    parse_fail(meta_path, fmt::format("nbytes {} does not match shape {} of {} ({} bytes)", nbytes, shape_j.dump(),
                                      dtype_name(*dtype), expect_bytes));

  std::error_code ec;
  const auto payload_size = fs::file_size(bin_path, ec);
  if (ec) parse_fail(bin_path, fmt::format("cannot read dump payload: {}", ec.message()));
  if (payload_size != std::uintmax_t(nbytes))
    parse_fail(bin_path, fmt::format("payload has {} bytes, metadata says {}", payload_size, nbytes));

  Tensor t = TensorBuilder().shape(shape).dtype(*dtype).layout(layout).build();
  if (nbytes > 0) {
    std::FILE* f = std::fopen(bin_path.c_str(), "rb");
    if (!f) parse_fail(bin_path, fmt::format("cannot open dump payload: {}", std::strerror(errno)));
    const auto got = std::fread(t.data(), 1, std::size_t(nbytes), f);
    std::fclose(f);
    if (got != std::size_t(nbytes))
      parse_fail(bin_path, fmt::format("payload truncated while reading: {} of {} bytes", got, nbytes));
    to_little_endian_inplace(static_cast<std::byte*>(t.data()), std::size_t(nbytes), dtype_size(*dtype));
  }
  return t;
}

}  // namespace pipelink
