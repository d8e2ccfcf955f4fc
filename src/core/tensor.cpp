#include "pipelink/tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>

#include <sys/mman.h>
#include <unistd.h>

#include "pipelink/error.hpp"

#include "core/host_memory.hpp"
#include "core/strided.hpp"

namespace pipelink {

namespace detail {
HostBuffer allocate_host(std::size_t bytes, std::size_t align, std::size_t* allocated) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const bool huge = bytes >= 4 * kHuge;
  align = std::max({align, sizeof(void*), huge ? kHuge : std::size_t(1)});
  // An OutOfMemoryError with the bytes, as the device's (Python: MemoryError); was bad_alloc.
  auto fail = [&] {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t avail = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
    return OutOfMemoryError(
        bytes, avail, fmt::format("host allocation of {} bytes failed ({} bytes of memory available)", bytes, avail));
  };
  if (bytes > std::numeric_limits<std::size_t>::max() - align) throw fail();
  const std::size_t n = std::max(align, (bytes + align - 1) / align * align);
  void* p = std::aligned_alloc(align, n);
  if (!p) throw fail();
  if (huge) ::madvise(p, n, MADV_HUGEPAGE);  // advisory: failure only costs speed
  if (allocated) *allocated = n;
  return HostBuffer(p);
}
void throw_bad_axis(int axis, int rank) {
  if (rank == 0) throw std::out_of_range(fmt::format("TensorView: axis {} of a rank-0 view, which has no axes", axis));
  throw std::out_of_range(fmt::format("TensorView: axis {} of a rank-{} view (valid: {} to {})", axis, rank, -rank,
                                      rank - 1));
}
}  // namespace detail

TensorView::TensorView(void* base, DType dtype, Device device, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides, std::int64_t byte_offset,
                       Layout layout, SourceSite origin)
    : base_(base), dtype_(dtype), device_(device), layout_(layout), byte_offset_(byte_offset),
      origin_(origin) {
  if (shape.size() > std::size_t(kMaxRank))
    throw std::invalid_argument(fmt::format("tensor rank {} exceeds the maximum {}", shape.size(), kMaxRank));
  if (!strides.empty() && strides.size() != shape.size())
    throw std::invalid_argument(fmt::format("tensor has {} strides for rank {}", strides.size(), shape.size()));
  rank_ = int(shape.size());
  std::int64_t running = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    auto n = shape[std::size_t(i)];
    if (n < 0) throw std::invalid_argument(fmt::format("tensor dimension {} is negative ({})", i, n));
    shape_[std::size_t(i)] = n;
    strides_[std::size_t(i)] = strides.empty() ? running : strides[std::size_t(i)];
    if (__builtin_mul_overflow(running, std::max<std::int64_t>(n, 1), &running))
      throw std::invalid_argument("tensor shape overflows 64-bit element counts");
  }
}

std::int64_t TensorView::numel() const noexcept {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[std::size_t(i)];
  return n;
}

bool TensorView::is_contiguous() const noexcept {
  if (numel() == 0) return true;
  std::int64_t expect = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    auto n = shape_[std::size_t(i)];
    if (n != 1 && strides_[std::size_t(i)] != expect) return false;
    expect *= n;
  }
  return true;
}

bool TensorView::rows_contiguous() const noexcept {
  return rank_ == 0 || shape_[std::size_t(rank_ - 1)] <= 1 || strides_[std::size_t(rank_ - 1)] == 1;
}

std::size_t TensorView::alignment() const noexcept {
  auto addr = reinterpret_cast<std::uintptr_t>(data());
  if (addr == 0 || numel() == 0) return 4096;
  std::size_t a = 1;
  while (a < 4096 && (addr % (a * 2)) == 0) a *= 2;
  return a;
}

std::pair<std::int64_t, std::int64_t> TensorView::byte_extent() const noexcept {
  if (numel() == 0) return {0, 0};
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < rank_; ++i) {
    auto span = (shape_[std::size_t(i)] - 1) * strides_[std::size_t(i)];
    (span < 0 ? lo : hi) += span;
  }
  auto sz = std::int64_t(itemsize());
  return {lo * sz, (hi + 1) * sz};
}

namespace {

// Floor division for a positive divisor.
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && a < 0); }

}  // namespace

