// The `pipelink` command-line tool, run as a user would: exit codes, files written or not.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "test_util.hpp"

namespace fs = std::filesystem;

namespace pipelink::test {
namespace {

struct CliRun {
  int status = -1;
  std::string output;
};

CliRun run_cli(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(PIPELINK_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(PIPELINK_CLI_PATH).empty()) GTEST_SKIP() << "SKIPPED: CLI not built";
    dir = fs::temp_directory_path() / ("pipelink_cli_" + std::to_string(fresh_seed()));
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  fs::path dir;
};

TEST_F(Cli, OpsListsEveryOpWithItsContract) {
  CliRun r = run_cli("ops");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* s : {"aggregate v1", "gather_scale", "index_add", "map", "sobel_3x3", "gamma_correct", "[N, F]",
                        "csr_row_serial", "NHWC"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  CliRun j = run_cli("ops --json --arch sm_80");
  ASSERT_EQ(j.status, 0) << j.output;
  EXPECT_NE(j.output.find("\"selected\""), std::string::npos);
}

TEST_F(Cli, AggregateOnAMissingDeviceSaysSoBeforeReadingFiles) {
  // --device cuda where no GPU (or no CUDA backend) is: the device's own error, before the inputs
  // are read (a newcomer got "CUDA driver version is insufficient" after loading them, session 51).
  if (cuda_device_count() > 0) GTEST_SKIP() << "SKIPPED: a GPU is present";
  const CliRun r = run_cli("aggregate --graph " + path("none.txt") + " --x " + path("none.npy") + " --out " +
                           path("o.npy") + " --device cuda");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cuda:0 requested but"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("none.txt"), std::string::npos) << "read the files first: " << r.output;
}

TEST_F(Cli, BenchOutputsThatCannotBeWrittenFailBeforeTheRun) {
  // A missing folder for --json or --markdown: said at once, not after the whole benchmark (a
  // newcomer's review, session 51); the option is named, with no doubled "pipelink:" prefix.
  const std::string bad = path("no-such-folder") + "/o";
  const std::pair<std::string, std::string> runs[] = {
      {"bench aggregate --workload arxiv-like --device cpu --quiet --json " + bad + ".json", "--json"},
      {"bench aggregate --workload arxiv-like --device cpu --quiet --markdown " + bad + ".md", "--markdown"},
      {"bench sweep --workload arxiv-like --device cpu --quiet --json " + bad + ".json", "--json"},
      {"bench sweep --workload arxiv-like --device cpu --quiet --json " + path("ok.json") + " --markdown " + bad + ".md",
       "--markdown"}};
  for (const auto& [args, option] : runs) {
    SCOPED_TRACE(args);
    const auto t0 = std::chrono::steady_clock::now();
    const CliRun r = run_cli(args);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(option + ": cannot write '" + bad), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("pipelink: error: pipelink:"), std::string::npos) << r.output;
    EXPECT_LT(s, 1.5) << "the run went first";  // the bench alone takes ~20 s here
    EXPECT_EQ(r.output.find("[bench"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(path("ok.json"))) << "a probe left the sweep's other file";
  // A directory, and one file for both outputs (the second write replaced the first: a sweep's
  // JSON came out as Markdown), are refused before the run too (a review, session 52).
  fs::create_directories(path("adir"));
  const std::pair<std::string, std::string> before[] = {
      {"bench aggregate --workload arxiv-like --device cpu --quiet --json " + path("adir"),
       "--json: cannot write '" + path("adir") + "': it is a directory"},
      {"bench sweep --workload arxiv-like --device cpu --quiet --json " + path("s.json") + " --markdown " + path("adir"),
       "--markdown: cannot write '" + path("adir") + "': it is a directory"},
      {"bench aggregate --workload arxiv-like --device cpu --quiet --json " + path("same") + " --markdown " + path("same"),
       "--json and --markdown name the same file"},
      {"bench sweep --workload arxiv-like --device cpu --quiet --json " + path("same") + " --markdown " + path("adir") + "/../same",
       "--json and --markdown name the same file"}};
  for (const auto& [args, message] : before) {
    SCOPED_TRACE(args);
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("[bench"), std::string::npos) << "the run went first";
  }
  EXPECT_FALSE(fs::exists(path("same")));
  EXPECT_FALSE(fs::exists(path("s.json")));
}

TEST_F(Cli, DemoTakesADeviceAndSaysWhenItIsNotThere) {
  // `demo --device` (a newcomer's review, session 51: it was refused by the argument parser).
  if (cuda_device_count() > 0) GTEST_SKIP() << "SKIPPED: a GPU is present";
  CliRun r = run_cli("demo --device cuda");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cuda:0 requested but"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[demo]"), std::string::npos) << "work began first: " << r.output;
  r = run_cli("demo --device gpu");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("invalid device 'gpu'"), std::string::npos) << r.output;
}

