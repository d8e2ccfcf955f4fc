// Graph loaders: SNAP edge lists and Matrix Market coordinate files.
//
// Files are read whole and parsed in place with std::from_chars (tens of millions of lines per
// second; an istream per token manages a few hundred thousand). Every error is a ParseError that
// names the file, the 1-based line and what was wrong with it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/log_internal.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <string>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pipelink/graph.hpp"

namespace pipelink {
namespace {

// Closes a POSIX file descriptor on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string read_whole_file(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw ParseError(path, 0, fmt::format("cannot open file: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && S_ISDIR(st.st_mode))
    throw ParseError(path, 0, fmt::format("cannot open file: {}", std::strerror(EISDIR)));
  // st_size is a hint only (pipes and /proc report 0): read until EOF, growing as needed.
  std::string text(std::max<std::size_t>(std::size_t(std::max<off_t>(st.st_size, 0)) + 1, 1 << 16), '\0');
  std::size_t used = 0;
  while (true) {
    if (used == text.size()) text.resize(text.size() * 2);
    const ssize_t n = ::read(f.fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ParseError(path, 0, fmt::format("cannot read file: {}", std::strerror(errno)));
    if (n == 0) break;
    used += std::size_t(n);
  }
  text.resize(used);
  return text;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Removes and returns the next whitespace-separated token of `s` (empty at the end).
std::string_view next_token(std::string_view& s) {
  std::size_t i = 0;
  while (i < s.size() && is_blank(s[i])) ++i;
  std::size_t j = i;
  while (j < s.size() && !is_blank(s[j])) ++j;
  const std::string_view tok = s.substr(i, j - i);
  s.remove_prefix(j);
  return tok;
}

// A line for an error message: trimmed, quoted, and cut short if long.
// Bytes outside printable ASCII shown as \xNN: a binary file given as a graph (`--graph x.npy`)
// echoed its raw bytes into the terminal (a newcomer's review, session 46).
std::string quoted(std::string_view line) {
  line = trim(line);
  constexpr std::size_t kMax = 60;
  std::string shown;
  for (const char c : line.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) shown += c;
    else shown += fmt::format("\\x{:02x}", u);
  }
  return fmt::format("'{}{}'", shown, line.size() > kMax ? "..." : "");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

// Iterates over the lines of a buffer ("\n", "\r\n" or a lone "\r" ending: classic Mac files,
// whose lines were once read as one, every edge after the first dropped as an extra column: a
// review, session 43); numbers them from 1.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {
    if (rest_.starts_with("\xEF\xBB\xBF")) rest_.remove_prefix(3);  // UTF-8 byte-order mark
  }
  bool next(std::string_view& line) {
    if (rest_.empty()) return false;
    const std::size_t nl = rest_.find_first_of("\r\n");
    line = rest_.substr(0, nl);
    if (nl == std::string_view::npos) {
      rest_ = {};
    } else {
      const bool crlf = rest_[nl] == '\r' && nl + 1 < rest_.size() && rest_[nl + 1] == '\n';
      rest_.remove_prefix(nl + (crlf ? 2 : 1));
    }
    ++number_;
    return true;
  }
  std::int64_t number() const noexcept { return number_; }
  std::string_view rest() const noexcept { return rest_; }

 private:
  std::string_view rest_;
  std::int64_t number_ = 0;
};

enum class IntParse : std::uint8_t { ok, not_integer, too_large };

IntParse parse_int(std::string_view tok, std::int64_t& out) {
  if (tok.empty()) return IntParse::not_integer;
  const char* end = tok.data() + tok.size();
  auto [p, ec] = std::from_chars(tok.data(), end, out);
  if (ec == std::errc::result_out_of_range) return IntParse::too_large;
  return (ec == std::errc() && p == end) ? IntParse::ok : IntParse::not_integer;
}

// Edges collected while parsing, turned into int64 / float32 tensors at the end.
struct EdgeBuffers {
  std::vector<std::int64_t> src, dst;
  std::vector<float> weight;

