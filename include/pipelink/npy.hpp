#pragma once
// NumPy .npy (format 1.0/2.0/3.0) read and write, C order, little-endian.
#include <source_location>
#include <string>

#include "pipelink/tensor.hpp"

namespace pipelink {

/// Throws ParseError on anything malformed or unsupported (Fortran order, big-endian, dtypes
/// outside float32/float64/int32/int64/uint8). The tensor's origin (named by contract errors) is
/// the caller's line, as TensorBuilder::build's is, not this reader's.
Tensor read_npy(const std::string& path, std::source_location loc = std::source_location::current());
/// Writes atomically: to a temp file next to `path`, then rename. On error no file is left.
void write_npy(const std::string& path, const TensorView& v);

}  // namespace pipelink