TEST_F(Cli, AggregateCheckOutsideTheToleranceExits1AndWritesNothing) {
  // A correct op can fail its check: two messages of 3e38 into one row overflow float32's sum to
  // inf, where the float64 oracle reads 6e38. A failed verification exits 1, as the demo's and
  // the bench's do (2, as an error, until session 53), and an existing output is not replaced.
  std::ofstream(path("g.txt")) << "0 2\n1 2\n";
  Tensor x = TensorBuilder().shape({3, 4}).dtype(DType::f32).build();
  std::fill_n(x.data_as<float>(), x.numel(), 3e38f);
  write_npy(path("x.npy"), x);
  std::ofstream(path("y.npy")) << "kept";
  CliRun r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("y.npy") +
                     " --transform identity --check");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("within_tolerance=false"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("check failed: the output is outside the PROTOCOL.md tolerance; nothing written to " +
                          path("y.npy")),
            std::string::npos)
      << r.output;
  std::ifstream in(path("y.npy"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "kept") << "the failed check's output replaced the file";
  // The same run with the values in range passes and writes.
  std::fill_n(x.data_as<float>(), x.numel(), 3.0f);
  write_npy(path("x.npy"), x);
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("y.npy") +
              " --transform identity --check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_npy(path("y.npy")).data_as<float>()[2 * 4], 6.0f);
}

TEST_F(Cli, AggregateOnFilesMatchesTheLibrary) {
  const std::int64_t N = 40, F = 5;
  std::ofstream(path("g.txt")) << "# a SNAP graph\n0 1\n1 2\n2\t0\n5 39\n39 5\n7 7\n3 1 extra-column\n";
  Tensor x = random_tensor({N, F}, DType::f32, fresh_seed());
  write_npy(path("x.npy"), x);
  CliRun r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("y.npy") +
                  " --transform tanh --check");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("within_tolerance=true"), std::string::npos) << r.output;
  Tensor y = read_npy(path("y.npy"));
  EdgeList g = load_snap(path("g.txt"));
  Tensor expect = TensorBuilder().shape({N, F}).build();
  aggregate(x, g.src, g.dst, std::nullopt, expect);
  EXPECT_TRUE(bitwise_equal(y, expect));
  // The extra column is ignored, and said so (it was silent before: session 46).
  EXPECT_NE(r.output.find("1 line(s), the first line 8, have columns after the two node ids"), std::string::npos)
      << r.output;
  // SNAP "a b": a message from a to b, so row 1 gets tanh(x[0]) + tanh(x[3]) and row 0 stays 0 except 2->0.
  EXPECT_NEAR(y.data_as<float>()[1 * F], std::tanh(x.data_as<float>()[0]) + std::tanh(x.data_as<float>()[3 * F]), 1e-6);
  // A Matrix Market entry's extra columns are ignored and said so too (silent before: session 52).
  std::ofstream(path("m.mtx")) << "%%MatrixMarket matrix coordinate real general\n40 40 3\n2 1 0.5\n3 2 1.5 x\n4 3 2 y z\n";
  r = run_cli("aggregate --graph " + path("m.mtx") + " --x " + path("x.npy") + " --out " + path("m.npy") + " --check");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 entry line(s), the first line 4, have columns after the entry's row, column and value; "
                          "they are ignored"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("within_tolerance=true"), std::string::npos) << r.output;
}