bool TensorView::overlaps(const TensorView& o) const noexcept {
  if (numel() == 0 || o.numel() == 0 || !(device_ == o.device_)) return false;
  auto [a0, a1] = byte_extent();
  auto [b0, b1] = o.byte_extent();
  auto pa = reinterpret_cast<std::intptr_t>(data()), pb = reinterpret_cast<std::intptr_t>(o.data());
  if (!(pa + a0 < pb + b1 && pb + b0 < pa + a1)) return false;
  // Extents meet. Rows of one pitch can still interleave without sharing a byte: x = h[:, :F] and
  // out = h[:, F:] of a concatenated [N, 2F] buffer (GraphSAGE's), or even and odd rows. Refused
  // as aliasing before (a review, session 46). Exact for rank-2 views with contiguous rows and
  // one positive row pitch P: row i of this view is [pa + iP, pa + iP + Wa), row j of the other
  // [pb + jP, pb + jP + Wb); they meet where -Wb < d + kP < Wa for some k = j - i, d = pb - pa.
  if (rank_ != 2 || o.rank_ != 2 || !rows_contiguous() || !o.rows_contiguous()) return true;
  const std::int64_t ra = shape_[0], rb = o.shape_[0];
  const std::int64_t sa = strides_[0] * std::int64_t(itemsize()), sb = o.strides_[0] * std::int64_t(o.itemsize());
  const std::int64_t P = ra > 1 ? sa : sb;
  if (P <= 0 || (ra > 1 && sa != P) || (rb > 1 && sb != P)) return true;  // not one pitch: the extent stands
  const std::int64_t wa = shape_[1] * std::int64_t(itemsize()), wb = o.shape_[1] * std::int64_t(o.itemsize());
  const std::int64_t d = std::int64_t(pb - pa);
  const std::int64_t k_lo = std::max(floor_div(-wb - d, P) + 1, -(ra - 1));
  const std::int64_t k_hi = std::min(-floor_div(-(wa - d), P) - 1, rb - 1);  // ceil((wa - d) / P) - 1
  return k_lo <= k_hi;
}

bool TensorView::self_overlaps() const noexcept {
  // No element, no overlap: [N, 0] views have an outer stride of 0 (TensorBuilder's, NumPy's),
  // and F = 0 was refused as an output overlapping itself (a review, session 43).
  if (numel() == 0) return false;
  // Sorted by |stride|, each stride must step past everything the inner dimensions span.
  std::array<std::pair<std::int64_t, std::int64_t>, kMaxRank> dims{};  // (|stride|, size)
  int n = 0;
  for (int i = 0; i < rank_; ++i)
    if (shape_[std::size_t(i)] > 1) dims[std::size_t(n++)] = {std::abs(strides_[std::size_t(i)]), shape_[std::size_t(i)]};
  for (int i = 1; i < n; ++i)  // insertion sort: at most kMaxRank entries
    for (int j = i; j > 0 && dims[std::size_t(j)] < dims[std::size_t(j - 1)]; --j)
      std::swap(dims[std::size_t(j)], dims[std::size_t(j - 1)]);
  std::int64_t span = 0;  // elements covered by the inner dimensions, minus one
  for (int i = 0; i < n; ++i) {
    if (dims[std::size_t(i)].first <= span) return true;
    span += (dims[std::size_t(i)].second - 1) * dims[std::size_t(i)].first;
  }
  return false;
}

