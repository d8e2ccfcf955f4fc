#pragma once
// The float tanh of the CUDA kernels, in a header of its own so that the standalone
// micro-benchmarks under bench/micro time the library's instruction sequence, not a copy.
namespace pipelink::cuda_detail {

// tanh_f32: CUDA 13.0's tanhf as it compiles for sm_90 (its PTX: 1 - 2 / (2^(2|v| log2 e) + 1)
// for |v| >= 0.6, an odd polynomial below), less its clamp to exactly +-1 for |v| >= 9.0109: there
// 2 / (e + 1) <= 2^-25 already rounds 1 - 2r to 1, so the clamp (a compare and a select, 2 of the
// ~16 instructions) changes at most the last bit next to the threshold, where 1 and 1 - 2^-24
// both lie within an ulp of tanh. The planned run is issue-bound (v11: 68 instructions per edge,
// tanh ~32-36 of them, 90% of issue slots), so each instruction per tanh is ~2 per edge.
// The error is tanhf's (H200: 1.782 ulp at most; CudaAggregate.TanhIsFaithfulInEveryFloatKernel
// checks a sweep against double). Never tanh.approx (PROTOCOL.md).
__device__ __forceinline__ float tanh_f32(float v) {
  const float a = fabsf(v);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(a * __uint_as_float(0x4038AA3Bu)));  // 2 log2(e)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.f));
  const float big = copysignf(fmaf(r, -2.f, 1.f), v);
  const float s = v * v;
  float p = fmaf(__uint_as_float(0x3C80F082u), s, __uint_as_float(0xBD563CAEu));
  p = fmaf(p, s, __uint_as_float(0x3E085941u));
  p = fmaf(p, s, __uint_as_float(0xBEAAA9EDu));
  const float small = fmaf(fmaf(p, s, 0.f), v, v);  // as tanhf: +0 here keeps tanh(-0) = -0 (p * s would not)
  return a >= __uint_as_float(0x3F19999Au) ? big : small;  // 0.6
}

}  // namespace pipelink::cuda_detail
