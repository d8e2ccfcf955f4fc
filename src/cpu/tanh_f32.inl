// float32 tanh for the fused CPU kernel, inlined into the row loop (included by the per-ISA
// translation units after they define a primitives struct P with: V, splat, add, sub, mul, div,
// fma(a, b, c) = a*b + c, abs, sign (sign bits only), or_, min, round (to nearest), scale2
// (v * 2^n for integral n), less(a, b) -> mask, select(mask, if_true, if_false)).
//
// Why not SLEEF here: its tanhf is an opaque call per 16 lanes; on arxiv-like (2 cores, AVX-512)
// tanh was 22 of the kernel's 36 ms with Sleef_tanhf16_u35. This version is ~30 inlined vector
// ops; the measured gain is in docs/perf-notes.md.
//
// Method, for a = |v|:
//   a <  0.55: Taylor series  a + a^3 Q(a^2)  to degree 17: truncation < 0.1 ulp at a = 0.55.
//   a >= 0.55: t = exp(-2a) by Cody-Waite reduction + degree-7 Taylor (< 0.1 ulp), then
//              (1 - t) / (1 + t); t <= 1/3 so there is no cancellation.
//   a is clamped to 9: tanh(9) = 1 - 3.0e-8 rounds to 0.99999994f (tanh reaches 1.0f only past
//   9.0109), a 0.5 ulp difference for larger a; NaN propagates through min(9, a).
// Max error measured over every 16th float in [-10, 10]: 1.5 ulp, see tests/test_cpu_tanh.cpp
// (bound there is 2 ulp, the PROTOCOL's "faithful tanh"; a review in session 46 found 1.501 ulp
// at 1.25017 the worst over every positive float, in each instruction set's build).
#pragma once
// Requires PIPELINK_ISA_NS (the including translation unit's instruction-set namespace).

#include <cmath>

namespace pipelink::cpu::PIPELINK_ISA_NS {

template <class P>
inline typename P::V tanh_f32(typename P::V v) {
  using V = typename P::V;
  const V a = P::min(P::splat(9.0f), P::abs(v));

  // Small branch: a + a * s * Q(s), s = a^2 (Q: Taylor coefficients c3 .. c17 of tanh).
  const V s = P::mul(a, a);
  V q = P::splat(5.9002744094558595e-4f);
  q = P::fma(q, s, P::splat(-1.4558343870513183e-3f));
  q = P::fma(q, s, P::splat(3.5921280365724811e-3f));
  q = P::fma(q, s, P::splat(-8.8632355299021973e-3f));
  q = P::fma(q, s, P::splat(2.1869488536155203e-2f));
  q = P::fma(q, s, P::splat(-5.3968253968253971e-2f));
  q = P::fma(q, s, P::splat(1.3333333333333333e-1f));
  q = P::fma(q, s, P::splat(-3.3333333333333331e-1f));
  const V small = P::fma(P::mul(a, s), q, a);

  // Large branch: t = exp(-2a) = 2^n e^r, n = round(-2a / ln 2), r = -2a - n ln 2 (two-part ln 2).
  const V m2a = P::mul(a, P::splat(-2.0f));
  const V n = P::round(P::mul(m2a, P::splat(1.44269504088896341f)));
  V r = P::fma(n, P::splat(-0.693145751953125f), m2a);  // ln 2 high part has 15 significant bits: n * hi is exact
  r = P::fma(n, P::splat(-1.4286068202862268e-6f), r);
  V p = P::splat(1.0f / 5040.0f);
  p = P::fma(p, r, P::splat(1.0f / 720.0f));
  p = P::fma(p, r, P::splat(1.0f / 120.0f));
  p = P::fma(p, r, P::splat(1.0f / 24.0f));
  p = P::fma(p, r, P::splat(1.0f / 6.0f));
  p = P::fma(p, r, P::splat(0.5f));
  p = P::fma(p, r, P::splat(1.0f));
  p = P::fma(p, r, P::splat(1.0f));
  const V t = P::scale2(p, n);
  const V one = P::splat(1.0f);
  const V large = P::div(P::sub(one, t), P::add(one, t));

  return P::or_(P::select(P::less(a, P::splat(0.55f)), small, large), P::sign(v));
}

/// Scalar primitives: the tail elements (F % W) and the generic build use the same method, so
/// every element of a row has the same accuracy whatever its lane.
struct TanhScalarOps {
  using V = float;
  static V splat(float s) { return s; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V abs(V v) { return std::fabs(v); }
  static V sign(V v) { return std::signbit(v) ? -0.0f : 0.0f; }
  static V or_(V a, V b) { return std::signbit(b) ? -a : a; }  // b is a sign (+-0)
  static V min(V a, V b) { return std::isnan(b) ? b : (a < b ? a : b); }
  static V round(V v) { return std::nearbyint(v); }
  static V scale2(V v, V n) { return std::ldexp(v, int(n)); }
  static bool less(V a, V b) { return a < b; }
  static V select(bool m, V t, V f) { return m ? t : f; }
};

inline float tanh_f32_scalar(float v) { return tanh_f32<TanhScalarOps>(v); }

}  // namespace pipelink::cpu::PIPELINK_ISA_NS
