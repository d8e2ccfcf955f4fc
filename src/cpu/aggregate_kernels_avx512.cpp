// AVX-512F build of the fused row kernel (compiled with -mavx512f -mavx512dq; only called after CPUID
// says the CPU has them).
#include <immintrin.h>

#include <cstdint>
#include <sleef.h>

// Every template and inline function below lives in a per-ISA namespace: the same code compiled
// with different -m flags must not merge across translation units (ODR), or an AVX-512 copy
// could run on a CPU without it.
#define PIPELINK_ISA_NS avx512
#include "cpu/tanh_f32.inl"

namespace pipelink::cpu::avx512 {
struct P16 {  // primitives for tanh_f32
  using V = __m512;
  static V splat(float s) { return _mm512_set1_ps(s); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V abs(V v) { return _mm512_abs_ps(v); }
  static V sign(V v) { return _mm512_and_ps(v, _mm512_set1_ps(-0.0f)); }
  static V or_(V a, V b) { return _mm512_or_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }  // returns b when either is NaN
  static V round(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V scale2(V v, V n) { return _mm512_scalef_ps(v, n); }
  static __mmask16 less(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static V select(__mmask16 m, V t, V f) { return _mm512_mask_blend_ps(m, f, t); }
};

template <class T> struct S;
template <> struct S<float> {
  static constexpr int W = 16;
  using V = __m512;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V splat(float s) { return _mm512_set1_ps(s); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V tanh(V v) { return tanh_f32<P16>(v); }
  static V relu(V v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }  // NaN stays NaN (see the AVX2 build)
  static V sigmoid(V v) {  // exp(-|v|), e/(1+e) for v < 0 (see the AVX2 build)
    const V one = _mm512_set1_ps(1.f);
    const V e = Sleef_expf16_u10avx512f(
        _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(std::int32_t(0x80000000u)))));
    const V num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), one, e);
    return _mm512_div_ps(num, _mm512_add_ps(one, e));
  }
  static V tanh_u10(V v) { return Sleef_tanhf16_u10avx512f(v); }
  static float scalar_tanh(float v) { return tanh_f32_scalar(v); }
  static float scalar_tanh_u10(float v) { return Sleef_tanhf_u10(v); }
  static float scalar_exp(float v) { return Sleef_expf_u10(v); }
};
template <> struct S<double> {
  static constexpr int W = 8;
  using V = __m512d;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V splat(double s) { return _mm512_set1_pd(s); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V tanh(V v) { return Sleef_tanhd8_u10avx512f(v); }
  static V relu(V v) { return _mm512_max_pd(_mm512_setzero_pd(), v); }
  static V sigmoid(V v) {
    const V one = _mm512_set1_pd(1.);
    const V e = Sleef_expd8_u10avx512f(_mm512_castsi512_pd(
        _mm512_or_si512(_mm512_castpd_si512(v), _mm512_set1_epi64(std::int64_t(0x8000000000000000ull)))));
    const V num = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_LT_OQ), one, e);
    return _mm512_div_pd(num, _mm512_add_pd(one, e));
  }
  static V tanh_u10(V v) { return Sleef_tanhd8_u10avx512f(v); }
  static double scalar_tanh(double v) { return Sleef_tanh_u10(v); }
  static double scalar_tanh_u10(double v) { return Sleef_tanh_u10(v); }
  static double scalar_exp(double v) { return Sleef_exp_u10(v); }
};
}  // namespace pipelink::cpu::avx512

#include "cpu/aggregate_rows.inl"

void pipelink::cpu::aggregate_rows_avx512(const RowsArgs& a) { avx512::run(a); }
void pipelink::cpu::map_rows_avx512(const MapArgs& a) { avx512::run_map(a); }
void pipelink::cpu::tanh_batch_avx512(const float* in, float* out, std::int64_t n) {
  using Sf = avx512::S<float>;
  std::int64_t i = 0;
  for (; i + Sf::W <= n; i += Sf::W) Sf::store(out + i, Sf::tanh(Sf::load(in + i)));
  for (; i < n; ++i) out[i] = Sf::scalar_tanh(in[i]);
}
