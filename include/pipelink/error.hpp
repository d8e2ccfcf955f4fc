#pragma once
// The library's exception types. Inside the library errors are exceptions; the CLI and the
// (future) Python boundary turn them into exit codes / Python exceptions.
#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>

namespace pipelink {

/// Where a tensor was made, when PipeLink made it (TensorBuilder, loaders, generators).
struct SourceSite {
  const char* file = nullptr;
  std::uint32_t line = 0;
  const char* function = nullptr;

  static SourceSite from(const std::source_location& loc) noexcept {
    return {loc.file_name(), static_cast<std::uint32_t>(loc.line()), loc.function_name()};
  }
  bool known() const noexcept { return file != nullptr; }
  std::string str() const;  // "file.cpp:42 (fn)" or "unknown"
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A port's memory contract (or an op attribute) was violated. Raised before anything launches.
class ContractViolationError : public Error {
 public:
  ContractViolationError(std::string op, std::string port, std::string field, std::string expected,
                         std::string actual, SourceSite origin = {});
  const std::string& op() const noexcept { return op_; }
  const std::string& port() const noexcept { return port_; }
  const std::string& field() const noexcept { return field_; }
  const std::string& expected() const noexcept { return expected_; }
  const std::string& actual() const noexcept { return actual_; }
  const SourceSite& origin() const noexcept { return origin_; }

 private:
  std::string op_, port_, field_, expected_, actual_;
  SourceSite origin_;
};

/// An index tensor holds a value outside [0, bound). Raised before any output is written.
class IndexOutOfRangeError : public Error {
 public:
  IndexOutOfRangeError(std::string op, std::string port, std::int64_t position, std::int64_t value,
                       std::int64_t bound);
  const std::string& op() const noexcept { return op_; }
  const std::string& port() const noexcept { return port_; }
  std::int64_t position() const noexcept { return position_; }  // first bad element (edge id)
  std::int64_t value() const noexcept { return value_; }
  std::int64_t bound() const noexcept { return bound_; }

 private:
  std::string op_, port_;
  std::int64_t position_, value_, bound_;
};

/// Unknown op, backend or variant. The message lists what exists.
class LookupError : public Error {
 public:
  using Error::Error;
};

/// A file could not be parsed (graph, .npy, dump metadata). Names file and line.
class ParseError : public Error {
 public:
  ParseError(const std::string& path, std::int64_t line, const std::string& what);
  const std::string& path() const noexcept { return path_; }
  std::int64_t line() const noexcept { return line_; }

 private:
  std::string path_;
  std::int64_t line_;
};

/// An allocation failed (on the device, or on the host for CPU tensors and plans). Says how many
/// bytes were asked for and how many the device had free (the host: its available memory).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(std::uint64_t requested, std::uint64_t free_bytes, const std::string& what)
      : Error(what), requested_(requested), free_(free_bytes) {}
  std::uint64_t requested() const noexcept { return requested_; }
  std::uint64_t free_bytes() const noexcept { return free_; }

 private:
  std::uint64_t requested_, free_;
};

/// The requested backend is not built in or no device of that kind is present.
class BackendUnavailableError : public Error {
 public:
  using Error::Error;
};

}  // namespace pipelink
