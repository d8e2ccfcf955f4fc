// NumPy .npy files: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//
// Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE for 2.0/3.0),
// an ASCII Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a '\n' so the data starts on a 64-byte boundary, then the raw data.
#include "pipelink/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "pipelink/atomic_file.hpp"

namespace pipelink {
namespace {

static_assert(std::endian::native == std::endian::little, ".npy I/O assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kAlign = 64;  // numpy pads the header so data starts 64-byte aligned

struct DescrEntry {
  std::string_view descr;
  DType dtype;
};
// The first entry per dtype is what we write; '<u1' is accepted because some writers use it.
constexpr std::array<DescrEntry, 6> kDescrs{{{"<f4", DType::f32},
                                             {"<f8", DType::f64},
                                             {"<i4", DType::i32},
                                             {"<i8", DType::i64},
                                             {"|u1", DType::u8},
                                             {"<u1", DType::u8}}};

std::string_view descr_of(DType t) {
  for (const auto& d : kDescrs)
    if (d.dtype == t) return d.descr;
  return "?";
}

std::string shape_tuple(std::span<const std::int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads up to n bytes; returns how many were read (fewer only at end of file).
std::size_t read_up_to(const std::string& path, int fd, void* buf, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw ParseError(path, 0, fmt::format("cannot read file: {}", std::strerror(errno)));
    if (r == 0) break;
    got += std::size_t(r);
  }
  return got;
}

struct NpyHeader {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
};

// Recursive-descent parser for the one Python dict literal numpy writes.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  NpyHeader parse() {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<std::int64_t>> shape;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") descr = descr_value();
      else if (key == "fortran_order") fortran = bool_literal();
      else if (key == "shape") shape = int_tuple();
      else fail(fmt::format("unexpected key '{}'", key));
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    // After the dict only padding: spaces and the final newline. Other bytes there were once
    // skipped, so a header length that overran the dict read the data shifted (a review, session
    // 43); numpy refuses such files too.
    skip_space();
    if (pos_ != text_.size()) fail(fmt::format("unexpected bytes after the dict at offset {}", pos_));
    if (!descr || !fortran || !shape) fail("the header needs the keys 'descr', 'fortran_order' and 'shape'");
    if (*fortran) throw ParseError(path_, 0, "Fortran-order arrays are not supported (fortran_order is True)");
    return {to_dtype(*descr), std::move(*shape)};
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // The header as far as 80 bytes: a 5 MB header once came back whole in the message.
    constexpr std::size_t kShown = 80;
    throw ParseError(path_, 0, fmt::format("malformed .npy header ({}): {}{}", what, text_.substr(0, kShown),
                                           text_.size() > kShown ? fmt::format("... ({} bytes)", text_.size()) : ""));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(fmt::format("expected '{}' at offset {}", c, pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a string");
    const char q = text_[pos_++];
    const std::size_t end = text_.find(q, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  std::string descr_value() {
    if (peek('[')) throw ParseError(path_, 0, "structured dtypes are not supported");
    return string_literal();
  }
  bool bool_literal() {
    skip_space();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (text_.substr(pos_).starts_with(word)) {
        pos_ += word.size();
        return value;
      }
    fail("fortran_order must be True or False");
  }
  std::vector<std::int64_t> int_tuple() {
    std::vector<std::int64_t> dims;
    expect('(');
    while (!peek(')')) {
      std::int64_t n = 0;
      auto [p, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), n);
      if (ec != std::errc() || n < 0) fail("shape entries must be non-negative integers");
      pos_ = std::size_t(p - text_.data());
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 longs: "(3L, 4L)"
      dims.push_back(n);
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    if (dims.size() > std::size_t(kMaxRank))
      throw ParseError(path_, 0, fmt::format("rank {} exceeds the maximum {}", dims.size(), kMaxRank));
    return dims;
  }
  DType to_dtype(const std::string& descr) const {
    for (const auto& d : kDescrs)
      if (d.descr == descr) return d.dtype;
    if (descr.size() > 1 && descr[0] == '>')
      throw ParseError(path_, 0, fmt::format("big-endian dtype '{}' is not supported (only little-endian)", descr));
    throw ParseError(path_, 0, fmt::format("unsupported dtype '{}' (supported: <f4, <f8, <i4, <i8, |u1)", descr));
  }

  const std::string& path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

// Reads the preamble and header; leaves `fd` at the first data byte. `file_size` < 0: unknown.
NpyHeader read_header(const std::string& path, int fd, std::int64_t file_size) {
  std::array<unsigned char, 8> pre{};
  if (read_up_to(path, fd, pre.data(), pre.size()) < pre.size() ||
      std::memcmp(pre.data(), kMagic.data(), kMagic.size()) != 0)
    throw ParseError(path, 0, "not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    throw ParseError(path, 0, fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor));
  std::array<unsigned char, 4> len_bytes{};
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (read_up_to(path, fd, len_bytes.data(), len_size) < len_size) throw ParseError(path, 0, "truncated .npy header");
  std::uint32_t header_len = 0;
  for (std::size_t i = len_size; i-- > 0;) header_len = (header_len << 8) | len_bytes[i];
  // A corrupt length must not make us allocate gigabytes for a header that is not there.
  if (file_size >= 0 && std::int64_t(header_len) > file_size - std::int64_t(kMagic.size() + 2 + len_size))
    throw ParseError(path, 0, fmt::format("truncated .npy header: declared {} bytes", header_len));
  std::string text(header_len, '\0');
  if (read_up_to(path, fd, text.data(), header_len) < header_len)
    throw ParseError(path, 0, fmt::format("truncated .npy header: declared {} bytes", header_len));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  return HeaderParser(path, text).parse();
}

// Bytes of data the header promises; throws on sizes that overflow.
std::int64_t payload_bytes(const std::string& path, const NpyHeader& h) {
  // The nonzero dimensions must fit on their own: a zero among them once ended the check, so
  // (0, 2**62, 2**62) got past it and failed later without the file's name (session 46).
  std::int64_t n = std::int64_t(dtype_size(h.dtype));
  bool empty = false;
  for (auto d : h.shape)
    if (d == 0) empty = true;
    else if (n > std::numeric_limits<std::int64_t>::max() / d)
      throw ParseError(path, 0, fmt::format("shape {} is too large", shape_tuple(h.shape)));
    else n *= d;
  return empty ? 0 : n;
}

// ---------------------------------------------------------------------------------------------
// Writing

std::string make_preamble(const TensorView& v) {
  const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                       descr_of(v.dtype()), shape_tuple(v.shape()));
  // Version 1.0 stores the header length in 2 bytes; 2.0 (4 bytes) only when that overflows.
  for (int major : {1, 2}) {
    const std::size_t prefix = kMagic.size() + 2 + (major == 1 ? 2 : 4);
    const std::size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
    const std::size_t header_len = total - prefix;
    if (major == 1 && header_len > 0xffff) continue;
    std::string out(kMagic);
    out += char(major);
    out += char(0);
    for (std::size_t i = 0; i < prefix - kMagic.size() - 2; ++i) out += char((header_len >> (8 * i)) & 0xff);
    out += dict;
    out.append(total - out.size() - 1, ' ');
    out += '\n';
    return out;
  }
  throw std::logic_error("unreachable: .npy 2.0 header lengths cover any rank");
}

}  // namespace

Tensor read_npy(const std::string& path, std::source_location loc) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw ParseError(path, 0, fmt::format("cannot open file: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw ParseError(path, 0, fmt::format("cannot stat file: {}", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ParseError(path, 0, fmt::format("cannot open file: {}", std::strerror(EISDIR)));
  const NpyHeader h = read_header(path, f.fd, S_ISREG(st.st_mode) ? std::int64_t(st.st_size) : -1);
  const std::int64_t need = payload_bytes(path, h);
  // Check the size before allocating, so a corrupt shape cannot ask for terabytes.
  const off_t here = ::lseek(f.fd, 0, SEEK_CUR);
  const std::int64_t have = std::int64_t(st.st_size) - std::int64_t(here);
  if (S_ISREG(st.st_mode) && here >= 0 && have < need)
    throw ParseError(path, 0, fmt::format("truncated data: shape {} of {} needs {} bytes, the file has {}",
                                          shape_tuple(h.shape), dtype_name(h.dtype), need, have));
  Tensor t;
  try {  // a pipe's size is not known before: its shape may ask for more than the host has
    t = TensorBuilder().shape(h.shape).dtype(h.dtype).build(loc);
  } catch (const std::exception& e) {
    throw ParseError(path, 0, fmt::format("shape {} of {}: {}", shape_tuple(h.shape), dtype_name(h.dtype), e.what()));
  }
  const std::size_t got = read_up_to(path, f.fd, t.data(), std::size_t(need));
  if (got < std::size_t(need))
    throw ParseError(path, 0, fmt::format("truncated data: shape {} of {} needs {} bytes, the file has {}",
                                          shape_tuple(h.shape), dtype_name(h.dtype), need, got));
  return t;  // trailing bytes are ignored, as numpy.load does
}

void write_npy(const std::string& path, const TensorView& v) {
  if (v.device() != Device::cpu())
    throw std::invalid_argument(fmt::format("write_npy: tensor is on {}; copy it to the CPU first", v.device().str()));
  if (!v.defined()) throw std::invalid_argument("write_npy: tensor has no data");
  Tensor contiguous;
  const TensorView* src = &v;
  if (!v.is_contiguous()) {
    contiguous = clone(v);
    src = &contiguous.view();
  }
  const std::string preamble = make_preamble(*src);
  AtomicFile f(path, "write_npy");
  f.write(preamble);
  f.write(src->data(), std::size_t(src->numel()) * src->itemsize());
  f.commit();
}

}  // namespace pipelink
