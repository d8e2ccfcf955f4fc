#include "pipelink/error.hpp"

#include <fmt/format.h>

namespace pipelink {

std::string SourceSite::str() const {
  if (!known()) return "unknown";
  return fmt::format("{}:{} ({})", file, line, function ? function : "?");
}

static std::string violation_message(const std::string& op, const std::string& port,
                                     const std::string& field, const std::string& expected,
                                     const std::string& actual, const SourceSite& origin) {
  // An attribute is not a port: "port 'gamma', field 'attribute'" read as if gamma were a tensor
  // (a review, session 46). The fields (port() holds the attribute's name) are unchanged.
  std::string msg =
      field == "attribute"
          ? fmt::format("contract violation in op '{}', attribute '{}': expected {}, got {}", op, port, expected, actual)
          : fmt::format("contract violation in op '{}', port '{}', field '{}': expected {}, got {}", op, port, field,
                        expected, actual);
  if (origin.known()) msg += fmt::format(" (tensor made at {})", origin.str());
  return msg;
}

ContractViolationError::ContractViolationError(std::string op, std::string port, std::string field,
                                               std::string expected, std::string actual,
                                               SourceSite origin)
    : Error(violation_message(op, port, field, expected, actual, origin)),
      op_(std::move(op)),
      port_(std::move(port)),
      field_(std::move(field)),
      expected_(std::move(expected)),
      actual_(std::move(actual)),
      origin_(origin) {}

IndexOutOfRangeError::IndexOutOfRangeError(std::string op, std::string port, std::int64_t position,
                                           std::int64_t value, std::int64_t bound)
    : Error(fmt::format("op '{}': index out of range in port '{}': element {} is {}, valid range is [0, {})",
                        op, port, position, value, bound)),
      op_(std::move(op)),
      port_(std::move(port)),
      position_(position),
      value_(value),
      bound_(bound) {}

ParseError::ParseError(const std::string& path, std::int64_t line, const std::string& what)
    : Error(line > 0 ? fmt::format("{}:{}: {}", path, line, what) : fmt::format("{}: {}", path, what)),
      path_(path),
      line_(line) {}

}  // namespace pipelink
