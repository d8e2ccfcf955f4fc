// TensorView / Tensor / TensorBuilder.
#include <random>

#include "test_util.hpp"

namespace pipelink::test {
namespace {

TEST(TensorView, ContiguousStridesAndExtent) {
  float buf[24];
  TensorView v(buf, DType::f32, Device::cpu(), {2, 3, 4});
  EXPECT_EQ(v.rank(), 3);
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.stride(-1), 1);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_TRUE(v.rows_contiguous());
  EXPECT_EQ(v.byte_extent(), (std::pair<std::int64_t, std::int64_t>{0, 96}));
  EXPECT_EQ(v.shape_str(), "[2, 3, 4]");
  EXPECT_FALSE(v.origin().known());
}

TEST(TensorView, StridedViewsAndOverlap) {
  float buf[40];
  const std::int64_t shape[] = {4, 5}, strides[] = {10, 2};
  TensorView v(buf, DType::f32, Device::cpu(), shape, strides);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_FALSE(v.rows_contiguous());
  TensorView a(buf, DType::f32, Device::cpu(), {10});
  TensorView b(buf + 10, DType::f32, Device::cpu(), {10});
  EXPECT_FALSE(a.overlaps(b));
  EXPECT_TRUE(a.overlaps(TensorView(buf + 9, DType::f32, Device::cpu(), {2})));
  EXPECT_FALSE(a.overlaps(TensorView(buf, DType::f32, Device::cuda(0), {2})));  // other device
}

// overlaps() against the bytes themselves, on random rank-2 views of one buffer: never "no" where
// bytes are shared, and exact where both views have contiguous rows of one pitch (x = h[:, :F],
// out = h[:, F:] of a concatenated buffer, or even and odd rows, were refused as aliasing before:
// a review, session 46).
TEST(TensorView, OverlapOfInterleavedRowsIsExact) {
  float buf[512];
  std::mt19937_64 rng(test::fresh_seed());
  auto pick = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  int exact = 0, disjoint_interleaved = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int pitch = pick(1, 12);
    struct V {
      int off, rows, cols, pitch, inner;
    };
    auto make = [&] {
      V v{pick(0, 100), pick(1, 6), pick(0, 8), pick(0, 3) ? pitch : pick(1, 12), pick(0, 5) ? 1 : pick(1, 3)};
      return v;
    };
    const V a = make(), b = make();
    auto view = [&](const V& v) {
      const std::int64_t shape[] = {v.rows, v.cols}, strides[] = {v.pitch, v.inner};
      return TensorView(buf + v.off, DType::f32, Device::cpu(), shape, strides);
    };
    auto bytes = [&](const V& v) {
      std::vector<bool> used(512, false);
      for (int i = 0; i < v.rows; ++i)
        for (int j = 0; j < v.cols; ++j) used[std::size_t(v.off + i * v.pitch + j * v.inner)] = true;
      return used;
    };
    const auto ua = bytes(a), ub = bytes(b);
    bool shared = false;
    for (std::size_t k = 0; k < 512; ++k) shared = shared || (ua[k] && ub[k]);
    const bool said = view(a).overlaps(view(b));
    ASSERT_TRUE(said || !shared) << "missed an overlap: trial " << trial;
    const bool one_pitch = (a.rows == 1 || b.rows == 1 || a.pitch == b.pitch) && (a.inner == 1 || a.cols <= 1) &&
                           (b.inner == 1 || b.cols <= 1);
    if (one_pitch) {
      ++exact;
      ASSERT_EQ(said, shared) << "trial " << trial << ": offsets " << a.off << ", " << b.off << " rows " << a.rows
                              << ", " << b.rows << " cols " << a.cols << ", " << b.cols << " pitches " << a.pitch
                              << ", " << b.pitch;
      disjoint_interleaved += !shared && a.rows > 1 && b.rows > 1 && a.cols > 0 && b.cols > 0 &&
                              std::max(a.off, b.off) < std::min(a.off + (a.rows - 1) * a.pitch + a.cols,
                                                                b.off + (b.rows - 1) * b.pitch + b.cols);
    }
  }
  EXPECT_GT(exact, 5000);
  EXPECT_GT(disjoint_interleaved, 100);  // the cases the extent alone refused
  // The concatenated buffer as the op sees it.
  Tensor h = TensorBuilder().shape({50, 8}).build();
  fill_uniform(h, -1, 1, test::fresh_seed());
  EdgeList g = uniform_graph(50, 200, test::fresh_seed());
  const std::int64_t half[] = {50, 4}, pitch8[] = {8, 1};
  auto cols = [&](int c0) { return TensorView(h.data_as<float>() + c0, DType::f32, Device::cpu(), half, pitch8); };
  EXPECT_NO_THROW(aggregate(cols(0), g.src, g.dst, std::nullopt, cols(4)));
  EXPECT_THROW(aggregate(cols(0), g.src, g.dst, std::nullopt, cols(3)), ContractViolationError);
}