TEST_F(Cli, BadIndexLeavesNoOutputAndKeepsAnOldOne) {
  // Comments and a blank line before the bad edge: its line (6) is not its index (2) + 1.
  std::ofstream(path("g.txt")) << "# a comment\n0 1\n\n# another\n1 2\n2 50\n3 4\n";  // node 50 but x has 10 rows
  write_npy(path("x.npy"), random_tensor({10, 3}, DType::f32, fresh_seed()));
  CliRun r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("element 2 is 50"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the edges come from '" + path("g.txt") + "' (edge 2, counting from 0, is its line 6); N = 10 is the number "
                          "of rows of '" + path("x.npy") + "'"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("y.npy")));
  std::ofstream(path("old.npy")) << "previous result";
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("old.npy"));
  EXPECT_EQ(r.status, 2);
  std::ifstream f(path("old.npy"));
  std::string content((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(content, "previous result");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "temp file left: " << e.path();
}

TEST_F(Cli, MalformedInputsAreClearErrors) {
  std::ofstream(path("bad.txt")) << "0 1\nzero one\n";
  write_npy(path("x.npy"), random_tensor({4, 2}, DType::f32, fresh_seed()));
  CliRun r = run_cli("aggregate --graph " + path("bad.txt") + " --x " + path("x.npy") + " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("bad.txt:2"), std::string::npos) << r.output;
  std::ofstream(path("g.txt")) << "0 1\n";
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("nope.npy") + " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("nope.npy"), std::string::npos) << r.output;
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --out " + path("y.npy") +
              " --transform gelu");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("identity|tanh|relu|sigmoid"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("y.npy")));
  // A binary file as the graph: its bytes shown escaped, not raw into the terminal; and inspect
  // of a file that is neither a .npy nor a dump says so (a newcomer's review, session 46).
  r = run_cli("aggregate --graph " + path("x.npy") + " --x " + path("x.npy") + " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'\\x93NUMPY"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x93'), std::string::npos) << r.output;
  r = run_cli("inspect " + path("g.txt"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("is not a .npy file"), std::string::npos) << r.output;
  // A contract error names the port's file, not where the tool made the tensor ("tensor made at
  // .../commands.cpp:154 (int pipelink::tools::cmd_aggregate(...))": a review, session 52).
  Tensor xi = TensorBuilder().shape({4, 2}).dtype(DType::i32).build();
  for (std::int64_t i = 0; i < 8; ++i) xi.data_as<std::int32_t>()[i] = 0x7fc00000;  // a float NaN's bits
  write_npy(path("xi.npy"), xi);
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("xi.npy") + " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("port 'x' comes from '" + path("xi.npy") + "'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("tensor made at"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("non-finite"), std::string::npos) << "an int x read as float: " << r.output;
  EXPECT_FALSE(fs::exists(path("y.npy")));
}

TEST_F(Cli, UnknownCommandsAndEmptyPathsAreNamed) {
  // A bad-input probe, session 52: "A subcommand is required" for a misspelt command, ".json:
  // cannot open dump metadata" for `inspect ''`, and `--json ''` ran and wrote nothing.
  const std::pair<std::string, std::string> runs[] = {
      {"bogus", "unknown command 'bogus' (commands: ops, demo, aggregate, bench, inspect"},
      {"bench bogus", "unknown command 'bench bogus' (commands of bench: aggregate, sweep"},
      {"inspect ''", "inspect: an empty path"},
      {"bench aggregate --device cpu --quiet --json ''", "--json: an empty path"},
      {"bench sweep --device cpu --quiet --json " + path("s.json") + " --markdown ''", "--markdown: an empty path"}};
  for (const auto& [args, message] : runs) {
    SCOPED_TRACE(args);
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("[bench"), std::string::npos) << "the run went first: " << r.output;
  }
  EXPECT_FALSE(fs::exists(path("s.json")));
  EXPECT_EQ(run_cli("ops").status, 0);
}

// `--out x.npy` once replaced the input with the output and exited 0 (a review, session 46).
TEST_F(Cli, OutputThatIsAnInputIsRefused) {
  std::ofstream(path("g.txt")) << "0 1\n1 2\n";
  write_npy(path("x.npy"), random_tensor({3, 2}, DType::f32, fresh_seed()));
  write_npy(path("w.npy"), random_tensor({2}, DType::f32, fresh_seed()));
  fs::create_symlink(path("x.npy"), path("alias.npy"));
  auto bytes = [&](const std::string& name) {
    std::ifstream f(path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  };
  const std::string before[] = {bytes("g.txt"), bytes("x.npy"), bytes("w.npy")};
  const std::string base = "aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("w.npy");
  for (const auto& [out, flag] : {std::pair{"x.npy", "--x"}, {"alias.npy", "--x"}, {"w.npy", "--w"}, {"g.txt", "--graph"}}) {
    CliRun r = run_cli(base + " --out " + path(out));
    EXPECT_EQ(r.status, 2) << out << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("is the same file as ") + flag), std::string::npos) << r.output;
  }
  EXPECT_EQ(bytes("g.txt"), before[0]);
  EXPECT_EQ(bytes("x.npy"), before[1]);
  EXPECT_EQ(bytes("w.npy"), before[2]);
}

