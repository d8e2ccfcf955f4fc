#pragma once
// The seed article's image operators.
#include "pipelink/tensor.hpp"

namespace pipelink {

/// in: [B, H, W, 3] float32 NHWC RGB. out: [B, H, W, 1] float32, gradient magnitude
/// sqrt(gx^2 + gy^2) of the luma (0.299 R + 0.587 G + 0.114 B), 3x3 Sobel, borders replicated.
void sobel_3x3(const TensorView& in, const TensorView& out);

/// out = clamp(in, 0, 1) ^ (1 / gamma), elementwise, float32, any shape; in-place allowed.
void gamma_correct(const TensorView& in, const TensorView& out, double gamma);

}  // namespace pipelink
