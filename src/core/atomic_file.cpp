#include "pipelink/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

#include "pipelink/error.hpp"

namespace pipelink {
namespace {

// The file a path names once symbolic links are followed, whether or not it exists yet (a
// dangling link names the file that writing through it creates). Replacing the link itself
// would leave the file it points to stale (a review found `--out link.npy` did, session 46).
std::string resolve_links(const std::string& path, const std::string& who) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string buf(4096, '\0');
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
    if (n < 0 || std::size_t(n) >= buf.size())
      throw Error(fmt::format("{}: cannot write '{}': cannot read the link '{}': {}", who, path, p,
                              std::strerror(n < 0 ? errno : ENAMETOOLONG)));
    buf.resize(std::size_t(n));
    if (buf.front() == '/')
      p = buf;
    else {
      const std::size_t slash = p.rfind('/');
      p = slash == std::string::npos ? buf : p.substr(0, slash + 1) + buf;
    }
  }
  throw Error(fmt::format("{}: cannot write '{}': {}", who, path, std::strerror(ELOOP)));
}

}  // namespace

// Unique per process, thread and call, so concurrent writers to one target never share a
// temporary file: a pid alone is not (two threads of one process), nor a nonce and counter alone
// (a fork's children inherit both: two forked dumps to one path collided, a review of session 46).
std::string AtomicFile::unique_name(const std::string& target) {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (std::uint64_t(rd()) << 32) ^ rd();
  }();
  static std::atomic<std::uint64_t> counter{0};
  return target + fmt::format(".tmp-{}-{:016x}-{}", ::getpid(), nonce, counter.fetch_add(1));
}

AtomicFile::AtomicFile(const std::string& path, std::string who)
    : path_(path), who_(std::move(who)), target_(resolve_links(path, who_)) {
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail("it is a directory", 0);
  if (exists && !S_ISREG(st.st_mode)) {
    // /dev/null, a FIFO, a terminal: renaming over it would replace the device node with a
    // regular file (it did, as root, for `--out /dev/null`: session 46's review).
    in_place_ = true;
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open", errno);
    return;
  }
  const std::string tmp = unique_name(target_);
  fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create a temporary file next to it", errno);  // not ours: nothing to remove
  tmp_ = tmp;
  // The replacement keeps the old file's permission bits: a private 0600 output must not
  // become world-readable because it was rewritten.
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) fail("cannot set the permissions", errno);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

void AtomicFile::fail(const std::string& what, int err) {
  discard();  // the constructor's failures too, where no destructor runs
  const std::string shown =
      target_.empty() || target_ == path_ ? fmt::format("'{}'", path_) : fmt::format("'{}' (-> '{}')", path_, target_);
  throw Error(fmt::format("{}: cannot write {}: {}{}", who_, shown, what,
                          err ? std::string(": ") + std::strerror(err) : std::string()));
}

void AtomicFile::write(const void* data, std::size_t nbytes) {
  if (fd_ < 0 || committed_) throw std::logic_error("AtomicFile::write after close or commit");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : EIO);
    p += n;
    nbytes -= std::size_t(n);
  }
}

void AtomicFile::close() {
  if (committed_) throw std::logic_error("AtomicFile::close after commit");
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
}

void AtomicFile::commit() {
  if (committed_ || (fd_ < 0 && tmp_.empty() && !in_place_)) throw std::logic_error("AtomicFile::commit called twice");
  close();
  if (!in_place_ && ::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view text, const std::string& who) {
  AtomicFile f(path, who);
  f.write(text);
  f.commit();
}

}  // namespace pipelink
