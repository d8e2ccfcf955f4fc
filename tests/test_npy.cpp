// .npy read / write: round trips, hand-written files of each format version, malformed files and
// the atomic write.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace pipelink {
namespace {

namespace fs = std::filesystem;

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("pipelink_test_npy_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
            std::to_string(test::fresh_seed() % 1000000007));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_bytes(const std::string& name, const std::string& bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::vector<std::string> files_in_dir() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }
  fs::path dir_;
};

// A tensor of `t` with random contents (floats via fill_uniform, integers via mt19937_64).
Tensor random_of(DType t, std::vector<std::int64_t> shape, std::uint64_t seed) {
  Tensor x = TensorBuilder().shape(std::move(shape)).dtype(t).build();
  if (is_floating(t)) {
    fill_uniform(x, -100.0, 100.0, seed);
  } else {
    std::mt19937_64 rng(seed);
    auto* p = static_cast<unsigned char*>(x.data());
    for (std::size_t i = 0; i < std::size_t(x.numel()) * dtype_size(t); ++i) p[i] = static_cast<unsigned char>(rng());
  }
  return x;
}

// The 10-byte (1.0) or 12-byte (2.0/3.0) preamble plus a padded header dict.
std::string npy_bytes(int major, const std::string& dict, const std::string& data) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  for (std::size_t i = 0; i < prefix - 8; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

// ---------------------------------------------------------------------------------------------
TEST_F(Npy, RoundTripEveryDtypeAndShape) {
  const auto seed = test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 3, 4}, {2, 0, 3}};
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {
    for (const auto& shape : shapes) {
      Tensor x = random_of(t, shape, seed);
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + x.view().shape_str());
      const auto p = path("x.npy");
      write_npy(p, x);
      Tensor y = read_npy(p);
      EXPECT_EQ(y.dtype(), t);
      EXPECT_EQ(y.view().shape_str(), x.view().shape_str());
      EXPECT_TRUE(y.view().is_contiguous());
      EXPECT_TRUE(test::bitwise_equal(x, y));
      // Data starts on a 64-byte boundary, as numpy writes it.
      const auto size = fs::file_size(p);
      EXPECT_EQ((size - std::size_t(x.numel()) * dtype_size(t)) % 64, 0u);
    }
  }
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"x.npy"});  // no temp files left behind
}

TEST_F(Npy, ReadTensorsNameTheCallersLineAsTheirOrigin) {
  // A contract error names where a tensor was made: for a file read, the reader's caller, not
  // npy.cpp (a newcomer's review, session 51, saw src/core/npy.cpp:270 in the CLI's errors).
  const auto p = path("o.npy");
  write_npy(p, TensorBuilder().shape({2, 3}).build());
  const int line = __LINE__ + 1;
  const Tensor t = read_npy(p);
  const SourceSite& o = t.view().origin();
  ASSERT_TRUE(o.known());
  EXPECT_NE(std::string(o.file).find("test_npy.cpp"), std::string::npos) << o.str();
  EXPECT_EQ(o.line, std::uint32_t(line)) << o.str();
}

