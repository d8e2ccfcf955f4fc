// AVX2+FMA build of the fused row kernel (compiled with -mavx2 -mfma; only called after CPUID
// says the CPU has both).
#include <immintrin.h>
#include <sleef.h>

// Every template and inline function below lives in a per-ISA namespace: the same code compiled
// with different -m flags must not merge across translation units (ODR), or an AVX-512 copy
// could run on a CPU without it.
#define PIPELINK_ISA_NS avx2
#include "cpu/tanh_f32.inl"

namespace pipelink::cpu::avx2 {
struct P8 {  // primitives for tanh_f32
  using V = __m256;
  static V splat(float s) { return _mm256_set1_ps(s); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V abs(V v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static V sign(V v) { return _mm256_and_ps(v, _mm256_set1_ps(-0.0f)); }
  static V or_(V a, V b) { return _mm256_or_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }  // returns b when either is NaN
  static V round(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V scale2(V v, V n) {  // n in [-27, 0]: build 2^n from its exponent bits
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(v, _mm256_castsi256_ps(e));
  }
  static V less(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static V select(V m, V t, V f) { return _mm256_blendv_ps(f, t, m); }
};

template <class T> struct S;
template <> struct S<float> {
  static constexpr int W = 8;
  using V = __m256;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V splat(float s) { return _mm256_set1_ps(s); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V tanh(V v) { return tanh_f32<P8>(v); }
  // max(0, v): MAXPS returns its second operand where either is NaN, so NaN stays NaN (as
  // torch.relu and the float64 oracle); max(v, 0) turned NaN into 0 (a review, session 43).
  static V relu(V v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
  // exp(-|v|) cannot overflow: 1/(1+exp(-v)) gave 0 below v = -88.7, where the answer is a
  // subnormal (5.5e-42 near -95: a review, session 46). e/(1+e) for v < 0; NaN stays NaN.
  static V sigmoid(V v) {
    const V one = _mm256_set1_ps(1.f);
    const V e = Sleef_expf8_u10avx2(_mm256_or_ps(v, _mm256_set1_ps(-0.f)));  // exp(-|v|)
    const V num = _mm256_blendv_ps(one, e, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(one, e));
  }
  static V tanh_u10(V v) { return Sleef_tanhf8_u10avx2(v); }
  static float scalar_tanh(float v) { return tanh_f32_scalar(v); }
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
  static V relu(V v) { return _mm256_max_pd(_mm256_setzero_pd(), v); }  // NaN stays NaN (above)
  static V sigmoid(V v) {  // as for float
    const V one = _mm256_set1_pd(1.);
    const V e = Sleef_expd4_u10avx2(_mm256_or_pd(v, _mm256_set1_pd(-0.)));
    const V num = _mm256_blendv_pd(one, e, _mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_LT_OQ));
    return _mm256_div_pd(num, _mm256_add_pd(one, e));
  }
  static V tanh_u10(V v) { return Sleef_tanhd4_u10avx2(v); }
  static double scalar_tanh(double v) { return Sleef_tanh_u10(v); }
  static double scalar_tanh_u10(double v) { return Sleef_tanh_u10(v); }
  static double scalar_exp(double v) { return Sleef_exp_u10(v); }
};
}  // namespace pipelink::cpu::avx2

#include "cpu/aggregate_rows.inl"

void pipelink::cpu::aggregate_rows_avx2(const RowsArgs& a) { avx2::run(a); }
void pipelink::cpu::map_rows_avx2(const MapArgs& a) { avx2::run_map(a); }
void pipelink::cpu::tanh_batch_avx2(const float* in, float* out, std::int64_t n) {
  using Sf = avx2::S<float>;
  std::int64_t i = 0;
  for (; i + Sf::W <= n; i += Sf::W) Sf::store(out + i, Sf::tanh(Sf::load(in + i)));
  for (; i < n; ++i) out[i] = Sf::scalar_tanh(in[i]);
}