TEST(TensorView, ByteOffsetAndAlignment) {
  alignas(64) std::uint8_t buf[256];
  const std::int64_t shape[] = {8};
  TensorView v(buf, DType::f32, Device::cpu(), shape, {}, 4);
  EXPECT_EQ(v.data(), buf + 4);
  EXPECT_EQ(v.alignment(), 4u);
  EXPECT_GE(TensorView(buf, DType::f32, Device::cpu(), {8}).alignment(), 64u);
}

TEST(TensorView, RejectsBadSpecs) {
  float buf[4];
  const std::int64_t neg[] = {-1};
  EXPECT_THROW(TensorView(buf, DType::f32, Device::cpu(), neg), std::invalid_argument);
  const std::int64_t big[] = {1, 1, 1, 1, 1, 1, 1};
  EXPECT_THROW(TensorView(buf, DType::f32, Device::cpu(), big), std::invalid_argument);
  const std::int64_t shape[] = {2, 2}, strides[] = {1};
  EXPECT_THROW(TensorView(buf, DType::f32, Device::cpu(), shape, strides), std::invalid_argument);
}

TEST(TensorView, SliceRows) {
  float buf[12];
  TensorView v(buf, DType::f32, Device::cpu(), {4, 3});
  TensorView s = v.slice_rows(1, 3);
  EXPECT_EQ(s.dim(0), 2);
  EXPECT_EQ(s.data(), buf + 3);
  EXPECT_THROW(v.slice_rows(3, 5), std::out_of_range);
}

TEST(TensorBuilder, AlignmentPitchAndOrigin) {
  Tensor t = TensorBuilder().shape({5, 3}).dtype(DType::f32).alignment(256).pitched_rows(64).build();
  EXPECT_EQ(t.view().stride(0), 16);  // 3 floats padded to 64 bytes
  EXPECT_EQ(t.view().stride(1), 1);
  EXPECT_GE(t.view().alignment(), 256u);
  EXPECT_FALSE(t.view().is_contiguous());
  EXPECT_TRUE(t.view().rows_contiguous());
  ASSERT_TRUE(t.view().origin().known());
  EXPECT_NE(std::string(t.view().origin().file).find("test_tensor.cpp"), std::string::npos);
  EXPECT_EQ(t.view().origin().line, std::uint32_t(__LINE__ - 8));
}

TEST(TensorBuilder, ZerosAndClone) {
  Tensor z = TensorBuilder().shape({7, 9}).dtype(DType::f64).zeros();
  for (std::int64_t i = 0; i < 63; ++i) EXPECT_EQ(z.data_as<double>()[i], 0.0);
  Tensor p = TensorBuilder().shape({4, 3}).pitched_rows(32).build();
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 3; ++c) p.data_as<float>()[r * 8 + c] = float(r * 3 + c);
  Tensor c = clone(p);
  EXPECT_TRUE(c.view().is_contiguous());
  for (std::int64_t i = 0; i < 12; ++i) EXPECT_EQ(c.data_as<float>()[i], float(i));
}