  void reserve(std::size_t n, bool weighted) {
    src.reserve(n);
    dst.reserve(n);
    if (weighted) weight.reserve(n);
  }
  EdgeList to_edge_list(std::int64_t num_nodes, bool weighted) const {
    EdgeList g;
    g.num_nodes = num_nodes;
    g.src = copy_to_tensor(src, DType::i64);
    g.dst = copy_to_tensor(dst, DType::i64);
    if (weighted) g.weight = copy_to_tensor(weight, DType::f32);
    return g;
  }
  template <class T>
  static Tensor copy_to_tensor(const std::vector<T>& v, DType t) {
    Tensor out = TensorBuilder().shape({std::int64_t(v.size())}).dtype(t).build();
    if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(T));
    return out;
  }
};

// graph_edge_line's question to a parser: the line that gave edge `edge`, if that edge's
// endpoint is the value the caller saw (a file rewritten since it was loaded names no line rather
// than another edge's). The parser counts edges instead of keeping them (the error path runs
// beside the loaded graph and x) and stops at that edge.
struct EdgeLineQuery {
  std::int64_t edge = 0;
  GraphEndpoint endpoint = GraphEndpoint::any;
  std::int64_t value = 0;
  std::int64_t seen = 0, line = 0;
  bool visit(std::int64_t src, std::int64_t dst, std::int64_t at) {  // true: stop, answered or not
    if (seen++ != edge) return false;
    const bool match = endpoint == GraphEndpoint::src   ? src == value
                       : endpoint == GraphEndpoint::dst ? dst == value
                                                        : true;
    if (match) line = at;
    return true;
  }
};

std::size_t count_lines(std::string_view text) {  // an estimate for reserve(): CR-only files count 1
  return std::size_t(std::count(text.begin(), text.end(), '\n')) + 1;
}

// ---------------------------------------------------------------------------------------------
// SNAP

// Parses one node id of a SNAP edge line; throws with the line's context.
std::int64_t snap_id(std::string_view tok, std::string_view line, const std::string& path,
                     std::int64_t lineno, std::int64_t num_nodes) {
  std::int64_t id = 0;
  switch (parse_int(tok, id)) {
    case IntParse::ok: break;
    case IntParse::too_large:
      throw ParseError(path, lineno, fmt::format("node id '{}' does not fit in 64 bits", tok));
    case IntParse::not_integer:
      throw ParseError(path, lineno, "expected two non-negative integer node ids, got " + quoted(line));
  }
  if (id < 0) throw ParseError(path, lineno, fmt::format("node id {} is negative", id));
  if (num_nodes > 0 && id >= num_nodes)
    throw ParseError(path, lineno, fmt::format("node id {} is out of range for num_nodes = {}", id, num_nodes));
  return id;
}

EdgeList parse_snap(const std::string& path, std::string_view text, std::int64_t num_nodes,
                    EdgeLineQuery* query = nullptr) {
  if (num_nodes < 0) throw std::invalid_argument(fmt::format("load_snap: negative num_nodes {}", num_nodes));
  EdgeBuffers edges;
  if (!query) edges.reserve(count_lines(text), false);
  std::int64_t max_id = -1, extra_lines = 0, first_extra = 0;
  Lines lines(text);
  std::string_view line;
  while (lines.next(line)) {
    std::string_view rest = line;
    const std::string_view a = next_token(rest);
    if (a.empty() || a.front() == '#') continue;  // blank or comment
    const std::string_view b = next_token(rest);
    // Columns after b are ignored (SNAP's temporal graphs put timestamps there, not weights),
    // but not silently: a third column read as weight 1 surprised a reviewer (session 46).
    if (!next_token(rest).empty() && extra_lines++ == 0) first_extra = lines.number();
    const std::int64_t u = snap_id(a, line, path, lines.number(), num_nodes);
    const std::int64_t v = snap_id(b, line, path, lines.number(), num_nodes);
    if (query) {
      if (query->visit(u, v, lines.number())) return {};
      continue;
    }
    edges.src.push_back(u);
    edges.dst.push_back(v);
    max_id = std::max({max_id, u, v});
    // Inferred, the node count is the largest id + 1, which must be an int64 too.
    if (num_nodes == 0 && max_id == std::numeric_limits<std::int64_t>::max())
      throw ParseError(path, lines.number(),
                       fmt::format("node id {} leaves no room for a node count (the largest id + 1)", max_id));
  }
  if (extra_lines > 0 && !query)  // said at the load already
    PIPELINK_LOG_WARN("'{}': {} line(s), the first line {}, have columns after the two node ids; they are ignored "
                      "(a SNAP edge list carries no weights: give them as a .npy, or use a Matrix Market file)",
                      path, extra_lines, first_extra);
  return edges.to_edge_list(num_nodes > 0 ? num_nodes : max_id + 1, false);
}

