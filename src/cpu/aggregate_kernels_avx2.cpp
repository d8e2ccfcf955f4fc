// AVX2+FMA build of the fused row kernel (compiled with -mavx2 -mfma; only called after CPUID
// says the CPU has both).
#include <immintrin.h>
#include <sleef.h>

namespace pipelink::cpu::avx2 {
template <class T> struct S;
template <> struct S<float> {
  static constexpr int W = 8;
  using V = __m256;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V splat(float s) { return _mm256_set1_ps(s); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V tanh(V v) { return Sleef_tanhf8_u35avx2(v); }
  static V relu(V v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
  static V sigmoid(V v) {
    const V one = _mm256_set1_ps(1.f);
    return _mm256_div_ps(one, _mm256_add_ps(one, Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), v))));
  }
  static V tanh_u10(V v) { return Sleef_tanhf8_u10avx2(v); }
  static float scalar_tanh(float v) { return Sleef_tanhf_u35(v); }
  static float scalar_tanh_u10(float v) { return Sleef_tanhf_u10(v); }
  static float scalar_exp(float v) { return Sleef_expf_u10(v); }
};
template <> struct S<double> {
  static constexpr int W = 4;
  using V = __m256d;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V splat(double s) { return _mm256_set1_pd(s); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V tanh(V v) { return Sleef_tanhd4_u10avx2(v); }
  static V relu(V v) { return _mm256_max_pd(v, _mm256_setzero_pd()); }
  static V sigmoid(V v) {
    const V one = _mm256_set1_pd(1.);
    return _mm256_div_pd(one, _mm256_add_pd(one, Sleef_expd4_u10avx2(_mm256_sub_pd(_mm256_setzero_pd(), v))));
  }
  static V tanh_u10(V v) { return Sleef_tanhd4_u10avx2(v); }
  static double scalar_tanh(double v) { return Sleef_tanh_u10(v); }
  static double scalar_tanh_u10(double v) { return Sleef_tanh_u10(v); }
  static double scalar_exp(double v) { return Sleef_exp_u10(v); }
};
}  // namespace pipelink::cpu::avx2

#define PIPELINK_ISA_NS avx2
#include "cpu/aggregate_rows.inl"

void pipelink::cpu::aggregate_rows_avx2(const RowsArgs& a) { avx2::run(a); }
void pipelink::cpu::map_rows_avx2(const MapArgs& a) { avx2::run_map(a); }
