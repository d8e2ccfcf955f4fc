// Portable scalar build of the fused row kernel (any x86-64 / other CPU), with the same SLEEF
// accuracy classes as the vector paths (see aggregate_rows.inl for the tanh choice).
#include <cmath>
#include <sleef.h>

#include <cstdint>

// Every template and inline function below lives in a per-ISA namespace: the same code compiled
// with different -m flags must not merge across translation units (ODR), or an AVX-512 copy
// could run on a CPU without it.
#define PIPELINK_ISA_NS generic
#include "cpu/tanh_f32.inl"

namespace pipelink::cpu::generic {
template <class T> struct S;
template <> struct S<float> {
  static constexpr int W = 1;
  using V = float;
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V splat(float s) { return s; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V tanh(V v) { return tanh_f32_scalar(v); }
  static V relu(V v) { return v < 0.f ? 0.f : v; }  // NaN stays NaN
  // exp(-|v|) cannot overflow: 1/(1+exp(-v)) gave 0 below v = -88.7, where the answer is a
  // subnormal (5.5e-42 near -95: a review, session 46). e/(1+e) for v < 0.
  static V sigmoid(V v) {
    const V e = Sleef_expf_u10(-std::fabs(v));
    return (v < 0.f ? e : 1.f) / (1.f + e);
  }
  static V tanh_u10(V v) { return Sleef_tanhf_u10(v); }
  static float scalar_tanh(float v) { return tanh_f32_scalar(v); }
  static float scalar_tanh_u10(float v) { return Sleef_tanhf_u10(v); }
  static float scalar_exp(float v) { return Sleef_expf_u10(v); }
};
template <> struct S<double> {
  static constexpr int W = 1;
  using V = double;
  static V load(const double* p) { return *p; }
  static void store(double* p, V v) { *p = v; }
  static V splat(double s) { return s; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V tanh(V v) { return Sleef_tanh_u10(v); }
  static V relu(V v) { return v < 0. ? 0. : v; }
  static V sigmoid(V v) {  // as for float
    const V e = Sleef_exp_u10(-std::fabs(v));
    return (v < 0. ? e : 1.) / (1. + e);
  }
  static V tanh_u10(V v) { return Sleef_tanh_u10(v); }
  static double scalar_tanh(double v) { return Sleef_tanh_u10(v); }
  static double scalar_tanh_u10(double v) { return Sleef_tanh_u10(v); }
  static double scalar_exp(double v) { return Sleef_exp_u10(v); }
};
}  // namespace pipelink::cpu::generic

#include "cpu/aggregate_rows.inl"

void pipelink::cpu::aggregate_rows_generic(const RowsArgs& a) { generic::run(a); }
void pipelink::cpu::map_rows_generic(const MapArgs& a) { generic::run_map(a); }
void pipelink::cpu::tanh_batch_generic(const float* in, float* out, std::int64_t n) {
  using Sf = generic::S<float>;
  std::int64_t i = 0;
  for (; i + Sf::W <= n; i += Sf::W) Sf::store(out + i, Sf::tanh(Sf::load(in + i)));
  for (; i < n; ++i) out[i] = Sf::scalar_tanh(in[i]);
}
