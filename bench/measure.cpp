#include "measure.hpp"
#include "device_facts_json.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pipelink/cuda.hpp"
#include "pipelink/registry.hpp"  // describe

#ifndef PIPELINK_GIT_REVISION
#define PIPELINK_GIT_REVISION "unknown"
#endif

namespace pipelink::bench {

Stats stats_of(std::vector<double> s) {
  Stats st;
  st.samples = s;
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  st.min = s.front();
  st.max = s.back();
  const std::size_t n = s.size();
  st.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  return st;
}

double time_ms(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
std::int64_t proc_field(const char* file, const char* key) {
  std::ifstream f(file);
  std::string line;
  const std::size_t klen = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, klen, key) == 0) return std::stoll(line.substr(klen)) * 1024;  // kB
  return 0;
}
std::int64_t status_field(const char* key) { return proc_field("/proc/self/status", key); }
}  // namespace

std::int64_t rss_bytes() { return status_field("VmRSS:"); }
std::int64_t peak_rss_bytes() { return status_field("VmHWM:"); }
std::int64_t host_available_bytes() { return proc_field("/proc/meminfo", "MemAvailable:"); }

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return bool(f);
}

MemoryGrowth peak_rss_growth(const std::function<void()>& fn) {
  // Large blocks must go back to the OS when freed, or an earlier variant's freed memory would
  // hide the next one's growth: a fixed mmap threshold stops glibc from raising it dynamically.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  malloc_trim(0);
  MemoryGrowth g;
  g.exact = reset_peak_rss();
  const auto before = rss_bytes();
  fn();
  g.bytes = std::max<std::int64_t>(0, peak_rss_bytes() - before);
  return g;
}

CopyBandwidth host_copy_bandwidth() {
  const std::size_t bytes = std::size_t(256) << 20;
  std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
  std::memset(a.get(), 1, bytes);
  std::memset(b.get(), 2, bytes);
  CopyBandwidth c;
  for (int rep = 0; rep < 10; ++rep) {
    const double ms = time_ms([&] {
#pragma omp parallel
      {
        const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
        const std::size_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
        std::memcpy(b.get() + lo, a.get() + lo, hi - lo);
      }
    });
    // Read + written, as the GPU's copy and PROTOCOL.md count it: the bytes read alone (until
    // session 46) halved the copy bandwidth, and the CPU's planned rows read 151-180% of it.
    c.samples_bps.push_back(2.0 * double(bytes) / (ms * 1e-3));
    c.best_bps = std::max(c.best_bps, c.samples_bps.back());
  }
  return c;
}

// Stamped at build time (cmake/GitStamp.cmake, tools/pipelink/CMakeLists.txt): the revision the
// binary was built from. It was asked of git at run time until session 47, which named the tree as
// it stood then, not the one built (a binary run after a checkout took the new commit's name), and
// an environment variable could relabel any binary.
std::string git_revision() { return kBuildRevision; }

std::string iso_time_utc() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

std::string host_cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string ratio_text(double r) {
  if (r < 1.5 && r > 1 / 1.5) return fmt::format("{:.2f}x: no measured difference at this precision", r);
  return fmt::format("{:.2f}x", r);
}

int run_process(const std::vector<std::string>& argv, std::string& out) {
  out.clear();
  if (argv.empty()) return -1;
  std::vector<char*> args;  // before the pipe, so that a throw here leaks no descriptor
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  if (pid == 0) {  // the child: stdout into the pipe, then the program (async-signal-safe calls only)
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) out.append(buf, std::size_t(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

DeviceFacts device_facts(const Device& d) {
  DeviceFacts f;
  if (d.kind != DeviceKind::cuda) return f;
  const DeviceDesc& gd = describe(d);
  f.sms = gd.multiprocessors;
  f.sm = gd.sm;
  f.l2_bytes = std::int64_t(gd.l2_bytes);
  f.memory_bytes = std::int64_t(gd.memory_bytes);
  const cuda::RuntimeFacts r = cuda::runtime_facts(d.index);
  f.cuda_driver = r.driver_version;
  f.cuda_runtime = r.runtime_version;
  f.cuda_built_with = r.built_with;
  f.sm_clock_peak_khz = r.sm_clock_peak_khz;
  f.memory_clock_peak_khz = r.memory_clock_peak_khz;
  return f;
}

void put_device_facts(nlohmann::json& device, const DeviceFacts& f) {
  device["sms"] = f.sms;
  device["compute_capability"] = f.sm;
  device["l2_bytes"] = f.l2_bytes;
  device["memory_bytes"] = f.memory_bytes;
  device["cuda_driver_version"] = f.cuda_driver;
  device["cuda_runtime_version"] = f.cuda_runtime;
  device["cuda_built_with"] = f.cuda_built_with;
  device["sm_clock_peak_khz"] = f.sm_clock_peak_khz;
  device["memory_clock_peak_khz"] = f.memory_clock_peak_khz;
  device["versions_and_clocks"] =
      "CUDA versions as 1000 major + 10 minor; clocks are the device's rated maxima, not the clocks of the run; all 0 "
      "on the CPU";
}

}  // namespace pipelink::bench