TEST_F(Cli, WeightsThatAreNotOneFloatAnEdgeAreRefused) {
  // Integer weights were once turned into NaN and the run exited 0 (a review, session 43).
  std::ofstream(path("g.txt")) << "0 1\n1 2\n2 3\n";
  write_npy(path("x.npy"), random_tensor({4, 3}, DType::f32, fresh_seed()));
  Tensor wi = TensorBuilder().shape({3}).dtype(DType::i64).build();
  for (std::int64_t i = 0; i < 3; ++i) wi.data_as<std::int64_t>()[i] = i + 1;
  write_npy(path("wi.npy"), wi);
  CliRun r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("wi.npy") +
                     " --out " + path("y.npy"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("float32 or float64"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("y.npy")));
  write_npy(path("w2.npy"), random_tensor({3, 1}, DType::f32, fresh_seed()));
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("w2.npy") + " --out " +
              path("y.npy"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("'rank'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("y.npy")));
  // Float64 weights with float32 x are converted: the run matches the library's on float32 w.
  Tensor w64 = random_tensor({3}, DType::f64, fresh_seed());
  write_npy(path("w64.npy"), w64);
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("w64.npy") + " --out " +
              path("y.npy") + " --check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("within_tolerance=true"), std::string::npos) << r.output;
  // ... unless a value is past float32's range: 1e300 became inf, and the output inf/NaN, exit 0
  // (a review, session 46).
  w64.data_as<double>()[1] = -1e300;
  write_npy(path("w64.npy"), w64);
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("w64.npy") + " --out " +
              path("z.npy"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("weight 1 of '" + path("w64.npy") + "' is -1e+300, outside float32's range"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("z.npy")));
  // NaN and inf weights pass through the op (its contract), so their rows come out NaN: said on
  // stderr, once, with the first one (silent before, with "within_tolerance=true": session 52).
  Tensor wn = random_tensor({3}, DType::f32, fresh_seed());
  wn.data_as<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  wn.data_as<float>()[2] = std::numeric_limits<float>::infinity();
  write_npy(path("wn.npy"), wn);
  r = run_cli("aggregate --graph " + path("g.txt") + " --x " + path("x.npy") + " --w " + path("wn.npy") + " --out " +
              path("n.npy") + " --check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: '" + path("wn.npy") + "' holds 2 non-finite weight(s) (the first, element 1, is nan)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::isnan(read_npy(path("n.npy")).data_as<float>()[2 * 3]));  // edge 1 -> 2 reaches row 2
  EXPECT_EQ(r.output.find("non-finite value(s)"), std::string::npos) << "x is finite: " << r.output;
}

TEST_F(Cli, BenchOptionsOutOfRangeAreRefused) {
  for (const char* args : {"bench aggregate --edge-scale -5 --quiet", "bench aggregate --edge-scale 0 --quiet",
                           "bench aggregate --edge-scale nan --quiet", "bench aggregate --repeats 0 --quiet",
                           "bench aggregate --edge-scale 1e300 --quiet",  // ran at E = 1 before (session 46)
                           "bench aggregate --free-sample-us -1 --quiet", "bench aggregate --free-sample-us x --quiet",
                           "bench aggregate --free-sample-us 0x10 --quiet",
                           "demo --repeats -1", "bench sweep --repeats -3 --json /dev/null --quiet",
                           "bench sweep --start-edges 0 --json /dev/null --quiet",
                           // -1 wrapped to 2^64 - 1 and 10^20 saturated to it (session 52)
                           "bench aggregate --seed -1 --quiet", "bench aggregate --seed 99999999999999999999 --quiet",
                           // base 0 took 0x10 as 16 (a second review, session 52)
                           "bench aggregate --seed 0x10 --quiet", "bench aggregate --repeats 0x10 --quiet",
                           "bench aggregate --repeats 1.5 --quiet"}) {
    CliRun r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;  // CLI11's own codes (105-114) before session 52
    EXPECT_EQ(r.output.find("median"), std::string::npos) << args << ": it ran\n" << r.output;
  }
  // Messages a reader can act on: "Value -5 not in range 0.000000 to 17976931348623157081...".
  EXPECT_NE(run_cli("bench aggregate --edge-scale -5 --quiet").output.find("must be a positive number, got '-5'"),
            std::string::npos);
  EXPECT_NE(run_cli("bench aggregate --repeats 0 --quiet").output.find("must be a positive integer, got '0'"),
            std::string::npos);
  EXPECT_NE(run_cli("bench aggregate --seed -1 --quiet").output.find("must be an integer in [0, 2^64 - 1], got '-1'"),
            std::string::npos);
  EXPECT_EQ(run_cli("bench aggregate --help").status, 0);
  // A start past the CPU's own cap names that cap, not a --max-edges nobody gave.
  const CliRun big = run_cli("bench sweep --workload arxiv-like --device cpu --start-edges 100000000 --json " +
                             path("s.json") + " --quiet");
  EXPECT_EQ(big.status, 2) << big.output;
  EXPECT_NE(big.output.find("--start-edges 100000000 must be in [1, 67108864] (the CPU's cap of 2^26 edges"),
            std::string::npos)
      << big.output;
}

TEST_F(Cli, BenchWritesVersionedJsonAndMarkdown) {
  // "010" is ten: CLI11 reads integers with base 0 (eight), so the tool writes them back in decimal.
  CliRun r = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --repeats 3 --seed 010 "
                     "--quiet --json " + path("b.json") + " --markdown " + path("b.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(path("b.json"));
  std::string json((std::istreambuf_iterator<char>(f)), {});
  for (const char* key : {"\"schema_version\": 2", "\"workload\"", "\"device\"", "\"git\"", "\"variants\"",
                          "\"name\": \"three-op\"", "\"name\": \"fused\"", "\"median_ms\"", "\"min_ms\"", "\"max_ms\"",
                          "\"extra_peak_bytes\"", "\"max_abs_err\"", "\"rel_l2_err\"", "\"within_tolerance\": true",
                          // session 46: the copy's samples and what it counts, whether the repeats
                          // meet the protocol, what the memory figure includes
                          "\"copy_bandwidth_samples_gbs\"", "\"copy_bandwidth_counts\"",
                          "\"repeats_meet_protocol\": false", "\"extra_peak_includes_output\": true", "\"sms\"",
                          // session 47: CUDA's versions and the rated clocks (0 on the CPU), the compiler
                          "\"cuda_driver_version\": 0", "\"sm_clock_peak_khz\": 0", "\"compiler\": \"",
                          "\"seed\": 10,"})
    EXPECT_NE(json.find(key), std::string::npos) << key;
  EXPECT_TRUE(fs::exists(path("b.md")));
  {
    std::ifstream m(path("b.md"));
    const std::string md((std::istreambuf_iterator<char>(m)), {});
    EXPECT_NE(md.find("Built by "), std::string::npos) << md.substr(0, 600);
  }
  // Session 49: the null test keeps its 4x call's samples (schema 2), --repeats of them.
  {
    const std::size_t at = json.find("\"null_test\"");
    ASSERT_NE(at, std::string::npos);
    const std::string obj = json.substr(at, json.find('}', at) - at);
    const std::size_t samples = obj.find("\"samples_ms\": [");
    ASSERT_NE(samples, std::string::npos) << obj;
    const std::string list = obj.substr(samples, obj.find(']', samples) - samples);
    EXPECT_EQ(std::count(list.begin(), list.end(), ','), 2) << "3 samples (--repeats 3): " << list;
  }
  // The revision is stamped at build time: never empty (a tree without git says "unknown").
  EXPECT_EQ(json.find("\"git\": \"\""), std::string::npos);
  EXPECT_NE(json.find("\"relabel\": false"), std::string::npos);
  // --relabel: the JSON and the Markdown say the nodes were renamed, and the run verifies.
  r = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --repeats 3 --relabel --quiet --json " +
              path("r.json") + " --markdown " + path("r.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream rf(path("r.json"));
  const std::string rjson((std::istreambuf_iterator<char>(rf)), {});
  EXPECT_NE(rjson.find("\"relabel\": true"), std::string::npos);
  EXPECT_NE(rjson.find("\"within_tolerance\": true"), std::string::npos);
  std::ifstream rm(path("r.md"));
  const std::string rmd((std::istreambuf_iterator<char>(rm)), {});
  EXPECT_NE(rmd.find("nodes relabelled at random"), std::string::npos) << rmd.substr(0, 300);
  CliRun bad = run_cli("bench aggregate --workload nope --quiet");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("arxiv-like"), std::string::npos) << bad.output;
}

TEST_F(Cli, BenchColdProcessesTimeEachRowsFirstCallInAFreshProcess) {
  // Session 50: PROTOCOL.md 3.4's cold first call, each row's path in a process of its own (the
  // in-process cold column follows the rows above it). Every row gets a number, the Markdown says
  // what it is, and without the flag the JSON says it was not measured.
  CliRun r = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --repeats 2 --no-null-test "
                     "--cold-processes --quiet --json " + path("c.json") + " --markdown " + path("c.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(path("c.json"));
  const std::string json((std::istreambuf_iterator<char>(f)), {});
  std::size_t rows = 0;
  for (std::size_t at = json.find("\"cold_process_ms\": "); at != std::string::npos;
       at = json.find("\"cold_process_ms\": ", at + 1)) {
    const std::string value = json.substr(at + 19, json.find_first_of(",\n}", at + 19) - (at + 19));
    EXPECT_NE(value, "null") << "a row without its fresh-process cold call";
    EXPECT_GT(std::atof(value.c_str()), 0.0) << value;
    ++rows;
  }
  EXPECT_EQ(rows, 5u) << "three-op, fused, plan-build, planned, planned with w in plan order";
  std::ifstream m(path("c.md"));
  const std::string md((std::istreambuf_iterator<char>(m)), {});
  EXPECT_NE(md.find("- first call in a fresh process"), std::string::npos) << md;
  EXPECT_NE(md.find("planned, w in plan order "), std::string::npos) << md;
  // The child's side alone: one JSON line on stdout; a row that does not exist is an error.
  CliRun child = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --cold-call planned --quiet");
  ASSERT_EQ(child.status, 0) << child.output;
  EXPECT_NE(child.output.find("{\"cold_call\": \"planned\", \"cold_ms\": "), std::string::npos) << child.output;
  CliRun bad = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --cold-call nope --quiet");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("no CPU row named 'nope'"), std::string::npos) << bad.output;
  r = run_cli("bench aggregate --workload arxiv-like --device cpu --edge-scale 0.01 --repeats 1 --no-null-test --quiet "
              "--json " + path("n.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream nf(path("n.json"));
  const std::string njson((std::istreambuf_iterator<char>(nf)), {});
  EXPECT_NE(njson.find("\"cold_process_ms\": null"), std::string::npos);
  EXPECT_NE(njson.find("\"cold_process\": \"not measured (--cold-processes)\""), std::string::npos);
}

TEST_F(Cli, SweepReportsEveryPathAtEverySize) {
  CliRun r = run_cli("bench sweep --workload arxiv-like --device cpu --start-edges 4096 --max-edges 16384 --repeats 1 "
                     "--quiet --json " + path("s.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(path("s.json"));
  std::string json((std::istreambuf_iterator<char>(f)), {});
  for (const char* key : {"\"kind\": \"aggregate-sweep\"", "\"schema_version\": 2", "\"reach\"", "\"edges\": 4096",
                          "\"edges\": 8192", "\"edges\": 16384", "\"path\": \"three-op\"", "\"path\": \"fused\"",
                          "\"within_tolerance\": true", "\"status\": \"ok\"",
                          // session 49 (schema 2): the copy bandwidth, the repeats against the
                          // protocol, each point's samples, the index dtype
                          "\"copy_bandwidth_gbs\"", "\"repeats_meet_protocol\": false", "\"samples_ms\"",
                          "\"index_dtype\": \"int32\"",
                          // session 50: the bench's device facts, from the one list (zeros here)
                          "\"sms\": 0", "\"cuda_built_with\"", "\"versions_and_clocks\"",
                          // session 51: the file replaced by the whole at the end (partial before)
                          "\"complete\": true"})
    EXPECT_NE(json.find(key), std::string::npos) << key;
  EXPECT_EQ(json.find("\"edges\": 32768"), std::string::npos) << "went past --max-edges";
  {
    // A FIFO takes one document, the whole: the partial ones go to regular files only (its reader
    // got the first partial one, and the sweep then hung on the next open: a review, session 51).
    // Both sides under `timeout`, so that the broken form fails instead of hanging.
    const std::string fifo = path("s.fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string cmd = "bash -c '(timeout 60 " + std::string(PIPELINK_CLI_PATH) +
                            " bench sweep --workload arxiv-like --device cpu --start-edges 4096 --max-edges 16384"
                            " --repeats 1 --quiet --json " + fifo + " >/dev/null 2>&1; echo \"sweep rc=$?\") & timeout 60 cat " +
                            fifo + "; wait'";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string got;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) got += buf;
    pclose(p);
    std::size_t docs = 0;
    for (std::size_t at = got.find("\"complete\""); at != std::string::npos; at = got.find("\"complete\"", at + 1)) ++docs;
    EXPECT_EQ(docs, 1u) << got.substr(0, 2000);
    EXPECT_NE(got.find("\"complete\": true"), std::string::npos) << got.substr(0, 2000);
    EXPECT_NE(got.find("sweep rc=0"), std::string::npos) << got.substr(got.size() > 300 ? got.size() - 300 : 0);
  }
  // int64 indices (the named workloads' own) and the Markdown table.
  r = run_cli("bench sweep --workload arxiv-like --device cpu --start-edges 4096 --max-edges 8192 --repeats 1 "
              "--index-dtype int64 --quiet --json " + path("s64.json") + " --markdown " + path("s64.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  {
    std::ifstream f64(path("s64.json"));
    const std::string j64((std::istreambuf_iterator<char>(f64)), {});
    EXPECT_NE(j64.find("\"index_dtype\": \"int64\""), std::string::npos);
    EXPECT_NE(j64.find("\"within_tolerance\": true"), std::string::npos);
    std::ifstream m(path("s64.md"));
    const std::string md((std::istreambuf_iterator<char>(m)), {});
    for (const char* key : {"| edges | three-op | fused |", "| 4096 |", "| 8192 |", "int64 indices", "Reach",
                            "- fused: 8192", "Fewer repeats than PROTOCOL.md's 10"})
      EXPECT_NE(md.find(key), std::string::npos) << key << " in:\n" << md;
  }
  EXPECT_NE(run_cli("bench sweep --index-dtype int16 --quiet --json " + path("u.json")).status, 0);
  EXPECT_FALSE(fs::exists(path("u.json")));
  CliRun bad = run_cli("bench sweep --start-edges 100 --max-edges 10 --quiet --json " + path("t.json"));
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_FALSE(fs::exists(path("t.json")));
}

}  // namespace
}  // namespace pipelink::test