TEST_F(Npy, WrittenHeaderIsWhatNumpyReads) {
  Tensor x = TensorBuilder().shape({3, 4}).dtype(DType::f32).zeros();
  write_npy(path("h.npy"), x);
  const auto bytes = read_bytes(path("h.npy"));
  ASSERT_GE(bytes.size(), 128u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  EXPECT_EQ(bytes[127], '\n');
  Tensor v = TensorBuilder().shape({7}).dtype(DType::u8).zeros();
  write_npy(path("v.npy"), v);
  EXPECT_NE(read_bytes(path("v.npy")).find("'descr': '|u1', 'fortran_order': False, 'shape': (7,), }"),
            std::string::npos);
}

TEST_F(Npy, ReadsHandWrittenVersion1) {
  const std::vector<std::int32_t> data = {1, -2, 3, 4, 5, 2147483647};
  const auto p = write_bytes("v1.npy", npy_bytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", raw(data)));
  Tensor t = read_npy(p);
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.view().shape_str(), "[2, 3]");
  EXPECT_EQ(std::vector<std::int32_t>(t.data_as<std::int32_t>(), t.data_as<std::int32_t>() + 6), data);
}

TEST_F(Npy, ReadsHandWrittenVersion2And3) {
  const std::vector<double> data = {0.5, -1.25, 1e300};
  // Keys in another order, double quotes and no trailing comma are legal Python too.
  const auto p2 = write_bytes("v2.npy", npy_bytes(2, "{\"shape\": (3,), \"descr\": \"<f8\", \"fortran_order\": False}", raw(data)));
  Tensor t = read_npy(p2);
  EXPECT_EQ(t.dtype(), DType::f64);
  EXPECT_EQ(t.view().shape_str(), "[3]");
  EXPECT_EQ(std::vector<double>(t.data_as<double>(), t.data_as<double>() + 3), data);
  const auto p3 = write_bytes("v3.npy", npy_bytes(3, "{'descr': '<u1', 'fortran_order': False, 'shape': (), }", "\x2a"));
  Tensor s = read_npy(p3);
  EXPECT_EQ(s.dtype(), DType::u8);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.data_as<std::uint8_t>()[0], 42);
}

TEST_F(Npy, WritesStridedViews) {
  const auto seed = test::fresh_seed();
  Tensor base = random_of(DType::f32, {4, 6}, seed);
  // Every other column: shape [4, 3], strides [6, 2].
  const std::vector<std::int64_t> shape = {4, 3}, strides = {6, 2};
  TensorView cols(base.data(), DType::f32, Device::cpu(), shape, strides);
  ASSERT_FALSE(cols.is_contiguous());
  write_npy(path("s.npy"), cols);
  Tensor back = read_npy(path("s.npy"));
  ASSERT_EQ(back.view().shape_str(), "[4, 3]");
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(back.data_as<float>()[r * 3 + c], base.data_as<float>()[r * 6 + 2 * c]);
  // Pitched rows and a row slice.
  Tensor pitched = random_of(DType::f64, {5, 3}, seed);
  Tensor padded = TensorBuilder().shape({5, 3}).dtype(DType::f64).pitched_rows(64).build();
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) padded.data_as<double>()[r * padded.view().stride(0) + c] = pitched.data_as<double>()[r * 3 + c];
  write_npy(path("p.npy"), padded);
  EXPECT_TRUE(test::bitwise_equal(read_npy(path("p.npy")), pitched));
  write_npy(path("r.npy"), pitched.view().slice_rows(1, 3));
  Tensor rows = read_npy(path("r.npy"));
  EXPECT_EQ(rows.view().shape_str(), "[2, 3]");
  EXPECT_EQ(rows.data_as<double>()[0], pitched.data_as<double>()[3]);
}

TEST_F(Npy, OverwriteReplacesTheFile) {
  const auto seed = test::fresh_seed();
  Tensor a = random_of(DType::i64, {100}, seed), b = random_of(DType::f32, {2, 2}, seed + 1);
  write_npy(path("o.npy"), a);
  write_npy(path("o.npy"), b);
  EXPECT_TRUE(test::bitwise_equal(read_npy(path("o.npy")), b));
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"o.npy"});
}

TEST_F(Npy, WriteFailuresLeaveNoFile) {
  Tensor x = random_of(DType::f32, {10}, test::fresh_seed());
  const auto missing_dir = path("no_such_dir/x.npy");
  try {
    write_npy(missing_dir, x);
    FAIL() << "expected pipelink::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(missing_dir), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(missing_dir));
  // The target is a directory: refused before any temp file is made.
  fs::create_directory(path("taken"));
  EXPECT_THROW(write_npy(path("taken"), x), Error);
  EXPECT_TRUE(fs::is_directory(path("taken")));
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"taken"});
  float dummy = 0;
  const std::vector<std::int64_t> one = {1};
  EXPECT_THROW(write_npy(path("g.npy"), TensorView(&dummy, DType::f32, Device::cuda(), one)), std::invalid_argument);
  EXPECT_FALSE(fs::exists(path("g.npy")));
}

