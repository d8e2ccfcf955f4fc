// Registry: static and runtime registration, lookup errors, downgrade policy, invoke.
#include <omp.h>

#include <algorithm>

#include "test_util.hpp"

namespace pipelink::test {
namespace {

int g_calls_cpu_fallback = 0;
int g_calls_cpu_avx = 0;

// A runtime-registered op with a cpu-only port and two CPU variants of different requirements.
void register_test_op() {
  static bool done = [] {
    PortContract in = port("in", "[N]", {DType::f32});
    in.device_kinds = device_bit(DeviceKind::cpu);
    PortContract out = port("out", "[N]", {DType::f32});
    Registry::global().add_op(OpBuilder("test_copy", 1).input(in).output(out).build());
    Variant slow;
    slow.op = "test_copy";
    slow.name = "scalar_loop";
    slow.priority = 1;
    slow.fn = [](OpContext&) { ++g_calls_cpu_fallback; };
    Variant fancy = slow;
    fancy.name = "needs_magic";
    fancy.priority = 5;
    fancy.requires_.features = {"magic_feature"};
    fancy.fn = [](OpContext&) { ++g_calls_cpu_avx; };
    Variant gpu = slow;
    gpu.name = "sm90_only";
    gpu.backend = DeviceKind::cuda;
    gpu.requires_.min_sm = 90;
    Registry::global().add_variant(slow);
    Registry::global().add_variant(fancy);
    Registry::global().add_variant(gpu);
    return true;
  }();
  (void)done;
}

TEST(Registry, BuiltinOpsAreRegisteredStatically) {
  for (const char* name : {"aggregate", "gather_scale", "map", "index_add", "sobel_3x3", "gamma_correct"})
    EXPECT_TRUE(Registry::global().has_op(name)) << name;
  const OpDef& agg = Registry::global().op("aggregate");
  EXPECT_EQ(agg.version, 1);
  ASSERT_NE(agg.find_port("x"), nullptr);
  EXPECT_EQ(shape_pattern_str(agg.find_port("x")->shape), "[N, F]");
  EXPECT_TRUE(agg.find_port("w")->optional);
  EXPECT_TRUE(agg.exec.deterministic);
  EXPECT_EQ(agg.exec.workspace_bytes({{"N", 10}, {"E", 100}, {"F", 4}}, {}), std::size_t(8 * 11 + 800 + 80));
  // A build of 200000 edges takes a histogram per block, up to 3 here (E / 65536) and the
  // threads: one was counted before session 46.
  const std::size_t blocks = std::size_t(std::min(omp_get_max_threads(), 3));
  EXPECT_EQ(agg.exec.workspace_bytes({{"N", 1000}, {"E", 200000}, {"F", 4}}, {}),
            8 * 1001 + 8 * 200000 + blocks * 8 * 1000);
  // Past 8M nodes the histograms' budget is 4 bytes an edge: 16M nodes and 66M edges get 2
  // blocks (256 MB of histograms, under 4E = 264 MB), where 64 MiB alone gave one (session 53).
  const std::int64_t N = 16'000'000, E = 66'000'000;
  const std::size_t big_blocks = std::size_t(std::min(omp_get_max_threads(), 2));
  EXPECT_EQ(agg.exec.workspace_bytes({{"N", N}, {"E", E}, {"F", 64}}, {}),
            8 * std::size_t(N + 1) + 8 * std::size_t(E) + big_blocks * 8 * std::size_t(N));
}

TEST(ShapePattern, SymbolsAreIdentifiers) {
  EXPECT_EQ(shape_pattern_str(parse_shape_pattern(" [ N , F_2, 3, -1 ] ")), "[N, F_2, 3, -1]");
  EXPECT_TRUE(parse_shape_pattern("[]").empty());
  // "[N F]" was one symbol "N F" and "[N-1, F]" a symbol "N-1" (a review, session 46).
  for (const char* bad : {"[N F]", "[N-1, F]", "[3 4]", "[N,]", "[N, F", "N, F]", "[-2]", "[N.F]"})
    EXPECT_THROW(parse_shape_pattern(bad), std::invalid_argument) << bad;
}

TEST(Registry, MissingOpListsWhatExists) {
  try {
    (void)Registry::global().op("agregate");
    FAIL() << "no error";
  } catch (const LookupError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'agregate'"), std::string::npos);
    EXPECT_NE(msg.find("aggregate"), std::string::npos);
    EXPECT_NE(msg.find("index_add"), std::string::npos);
  }
}

TEST(Registry, DuplicateRegistrationIsRejected) {
  register_test_op();
  EXPECT_THROW(Registry::global().add_op(OpBuilder("test_copy", 1).build()), std::invalid_argument);
  Variant v;
  v.op = "test_copy";
  v.name = "scalar_loop";
  EXPECT_THROW(Registry::global().add_variant(v), std::invalid_argument);
}

TEST(DowngradePolicy, PicksBestRunnableVariantAndSaysWhyNot) {
  register_test_op();
  DeviceDesc plain = DeviceDesc::host();
  plain.features.erase("magic_feature");
  VariantChoice c = Registry::global().select("test_copy", plain);
  ASSERT_NE(c.chosen, nullptr);
  EXPECT_EQ(c.chosen->name, "scalar_loop");
  ASSERT_EQ(c.rejected.size(), 1u);
  EXPECT_EQ(c.rejected[0].first->name, "needs_magic");
  EXPECT_NE(c.rejected[0].second.find("magic_feature"), std::string::npos);

  DeviceDesc magic = plain;
  magic.features.insert("magic_feature");
  EXPECT_EQ(Registry::global().select("test_copy", magic).chosen->name, "needs_magic");

  VariantChoice old_gpu = Registry::global().select("test_copy", DeviceDesc::cuda_arch("sm_80"));
  EXPECT_EQ(old_gpu.chosen, nullptr);
  ASSERT_EQ(old_gpu.rejected.size(), 1u);
  EXPECT_NE(old_gpu.rejected[0].second.find("sm_90"), std::string::npos);
  EXPECT_EQ(Registry::global().select("test_copy", DeviceDesc::cuda_arch("sm_90")).chosen->name, "sm90_only");
  EXPECT_THROW(DeviceDesc::cuda_arch("sm_x"), std::invalid_argument);
  // The opt-in shared memory per block by architecture (163 KB for all sm >= 80 before: session 46).
  EXPECT_EQ(DeviceDesc::cuda_arch("sm_90").shared_mem_per_block, 227u * 1024);
  EXPECT_EQ(DeviceDesc::cuda_arch("sm_80").shared_mem_per_block, 163u * 1024);
  EXPECT_EQ(DeviceDesc::cuda_arch("sm_89").shared_mem_per_block, 99u * 1024);
}

TEST(Invoke, RunsChosenVariantAndForcedVariant) {
  register_test_op();
  float a[4] = {1, 2, 3, 4}, b[4];
  const int before = g_calls_cpu_fallback;
  invoke("test_copy", {{"in", TensorView(a, DType::f32, Device::cpu(), {4})},
                       {"out", TensorView(b, DType::f32, Device::cpu(), {4})}});
  EXPECT_EQ(g_calls_cpu_fallback, before + 1);
  EXPECT_THROW(invoke("test_copy",
                      {{"in", TensorView(a, DType::f32, Device::cpu(), {4})},
                       {"out", TensorView(b, DType::f32, Device::cpu(), {4})}},
                      {}, nullptr, "no_such_variant"),
               LookupError);
}

TEST(Invoke, ForcedVariantStillAnswersTheCallsDeterminism) {
  // scalar_loop is deterministic: forcing it where the call asks for non-deterministic output (or
  // a non-deterministic variant where it asks for deterministic) is an error, not a silent run
  // (a review, session 46).
  register_test_op();
  float a[4] = {1, 2, 3, 4}, b[4];
  const PortMap ports{{"in", TensorView(a, DType::f32, Device::cpu(), {4})},
                      {"out", TensorView(b, DType::f32, Device::cpu(), {4})}};
  InvokeOptions o;
  o.variant = "scalar_loop";
  o.deterministic = false;
  const int before = g_calls_cpu_fallback;
  try {
    invoke("test_copy", ports, {}, o);
    ADD_FAILURE() << "expected LookupError";
  } catch (const LookupError& e) {
    EXPECT_NE(std::string(e.what()).find("non-deterministic output"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g_calls_cpu_fallback, before);
  o.deterministic = true;
  invoke("test_copy", ports, {}, o);
  EXPECT_EQ(g_calls_cpu_fallback, before + 1);
}

TEST(Invoke, ForcedVariantStillNeedsItsRequirements) {
  register_test_op();
  float a[4], b[4];
  const PortMap ports{{"in", TensorView(a, DType::f32, Device::cpu(), {4})},
                      {"out", TensorView(b, DType::f32, Device::cpu(), {4})}};
  const int before = g_calls_cpu_avx;
  try {
    invoke("test_copy", ports, {}, nullptr, "needs_magic");  // the host has no "magic_feature"
    FAIL() << "no error";
  } catch (const LookupError& e) {
    EXPECT_NE(std::string(e.what()).find("magic_feature"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g_calls_cpu_avx, before);
  const int slow = g_calls_cpu_fallback;
  invoke("test_copy", ports, {}, nullptr, "scalar_loop");
  EXPECT_EQ(g_calls_cpu_fallback, slow + 1);
}

TEST(Invoke, DevicePortRestrictionIsAContractField) {
  register_test_op();
  float a[4], b[4];
  try {
    invoke("test_copy", {{"in", TensorView(a, DType::f32, Device::cuda(0), {4})},
                         {"out", TensorView(b, DType::f32, Device::cpu(), {4})}});
    FAIL() << "no error";
  } catch (const ContractViolationError& e) {
    EXPECT_EQ(e.op(), "test_copy");
    EXPECT_EQ(e.port(), "in");
    EXPECT_EQ(e.field(), "device");
    EXPECT_EQ(e.expected(), "cpu");
    EXPECT_EQ(e.actual(), "cuda:0");
  }
}

TEST(Invoke, MissingBackendKernelListsWhatExists) {
  // sobel_3x3 has only a CPU kernel: views labelled cuda are refused before anything launches
  // (never dereferenced), either because no CUDA backend is built or because no kernel exists.
  float a[2 * 3 * 3 * 3], b[2 * 3 * 3];
  const std::int64_t in_shape[] = {2, 3, 3, 3}, out_shape[] = {2, 3, 3, 1};
  TensorView in(a, DType::f32, Device::cuda(0), in_shape);
  TensorView out(b, DType::f32, Device::cuda(0), out_shape);
  try {
    invoke("sobel_3x3", {{"in", in}, {"out", out}});
    FAIL() << "no error";
  } catch (const BackendUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos);
  } catch (const LookupError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu/direct_3x3"), std::string::npos) << e.what();
  }
}


}  // namespace
}  // namespace pipelink::test
