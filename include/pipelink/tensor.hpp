#pragma once
// TensorView (non-owning), Tensor (owning) and TensorBuilder.
//
// Strides are in elements, as in DLPack and PyTorch. A view made by PipeLink remembers the
// source location that made it, so a contract violation can point at the line that built the
// offending tensor.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "pipelink/dtype.hpp"
#include "pipelink/error.hpp"

namespace pipelink {

inline constexpr int kMaxRank = 6;

namespace detail {
/// std::out_of_range naming the axis and the rank (dim/stride's check, out of line).
[[noreturn]] void throw_bad_axis(int axis, int rank);
}  // namespace detail

class TensorView {
 public:
  TensorView() = default;
  /// `strides` empty means C-contiguous. Throws std::invalid_argument for rank > kMaxRank,
  /// negative sizes or strides/shape rank mismatch.
  TensorView(void* base, DType dtype, Device device, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides = {}, std::int64_t byte_offset = 0,
             Layout layout = Layout::unspecified, SourceSite origin = {});
  TensorView(void* base, DType dtype, Device device, std::initializer_list<std::int64_t> shape)
      : TensorView(base, dtype, device, std::span<const std::int64_t>(shape.begin(), shape.size())) {}

  bool defined() const noexcept { return base_ != nullptr || numel() == 0; }
  void* base() const noexcept { return base_; }
  void* data() const noexcept { return static_cast<std::byte*>(base_) + byte_offset_; }
  template <class T> T* data_as() const noexcept { return static_cast<T*>(data()); }

  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return device_; }
  Layout layout() const noexcept { return layout_; }
  const SourceSite& origin() const noexcept { return origin_; }
  int rank() const noexcept { return rank_; }
  std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), std::size_t(rank_)}; }
  std::span<const std::int64_t> strides() const noexcept { return {strides_.data(), std::size_t(rank_)}; }
  /// Axis i in [-rank, rank), negative from the end; std::out_of_range otherwise (it read past
  /// the arrays: a probe, session 53).
  std::int64_t dim(int i) const { return shape_[axis(i)]; }
  std::int64_t stride(int i) const { return strides_[axis(i)]; }
  std::int64_t byte_offset() const noexcept { return byte_offset_; }
  std::size_t itemsize() const noexcept { return dtype_size(dtype_); }
  std::int64_t numel() const noexcept;

  bool is_contiguous() const noexcept;       // C order, no padding
  bool rows_contiguous() const noexcept;     // innermost stride 1 (rows may be pitched)
  /// Largest power of two (≤ 4096) dividing the data address; 4096 for an empty view.
  std::size_t alignment() const noexcept;
  /// Byte range [lo, hi) that the view can touch, relative to data(); {0,0} when empty.
  std::pair<std::int64_t, std::int64_t> byte_extent() const noexcept;
  bool overlaps(const TensorView& other) const noexcept;
  /// Whether two distinct indices can address the same element (e.g. a zero or too-small stride).
  bool self_overlaps() const noexcept;

  TensorView with_layout(Layout l) const { auto v = *this; v.layout_ = l; return v; }
  TensorView with_origin(SourceSite s) const { auto v = *this; v.origin_ = s; return v; }
  /// Rows [begin, end) of the leading dimension.
  TensorView slice_rows(std::int64_t begin, std::int64_t end) const;

  std::string shape_str() const;  // "[169343, 64]"

 private:
  std::size_t axis(int i) const {
    if (i < -rank_ || i >= rank_) detail::throw_bad_axis(i, rank_);
    return std::size_t(i < 0 ? i + rank_ : i);
  }
  void* base_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_{};
  Layout layout_ = Layout::unspecified;
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
  std::int64_t byte_offset_ = 0;
  SourceSite origin_{};
};

/// Owning tensor: shared storage plus a view of it. Copies share storage (like torch.Tensor).
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<void> storage, std::size_t storage_bytes, TensorView view)
      : storage_(std::move(storage)), storage_bytes_(storage_bytes), view_(view) {}

  const TensorView& view() const noexcept { return view_; }
  operator const TensorView&() const noexcept { return view_; }  // NOLINT: implicit by design
  bool defined() const noexcept { return storage_ != nullptr || view_.numel() == 0; }
  void* data() const noexcept { return view_.data(); }
  template <class T> T* data_as() const noexcept { return view_.data_as<T>(); }
  DType dtype() const noexcept { return view_.dtype(); }
  Device device() const noexcept { return view_.device(); }
  std::int64_t numel() const noexcept { return view_.numel(); }
  std::int64_t dim(int i) const { return view_.dim(i); }
  int rank() const noexcept { return view_.rank(); }
  std::size_t storage_bytes() const noexcept { return storage_bytes_; }

 private:
  std::shared_ptr<void> storage_;
  std::size_t storage_bytes_ = 0;
  TensorView view_;
};

/// Fluent construction of owning tensors:
///   auto x = TensorBuilder().shape({n, 64}).dtype(DType::f32).alignment(64).build();
/// `pitched_rows(b)` pads each row of the innermost dimension to a multiple of `b` bytes.
class TensorBuilder {
 public:
  TensorBuilder& shape(std::vector<std::int64_t> s) { shape_ = std::move(s); return *this; }
  TensorBuilder& dtype(DType t) { dtype_ = t; return *this; }
  TensorBuilder& device(Device d) { device_ = d; return *this; }
  TensorBuilder& alignment(std::size_t bytes) { alignment_ = bytes; return *this; }
  TensorBuilder& pitched_rows(std::size_t row_align_bytes) { pitch_ = row_align_bytes; return *this; }
  TensorBuilder& layout(Layout l) { layout_ = l; return *this; }
  /// Allocates (uninitialised). Throws std::invalid_argument on a bad spec,
  /// BackendUnavailableError for a device this build cannot allocate on.
  Tensor build(std::source_location loc = std::source_location::current()) const;
  /// Allocates and fills with zeros.
  Tensor zeros(std::source_location loc = std::source_location::current()) const;

 private:
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  std::size_t alignment_ = 64;
  std::size_t pitch_ = 0;
  Layout layout_ = Layout::unspecified;
};

/// Device memory hooks; the CUDA backend installs them at load time. A build without CUDA
/// leaves them empty and allocating on cuda throws BackendUnavailableError.
struct DeviceAllocatorHooks {
  void* (*allocate)(std::size_t bytes, int device) = nullptr;
  void (*deallocate)(void* p, int device) noexcept = nullptr;
  void (*copy)(void* dst, Device dd, const void* src, Device sd, std::size_t bytes) = nullptr;
  void (*memset_zero)(void* dst, int device, std::size_t bytes) = nullptr;
  /// `height` rows of `width` bytes, with row pitches in bytes.
  void (*copy2d)(void* dst, std::size_t dpitch, Device dd, const void* src, std::size_t spitch, Device sd,
                 std::size_t width, std::size_t height) = nullptr;
};
void set_device_allocator_hooks(DeviceKind kind, const DeviceAllocatorHooks& hooks);
const DeviceAllocatorHooks* device_allocator_hooks(DeviceKind kind) noexcept;

/// Copy a view into a new contiguous tensor on `device`.
Tensor to_device(const TensorView& v, Device device,
                 std::source_location loc = std::source_location::current());
/// Copies `src` into the existing `dst` (same shape and dtype; any devices). Rank <= 2 views with
/// unit inner stride are copied row-wise on CUDA; other strided device views throw.
void copy_into(const TensorView& dst, const TensorView& src);

/// Contiguous deep copy on the same device.
Tensor clone(const TensorView& v, std::source_location loc = std::source_location::current());

}  // namespace pipelink