// ---------------------------------------------------------------------------------------------
// Matrix Market

struct MatrixMarketHeader {
  enum class Field : std::uint8_t { pattern, real, integer } field = Field::pattern;
  bool symmetric = false;
};

constexpr std::string_view kBanner = "%%MatrixMarket";

bool has_banner(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  return text.size() >= kBanner.size() && lower(text.substr(0, kBanner.size())) == lower(kBanner);
}

MatrixMarketHeader parse_mm_banner(const std::string& path, std::string_view line) {
  auto fail = [&](const std::string& what) { throw ParseError(path, 1, "Matrix Market header: " + what); };
  std::string_view rest = line;
  const std::string banner = lower(next_token(rest)), object = lower(next_token(rest)),
                    format = lower(next_token(rest)), field = lower(next_token(rest)),
                    symmetry = lower(next_token(rest));
  if (banner != lower(kBanner) || symmetry.empty())
    fail("expected '%%MatrixMarket matrix coordinate <field> <symmetry>', got " + quoted(line));
  if (object != "matrix") fail(fmt::format("unsupported object '{}' (only matrix)", object));
  if (format != "coordinate") fail(fmt::format("unsupported format '{}' (only coordinate)", format));
  MatrixMarketHeader h;
  if (field == "pattern") h.field = MatrixMarketHeader::Field::pattern;
  else if (field == "real") h.field = MatrixMarketHeader::Field::real;
  else if (field == "integer") h.field = MatrixMarketHeader::Field::integer;
  else fail(fmt::format("unsupported field '{}' (only pattern, real, integer)", field));
  if (symmetry != "general" && symmetry != "symmetric")
    fail(fmt::format("unsupported symmetry '{}' (only general, symmetric)", symmetry));
  h.symmetric = symmetry == "symmetric";
  return h;
}

struct MatrixMarketSize {
  std::int64_t rows = 0, cols = 0, entries = 0;
  std::int64_t line = 0;  // where it was declared, for the entry-count error
};

// Skips '%' comments and blank lines up to the "rows columns entries" line.
MatrixMarketSize parse_mm_size(const std::string& path, Lines& lines, bool symmetric) {
  std::string_view line;
  while (lines.next(line)) {
    std::string_view rest = line;
    const std::string_view first = next_token(rest);
    if (first.empty() || first.front() == '%') continue;
    MatrixMarketSize s;
    s.line = lines.number();
    rest = line;
    const bool ok = parse_int(next_token(rest), s.rows) == IntParse::ok &&
                    parse_int(next_token(rest), s.cols) == IntParse::ok &&
                    parse_int(next_token(rest), s.entries) == IntParse::ok && s.rows >= 0 &&
                    s.cols >= 0 && s.entries >= 0;
    if (!ok)
      throw ParseError(path, s.line, "Matrix Market size line: expected 'rows columns entries', got " + quoted(line));
    if (symmetric && s.rows != s.cols)
      throw ParseError(path, s.line, fmt::format("symmetric matrix must be square, got {} x {}", s.rows, s.cols));
    return s;
  }
  throw ParseError(path, std::max<std::int64_t>(lines.number(), 1),
                   "Matrix Market file has no size line 'rows columns entries'");
}

