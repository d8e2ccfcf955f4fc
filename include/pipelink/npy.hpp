#pragma once
// NumPy .npy (format 1.0/2.0/3.0) read and write, C order, little-endian.
#include <string>

#include "pipelink/tensor.hpp"

namespace pipelink {

/// Throws ParseError on anything malformed or unsupported (Fortran order, big-endian, dtypes
/// outside float32/float64/int32/int64/uint8).
Tensor read_npy(const std::string& path);
/// Writes atomically: to a temp file next to `path`, then rename. On error no file is left.
void write_npy(const std::string& path, const TensorView& v);

}  // namespace pipelink
