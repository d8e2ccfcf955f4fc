#pragma once
// Diagnostics: logging level, tensor inspection, dumps that another tool can read back.
#include <string>

#include "pipelink/tensor.hpp"

namespace pipelink {

enum class LogLevel : int { trace = 0, debug, info, warn, error, off };
/// Initially from PIPELINK_LOG_LEVEL (trace|debug|info|warn|error|off), default warn.
LogLevel log_level() noexcept;
void set_log_level(LogLevel level) noexcept;
/// Throws std::invalid_argument listing the accepted names.
LogLevel parse_log_level(std::string_view name);

/// Human-readable description: shape, strides, dtype, device, pointer, alignment, layout, origin,
/// and for CPU floating tensors min/max/mean and the count of NaN/Inf.
std::string inspect_tensor(const TensorView& v);

/// Writes `<path>.bin` (raw contiguous little-endian elements) and `<path>.json` (metadata:
/// format, version, dtype, shape, strides, device, byte size, origin). Device tensors are
/// copied to the host first. Files are written atomically (temp file + rename).
void debug_dump(const TensorView& v, const std::string& path);
/// Reads a dump back into a contiguous CPU tensor. Throws ParseError on malformed metadata or a
/// size mismatch between metadata and payload.
Tensor debug_load(const std::string& path);

}  // namespace pipelink