// Parses "row column [value]" into edge (column-1 -> row-1); false when the line is malformed.
// `extra`: tokens follow the entry (ignored, and said once per file by the caller).
// `flushed`: a nonzero value below float32's range, which loads as 0.
bool parse_mm_entry(std::string_view line, MatrixMarketHeader::Field field, std::int64_t& i,
                    std::int64_t& j, float& value, bool& extra, bool& flushed) {
  std::string_view rest = line;
  if (parse_int(next_token(rest), i) != IntParse::ok || parse_int(next_token(rest), j) != IntParse::ok)
    return false;
  if (field == MatrixMarketHeader::Field::pattern) {
    extra = !next_token(rest).empty();
    return true;
  }
  const std::string_view tok = next_token(rest);
  extra = !next_token(rest).empty();
  const char* end = tok.data() + tok.size();
  if (field == MatrixMarketHeader::Field::integer) {
    std::int64_t n = 0;
    if (parse_int(tok, n) != IntParse::ok) return false;
    value = float(n);
    return true;
  }
  double d = 0;
  auto [p, ec] = std::from_chars(tok.data(), end, d);
  if (ec == std::errc::result_out_of_range && p == end) {
    // Past double's range one way or the other: 1e-400 is a tiny finite value, flushed to 0 as
    // 1e-50 is (warned); 1e400 stays refused below (a review, session 53). strtod tells them
    // apart (0 for the one, HUGE_VAL for the other).
    if (std::strtod(std::string(tok).c_str(), nullptr) == 0) {
      value = 0;
      flushed = true;
      return true;
    }
  }
  value = float(d);
  flushed = d != 0 && value == 0;
  // A weight must be a finite float32: NaN, inf, and finite values past float's range (1e39
  // became inf) are refused as malformed (a review, session 43).
  return !tok.empty() && ec == std::errc() && p == end && std::isfinite(value);
}