TensorView TensorView::slice_rows(std::int64_t begin, std::int64_t end) const {
  if (rank_ == 0 || begin < 0 || end < begin || end > shape_[0])
    throw std::out_of_range(fmt::format("slice_rows({}, {}) out of range for shape {}", begin, end, shape_str()));
  TensorView v = *this;
  v.shape_[0] = end - begin;
  v.byte_offset_ += begin * strides_[0] * std::int64_t(itemsize());
  return v;
}

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(shape_[std::size_t(i)]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
namespace {
std::mutex g_hooks_mu;
DeviceAllocatorHooks g_cuda_hooks;
bool g_cuda_hooks_set = false;

std::size_t round_up(std::size_t n, std::size_t m) { return m ? (n + m - 1) / m * m : n; }
}  // namespace

void set_device_allocator_hooks(DeviceKind kind, const DeviceAllocatorHooks& hooks) {
  if (kind != DeviceKind::cuda) throw std::invalid_argument("allocator hooks exist for cuda only");
  // All five are called without a check: a null one was a jump to address 0 at the first device
  // tensor (a probe, session 53).
  if (!hooks.allocate || !hooks.deallocate || !hooks.copy || !hooks.memset_zero || !hooks.copy2d)
    throw std::invalid_argument("set_device_allocator_hooks: every hook must be set (allocate, deallocate, copy, "
                                "memset_zero, copy2d)");
  std::lock_guard lock(g_hooks_mu);
  g_cuda_hooks = hooks;
  g_cuda_hooks_set = true;
}

const DeviceAllocatorHooks* device_allocator_hooks(DeviceKind kind) noexcept {
  std::lock_guard lock(g_hooks_mu);
  return (kind == DeviceKind::cuda && g_cuda_hooks_set) ? &g_cuda_hooks : nullptr;
}

Tensor TensorBuilder::build(std::source_location loc) const {
  if (shape_.size() > std::size_t(kMaxRank))
    throw std::invalid_argument(fmt::format("TensorBuilder: rank {} exceeds {}", shape_.size(), kMaxRank));
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    throw std::invalid_argument(fmt::format("TensorBuilder: alignment {} is not a power of two", alignment_));
  const std::size_t item = dtype_size(dtype_);
  // Past 2^63 - 1 the row-bytes check below underflowed and the stride wrapped to 0: a 64-byte
  // buffer for 800 bytes, and a fill wrote past it (a probe, session 53).
  if (pitch_ > std::size_t(std::numeric_limits<std::int64_t>::max()))
    throw std::invalid_argument(fmt::format("TensorBuilder: row pitch alignment {} exceeds 2^63 - 1 bytes", pitch_));
  if (pitch_ != 0 && pitch_ % item != 0)
    throw std::invalid_argument(fmt::format("TensorBuilder: row pitch alignment {} is not a multiple of the element size {}", pitch_, item));
  for (auto n : shape_)
    if (n < 0) throw std::invalid_argument(fmt::format("TensorBuilder: negative dimension {}", n));

  std::vector<std::int64_t> strides(shape_.size());
  std::size_t bytes = item;
  if (!shape_.empty()) {
    // Every product is checked: a shape whose byte size overflows must not become a tiny buffer.
    auto mul = [](std::int64_t a, std::int64_t b) {
      std::int64_t r = 0;
      if (__builtin_mul_overflow(a, b, &r)) throw std::invalid_argument("TensorBuilder: shape overflows 64-bit sizes");
      return r;
    };
    auto inner = std::size_t(shape_.back());
    // The pitched row's bytes are checked too: {1, 2^62 + 1} float32 with a pitch wrapped to a
    // 64-byte buffer, and a fill wrote past it (a review, session 46).
    std::size_t row_elems = inner;
    if (pitch_) {
      std::size_t row_bytes = 0;
      if (__builtin_mul_overflow(inner, item, &row_bytes) || row_bytes > std::size_t(std::numeric_limits<std::int64_t>::max()) - pitch_)
        throw std::invalid_argument("TensorBuilder: shape overflows 64-bit sizes");
      row_elems = round_up(row_bytes, pitch_) / item;
    }
    strides.back() = 1;
    std::int64_t running = std::int64_t(row_elems);
    for (int i = int(shape_.size()) - 2; i >= 0; --i) {
      strides[std::size_t(i)] = running;
      running = mul(running, shape_[std::size_t(i)]);
    }
    bytes = std::size_t(mul(shape_.size() == 1 ? std::int64_t(inner) : running, std::int64_t(item)));
    for (auto n : shape_)
      if (n == 0) bytes = 0;
  }

  std::shared_ptr<void> storage;
  // aligned_alloc wants the size to be a multiple of the alignment, which is at least a pointer.
  const std::size_t align = std::max<std::size_t>(alignment_, sizeof(void*));
  const std::size_t alloc_bytes = std::max<std::size_t>(round_up(bytes, align), align);
  if (device_.kind == DeviceKind::cpu) {
    storage = std::shared_ptr<void>(detail::allocate_host(alloc_bytes, align).release(), detail::FreeDeleter{});
  } else {
    const auto* hooks = device_allocator_hooks(device_.kind);
    if (!hooks)
      throw BackendUnavailableError("cannot allocate on " + device_.str() +
                                    ": this PipeLink build has no CUDA backend");
    int dev = device_.index;
    void* p = hooks->allocate(alloc_bytes, dev);
    auto dealloc = hooks->deallocate;
    storage = std::shared_ptr<void>(p, [dealloc, dev](void* q) { dealloc(q, dev); });
  }
  TensorView v(storage.get(), dtype_, device_, shape_, strides, 0, layout_, SourceSite::from(loc));
  return Tensor(std::move(storage), alloc_bytes, v);
}

Tensor TensorBuilder::zeros(std::source_location loc) const {
  Tensor t = build(loc);
  if (device_.kind == DeviceKind::cpu) {
    std::memset(t.view().base(), 0, t.storage_bytes());
  } else {
    device_allocator_hooks(device_.kind)->memset_zero(t.view().base(), device_.index, t.storage_bytes());
  }
  return t;
}

namespace {
// Copies a strided CPU view into contiguous memory.
void gather_contiguous(const TensorView& v, std::byte* dst) {
  const auto item = std::int64_t(v.itemsize());
  const auto* src = static_cast<const std::byte*>(v.data());
  if (v.is_contiguous()) {
    std::memcpy(dst, src, std::size_t(v.numel() * item));
    return;
  }
  detail::for_each_offset(v, [&](std::int64_t n, std::int64_t off) {
    std::memcpy(dst + n * item, src + off * item, std::size_t(item));
  });
}
}  // namespace

Tensor to_device(const TensorView& v, Device device, std::source_location loc) {
  std::vector<std::int64_t> shape(v.shape().begin(), v.shape().end());
  Tensor out = TensorBuilder().shape(shape).dtype(v.dtype()).device(device).layout(v.layout()).build(loc);
  const auto bytes = std::size_t(v.numel()) * v.itemsize();
  if (bytes == 0) return out;
  if (v.base() == nullptr) throw std::invalid_argument("to_device: view of " + v.shape_str() + " has no data pointer");
  if (v.device().kind == DeviceKind::cpu && device.kind == DeviceKind::cpu) {
    gather_contiguous(v, static_cast<std::byte*>(out.data()));
    return out;
  }
  const auto* hooks = device_allocator_hooks(DeviceKind::cuda);
  if (!hooks) throw BackendUnavailableError("this PipeLink build has no CUDA backend");
  if (!v.is_contiguous()) {
    if (v.device().kind != DeviceKind::cpu)
      throw std::invalid_argument("to_device: strided device tensors are not supported yet");
    Tensor tmp = clone(v, loc);
    hooks->copy(out.data(), device, tmp.data(), v.device(), bytes);
  } else {
    hooks->copy(out.data(), device, v.data(), v.device(), bytes);
  }
  return out;
}

Tensor clone(const TensorView& v, std::source_location loc) { return to_device(v, v.device(), loc); }

void copy_into(const TensorView& dst, const TensorView& src) {
  if (dst.dtype() != src.dtype() || !std::equal(dst.shape().begin(), dst.shape().end(), src.shape().begin(), src.shape().end()))
    throw std::invalid_argument(fmt::format("copy_into: {} {} from {} {}", dtype_name(dst.dtype()), dst.shape_str(),
                                            dtype_name(src.dtype()), src.shape_str()));
  if (src.numel() == 0) return;
  const auto item = std::int64_t(src.itemsize());
  if (dst.device().kind == DeviceKind::cpu && src.device().kind == DeviceKind::cpu) {
    if (dst.is_contiguous()) {
      gather_contiguous(src, static_cast<std::byte*>(dst.data()));
      return;
    }
    Tensor tmp = clone(src);  // contiguous source, then scatter into the strided destination
    const auto* from = static_cast<const std::byte*>(tmp.data());
    auto* to = static_cast<std::byte*>(dst.data());
    detail::for_each_offset(dst, [&](std::int64_t n, std::int64_t off) {
      std::memcpy(to + off * item, from + n * item, std::size_t(item));
    });
    return;
  }
  const auto* hooks = device_allocator_hooks(DeviceKind::cuda);
  if (!hooks) throw BackendUnavailableError("this PipeLink build has no CUDA backend");
  if (dst.is_contiguous() && src.is_contiguous()) {
    hooks->copy(dst.data(), dst.device(), src.data(), src.device(), std::size_t(src.numel() * item));
    return;
  }
  if (src.rank() == 2 && src.rows_contiguous() && dst.rows_contiguous()) {
    hooks->copy2d(dst.data(), std::size_t(dst.stride(0) * item), dst.device(), src.data(), std::size_t(src.stride(0) * item),
                  src.device(), std::size_t(src.dim(1) * item), std::size_t(src.dim(0)));
    return;
  }
  throw std::invalid_argument("copy_into: strided device views other than pitched rows are not supported yet");
}

}  // namespace pipelink