TEST(TensorBuilder, RejectsBadSpecsAndMissingBackend) {
  EXPECT_THROW(TensorBuilder().shape({-2}).build(), std::invalid_argument);
  EXPECT_THROW(TensorBuilder().shape({2}).alignment(48).build(), std::invalid_argument);
  EXPECT_THROW(TensorBuilder().shape({2}).dtype(DType::f64).pitched_rows(12).build(), std::invalid_argument);
  // A pitched row whose bytes overflow: it was a 64-byte buffer, and a fill wrote past it (a
  // review, session 46).
  EXPECT_THROW(TensorBuilder().shape({1, (std::int64_t(1) << 62) + 1}).pitched_rows(64).build(), std::invalid_argument);
  EXPECT_THROW(TensorBuilder().shape({3, std::int64_t(1) << 61}).dtype(DType::f64).pitched_rows(64).build(),
               std::invalid_argument);
  EXPECT_THROW(TensorBuilder().shape({2, (std::int64_t(1) << 62) - 1}).pitched_rows(64).build(), std::invalid_argument);
  // A pitch past 2^63 - 1: the row-bytes check underflowed, the stride wrapped to 0, and a fill
  // wrote 800 bytes into 64 (a probe, session 53).
  EXPECT_THROW(TensorBuilder().shape({2, 100}).pitched_rows(SIZE_MAX - 3).build(), std::invalid_argument);
  // Hooks with a null function: a jump to address 0 at the first device tensor (the same probe).
  EXPECT_THROW(set_device_allocator_hooks(DeviceKind::cuda, {}), std::invalid_argument);
  if (!device_allocator_hooks(DeviceKind::cuda)) {
    EXPECT_THROW(TensorBuilder().shape({2}).device(Device::cuda(0)).build(), BackendUnavailableError);
  }
}

TEST(TensorView, AxesOutsideTheRankAreRefused) {
  // dim(-3) of a rank-2 view read shape_[-1] (UBSan: index 2^64 - 1): a probe, session 53.
  Tensor t = TensorBuilder().shape({3, 4}).build();
  EXPECT_EQ(t.view().dim(-1), 4);
  EXPECT_EQ(t.view().dim(-2), 3);
  EXPECT_EQ(t.view().stride(-2), 4);
  for (int bad : {-3, 2, 6, -7}) {
    EXPECT_THROW((void)t.view().dim(bad), std::out_of_range) << bad;
    EXPECT_THROW((void)t.view().stride(bad), std::out_of_range) << bad;
    EXPECT_THROW((void)t.dim(bad), std::out_of_range) << bad;
  }
  try {
    (void)t.view().dim(-3);
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "TensorView: axis -3 of a rank-2 view (valid: -2 to 1)");
  }
  try {
    (void)TensorView().dim(0);
    ADD_FAILURE() << "no error";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "TensorView: axis 0 of a rank-0 view, which has no axes");
  }
}

TEST(TensorView, SelfOverlapAndEmptyViews) {
  float buf[64];
  const std::int64_t shape[] = {4, 8};
  const std::int64_t zero_row[] = {0, 1}, short_row[] = {7, 1}, pitched[] = {10, 1}, transposed[] = {1, 4};
  EXPECT_TRUE(TensorView(buf, DType::f32, Device::cpu(), shape, zero_row).self_overlaps());
  EXPECT_TRUE(TensorView(buf, DType::f32, Device::cpu(), shape, short_row).self_overlaps());
  EXPECT_FALSE(TensorView(buf, DType::f32, Device::cpu(), shape, pitched).self_overlaps());
  EXPECT_FALSE(TensorView(buf, DType::f32, Device::cpu(), shape, transposed).self_overlaps());
  const std::int64_t empty[] = {5, 0};
  EXPECT_TRUE(TensorView(buf, DType::f32, Device::cpu(), empty).is_contiguous());
}

TEST(TensorBuilder, OverflowingShapesAreRejected) {
  EXPECT_THROW(TensorBuilder().shape({std::int64_t(1) << 62, 4}).build(), std::invalid_argument);
  EXPECT_THROW(TensorBuilder().shape({std::int64_t(1) << 40, std::int64_t(1) << 40}).build(), std::invalid_argument);
  float buf[1];
  const std::int64_t huge[] = {std::int64_t(1) << 62, 8};
  EXPECT_THROW(TensorView(buf, DType::f32, Device::cpu(), huge), std::invalid_argument);
}

TEST(DTypeAndDevice, NamesRoundTrip) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_FALSE(parse_dtype("float16").has_value());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cpu").str(), "cpu");
  EXPECT_THROW(Device::parse("gpu"), std::invalid_argument);
  EXPECT_THROW(Device::parse("cuda:x"), std::invalid_argument);
}

}  // namespace
}  // namespace pipelink::test