EdgeList parse_matrix_market(const std::string& path, std::string_view text, std::int64_t num_nodes,
                             EdgeLineQuery* query = nullptr) {
  Lines lines(text);
  std::string_view line;
  if (!lines.next(line) || !has_banner(line))
    throw ParseError(path, 1, "Matrix Market header: expected '%%MatrixMarket matrix coordinate <field> <symmetry>', got " +
                                  quoted(line));
  const MatrixMarketHeader h = parse_mm_banner(path, line);
  const MatrixMarketSize size = parse_mm_size(path, lines, h.symmetric);
  const std::int64_t dims = std::max(size.rows, size.cols);
  if (num_nodes > 0 && num_nodes < dims)
    throw ParseError(path, size.line, fmt::format("num_nodes = {} is smaller than the declared {} x {} matrix",
                                                  num_nodes, size.rows, size.cols));
  const bool weighted = h.field != MatrixMarketHeader::Field::pattern;
  EdgeBuffers edges;
  // The declared count is a claim, not a promise: cap the reservation by what the file can hold.
  const auto claimed = std::size_t(std::min<std::int64_t>(size.entries, std::int64_t(count_lines(lines.rest()))));
  if (!query) edges.reserve(h.symmetric ? 2 * claimed : claimed, weighted);
  const std::string expect = weighted ? "'row column value'" : "'row column'";
  std::int64_t found = 0, extra_lines = 0, first_extra = 0, flushed_lines = 0, first_flushed = 0;
  while (lines.next(line)) {
    std::string_view rest = line;
    const std::string_view first = next_token(rest);
    if (first.empty() || first.front() == '%') continue;
    std::int64_t i = 0, j = 0;
    float value = 0;
    bool extra = false, flushed = false;
    if (!parse_mm_entry(line, h.field, i, j, value, extra, flushed))
      throw ParseError(
          path, lines.number(),
          fmt::format("expected an entry {}{}, got {}", expect,
                      h.field == MatrixMarketHeader::Field::real ? " (a finite float32 value)" : "", quoted(line)));
    if (i < 1 || j < 1)
      throw ParseError(path, lines.number(), fmt::format("entry ({}, {}): Matrix Market indices start at 1", i, j));
    if (i > size.rows || j > size.cols)
      throw ParseError(path, lines.number(), fmt::format("entry ({}, {}) outside the declared {} x {} matrix", i,
                                                         j, size.rows, size.cols));
    if (++found > size.entries)
      throw ParseError(path, lines.number(), fmt::format("more entries than the declared {}", size.entries));
    // As for SNAP files: ignored, but not silently (a review, session 52).
    if (extra && extra_lines++ == 0) first_extra = lines.number();
    // 1e-50 loaded as 0 without a word, where 1e39 is refused (a probe, session 53): warned, as the
    // value is still a weight the file gives, only one float32 cannot hold.
    if (flushed && flushed_lines++ == 0) first_flushed = lines.number();
    // Row i is the destination (y = A·x sums row i over columns j).
    if (query) {
      if (query->visit(j - 1, i - 1, lines.number()) ||
          (h.symmetric && i != j && query->visit(i - 1, j - 1, lines.number())))
        return {};
      continue;
    }
    edges.src.push_back(j - 1);
    edges.dst.push_back(i - 1);
    if (weighted) edges.weight.push_back(value);
    if (h.symmetric && i != j) {
      edges.src.push_back(i - 1);
      edges.dst.push_back(j - 1);
      if (weighted) edges.weight.push_back(value);
    }
  }
  if (found != size.entries)
    throw ParseError(path, size.line, fmt::format("declared {} entries, found {}", size.entries, found));
  if (extra_lines > 0 && !query)  // said at the load already
    PIPELINK_LOG_WARN("'{}': {} entry line(s), the first line {}, have columns after the entry's {}; they are ignored",
                      path, extra_lines, first_extra,
                      weighted ? "row, column and value" : "row and column (a pattern file carries no values)");
  if (flushed_lines > 0 && !query)
    PIPELINK_LOG_WARN("'{}': {} entry value(s), the first on line {}, are nonzero but below float32's range; they "
                      "load as 0",
                      path, flushed_lines, first_flushed);
  return edges.to_edge_list(std::max(num_nodes, dims), weighted);
}

}  // namespace

EdgeList load_snap(const std::string& path, std::int64_t num_nodes) {
  return parse_snap(path, read_whole_file(path), num_nodes);
}

EdgeList load_matrix_market(const std::string& path) {
  return parse_matrix_market(path, read_whole_file(path), 0);
}

EdgeList load_graph(const std::string& path, std::int64_t num_nodes) {
  if (num_nodes < 0) throw std::invalid_argument(fmt::format("load_graph: negative num_nodes {}", num_nodes));
  const std::string text = read_whole_file(path);
  if (has_banner(text)) return parse_matrix_market(path, text, num_nodes);
  return parse_snap(path, text, num_nodes);
}

std::int64_t graph_edge_line(const std::string& path, std::int64_t edge, GraphEndpoint endpoint, std::int64_t value) {
  if (edge < 0) return 0;
  // Regular files only: a FIFO's second open would wait for a writer that is gone (a review,
  // session 52), and a pipe's content cannot be read again anyway.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  EdgeLineQuery query{edge, endpoint, value};
  try {
    const std::string text = read_whole_file(path);
    if (has_banner(text)) (void)parse_matrix_market(path, text, 0, &query);
    else (void)parse_snap(path, text, 0, &query);
  } catch (const std::exception&) {
    return 0;  // the file changed since it was loaded, or is gone: no line, and the caller's error stands
  }
  return query.line;
}

}  // namespace pipelink
