#pragma once
// Writing a file so that no data is lost: every writer in PipeLink (.npy outputs, debug dumps,
// the CLI's JSON and Markdown) goes through here.
#include <cstddef>
#include <string>
#include <string_view>

namespace pipelink {

/// A file written whole or not at all. The bytes go to a temporary file next to the target,
/// and `commit()` renames it over the target, so a reader (or a failure halfway) sees the old
/// file or the complete new one, never a partial write; an uncommitted AtomicFile removes its
/// temporary file. (Atomic for readers, not durable across a power cut: there is no fsync.)
///
/// - A symbolic link is followed: the file it names is replaced, and the link stays.
/// - A target that exists keeps its permission bits (a 0600 file does not become 0644).
/// - A target that exists but is not a regular file (`/dev/null`, a FIFO) is written in place;
///   there is nothing there to lose. A directory is refused.
/// Errors throw pipelink::Error naming `who`, the target and the cause.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, std::string who);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t nbytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Closes the temporary file: after it, every write error is known, and only the rename is
  /// left. Optional (commit closes); for writers of several files that must all be complete
  /// before any replaces its target (debug_dump's pair).
  void close();
  /// Closes the temporary file if open, and renames it over the target. Call once.
  void commit();

  /// A name next to `target` no other process, thread or call gets.
  static std::string unique_name(const std::string& target);

  /// The file that will be replaced (symbolic links resolved).
  const std::string& target() const { return target_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  void discard() noexcept;

  std::string path_, who_, target_, tmp_;
  int fd_ = -1;
  bool in_place_ = false, committed_ = false;
};

/// AtomicFile for one piece of text.
void write_file_atomically(const std::string& path, std::string_view text, const std::string& who);

}  // namespace pipelink