// Rewriting an output through a link, or one with private permissions, once replaced the link
// with a regular file and made the file 0644 (a review, session 46).
TEST_F(Npy, OverwriteKeepsLinksAndPermissions) {
  const auto seed = test::fresh_seed();
  Tensor a = random_of(DType::f32, {3, 4}, seed), b = random_of(DType::f32, {5}, seed + 1);
  write_npy(path("real.npy"), a);
  ::chmod(path("real.npy").c_str(), 0600);
  fs::create_symlink("real.npy", path("link.npy"));  // relative, as `ln -s` makes them
  write_npy(path("link.npy"), b);
  EXPECT_TRUE(fs::is_symlink(path("link.npy")));
  EXPECT_TRUE(test::bitwise_equal(read_npy(path("real.npy")), b));
  EXPECT_EQ(fs::status(path("real.npy")).permissions() & fs::perms::mask, fs::perms::owner_read | fs::perms::owner_write);
  // A dangling link names the file writing through it creates.
  fs::create_symlink("made.npy", path("dangling.npy"));
  write_npy(path("dangling.npy"), a);
  EXPECT_TRUE(fs::is_symlink(path("dangling.npy")));
  EXPECT_TRUE(test::bitwise_equal(read_npy(path("made.npy")), a));
  auto names = files_in_dir();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dangling.npy", "link.npy", "made.npy", "real.npy"}));
}

// `--out /dev/null` once replaced the device node with a regular file (as root). A FIFO stands in
// for it here: writing must go into it, not replace it.
TEST_F(Npy, NonRegularTargetIsWrittenInPlace) {
  Tensor a = random_of(DType::i32, {7}, test::fresh_seed());
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader, so the writer's open returns
  ASSERT_GE(rd, 0) << std::strerror(errno);
  write_npy(fifo, a);  // 128 + 28 bytes: within a pipe's buffer
  EXPECT_TRUE(fs::is_fifo(fifo));
  std::string got(4096, '\0');
  const ssize_t n = ::read(rd, got.data(), got.size());
  ::close(rd);
  ASSERT_GT(n, 0);
  got.resize(std::size_t(n));
  write_npy(path("ref.npy"), a);
  EXPECT_EQ(got, read_bytes(path("ref.npy")));
  auto names = files_in_dir();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"pipe", "ref.npy"}));
}

