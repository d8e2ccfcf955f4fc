#pragma once
// Host allocations for tensors and plans. Large blocks get 2 MiB alignment and transparent huge
// pages: random row gathers and scatters otherwise miss the TLB on nearly every edge (THP runs
// in madvise mode on our machines). Measured on arxiv-like, one thread: the plan's scatter took
// 15 ms with 4 KiB pages (see docs/perf-notes.md).
#include <cstddef>
#include <cstdlib>
#include <memory>

namespace pipelink::detail {

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using HostBuffer = std::unique_ptr<void, FreeDeleter>;

/// Uninitialised, at least `align`-aligned (a power of two). Throws OutOfMemoryError (the bytes
/// asked for and the host's available memory).
/// `*allocated` (optional) receives the bytes actually reserved.
HostBuffer allocate_host(std::size_t bytes, std::size_t align = 64, std::size_t* allocated = nullptr);

}  // namespace pipelink::detail