// A fork's children inherit the temp names' nonce and counter: two forked dumps to one path got
// one temp name, and the loser's cleanup removed the winner's file (a review, session 46).
TEST_F(Npy, TempNamesDifferAcrossFork) {
  const std::string target = path("t.npy");
  (void)AtomicFile::unique_name(target);  // the nonce exists before the fork, as in a real program
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string mine = AtomicFile::unique_name(target);
    const ssize_t n = ::write(fds[1], mine.data(), mine.size());
    ::_exit(n == ssize_t(mine.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  const std::string parent = AtomicFile::unique_name(target);
  std::string got(4096, '\0');
  const ssize_t n = ::read(fds[0], got.data(), got.size());
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  got.resize(std::size_t(n));
  EXPECT_NE(got, parent);
  EXPECT_EQ(got.rfind(target, 0), 0u) << got;  // next to the target
}

// ---------------------------------------------------------------------------------------------
class MalformedNpy : public Npy {
 protected:
  void expect_error(const std::string& p, const std::string& fragment) {
    try {
      read_npy(p);
      ADD_FAILURE() << "expected ParseError containing \"" << fragment << "\"";
    } catch (const ParseError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.path(), p);
      EXPECT_EQ(e.line(), 0);
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
  void expect_error_for(int major, const std::string& dict, const std::string& data, const std::string& fragment) {
    expect_error(write_bytes("bad.npy", npy_bytes(major, dict, data)), fragment);
  }
};

TEST_F(MalformedNpy, BadMagic) {
  expect_error(write_bytes("m.npy", "\x93NUMPZ\x01\x00rest of the file"), "bad magic");
  expect_error(write_bytes("short.npy", "\x93NU"), "bad magic");
  expect_error(write_bytes("empty.npy", ""), "bad magic");
}

TEST_F(MalformedNpy, UnsupportedVersion) {
  expect_error_for(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'),
                   "unsupported .npy format version 4.0");
}

TEST_F(MalformedNpy, TruncatedHeader) {
  std::string bytes = npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
  expect_error(write_bytes("h.npy", bytes.substr(0, 30)), "truncated .npy header");
  // A 2.0 header claiming ~4 GiB in a tiny file is rejected before anything is allocated.
  std::string huge = std::string("\x93NUMPY", 6) + '\x02' + '\x00' + "\xf0\xff\xff\xff" + "{'descr': '<f4'}";
  expect_error(write_bytes("huge.npy", huge), "truncated .npy header: declared 4294967280 bytes");
  expect_error(write_bytes("nolen.npy", std::string("\x93NUMPY\x01\x00", 8)), "truncated .npy header");
}

TEST_F(MalformedNpy, TruncatedData) {
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", std::string(20, '\0'),
                   "truncated data: shape (3, 4) of float32 needs 48 bytes, the file has 20");
  // A corrupt huge shape is reported, not allocated.
  expect_error_for(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000), }", "",
                   "truncated data");
}

TEST_F(MalformedNpy, BigEndian) {
  expect_error_for(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'),
                   "big-endian dtype '>f4' is not supported");
}

TEST_F(MalformedNpy, FortranOrder) {
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'),
                   "Fortran-order arrays are not supported");
}

TEST_F(MalformedNpy, UnsupportedDtype) {
  expect_error_for(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0'),
                   "unsupported dtype '<c8'");
  expect_error_for(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'),
                   "structured dtypes are not supported");
}

TEST_F(MalformedNpy, MalformedHeaderDict) {
  expect_error_for(1, "{'descr': '<f4', 'shape': (2,), }", std::string(8, '\0'), "needs the keys");
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", std::string(8, '\0'),
                   "unexpected key 'extra'");
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "", "non-negative");
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "", "True or False");
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1), }", "",
                   "rank 7 exceeds");
  expect_error_for(1, "not a dict", "", "malformed .npy header");
  // Bytes after the dict: trailing text, or a header length that overran the dict into the data
  // (read as the data shifted by 4 bytes before: a review, session 43).
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  expect_error_for(1, dict + " garbage!!", std::string(12, '\0'), "unexpected bytes after the dict");
  expect_error_for(1, dict + std::string("\x00\x00\x80\x3f", 4), raw(std::vector<float>{2, 3, 4}),
                   "unexpected bytes after the dict");
}

TEST_F(MalformedNpy, HugeShapesAndHeadersAreNamedAndShort) {
  // A zero dimension once ended the overflow check: (0, 2**62, 2**62) failed later, without the
  // file's name (a review, session 46).
  expect_error_for(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }",
                   "", "is too large");
  // A 5 MB header came back whole in the message: it is cut at 80 bytes.
  const std::string huge = "{" + std::string(100000, 'x');
  try {
    read_npy(write_bytes("long.npy", npy_bytes(2, huge, "")));
    ADD_FAILURE() << "expected ParseError";
  } catch (const ParseError& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 400u) << what.substr(0, 400);
    EXPECT_NE(what.find("(100001 bytes)"), std::string::npos) << what.substr(0, 400);
  }
}

TEST_F(MalformedNpy, MissingFile) {
  expect_error(path("nope.npy"), "cannot open file: No such file or directory");
  expect_error(dir_.string(), "cannot open file");
}

}  // namespace
}  // namespace pipelink
