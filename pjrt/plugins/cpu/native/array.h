// Arrays of the cpu backend: an element type, a static shape, and aligned storage shared by
// reference. Arrays are values: a kernel never writes into an input anyone else holds, it
// allocates outputs (or takes over an input's storage that only it holds: can_take_over).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "_generated/dtypes.h"

namespace openhlo::cpu {

// Element types. Names follow StableHLO; the 16-bit floats and complex types are stored
// natively (kernels that cannot compute on them raise Unsupported at compile time).
// B8..B64 ("b8".."b64") hold any other element type as raw bytes of that width (f8 types,
// i4, quantized storage): data-movement kernels handle them, arithmetic falls back.
// The enum and its names and sizes are generated from the Python table
// (native_module.py NATIVE_DTYPES, sizes from stablehlo's element facts).

// Size in bytes of one element.
size_t dtype_size(DType dtype);
// StableHLO spelling ("f32", "i1", "ui8", ...), as used by the Python lowering.
const char* dtype_name(DType dtype);
// Inverse of dtype_name; throws std::invalid_argument for names we do not store natively.
DType dtype_from_name(const std::string& name);

using Shape = std::vector<int64_t>;

// Throws std::length_error naming the shape: its element count (element_size 0) or byte
// size does not fit in int64.
[[noreturn]] void throw_size_overflow(const Shape& shape, size_t element_size);

// Element count of a shape. Checked: a verified program never overflows, but shapes also
// come from the native API, and a wrapped count would size a buffer too small for the
// kernel that fills it (Storage rounds a wrapped size_t up to a small allocation).
inline int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  bool wrapped = false;
  for (int64_t d : shape) {
    if (d == 0) return 0;  // empty, however large the other dimensions are
    wrapped |= __builtin_mul_overflow(n, d, &n);
  }
  if (wrapped) throw_size_overflow(shape, 0);
  return n;
}

// Bytes of an array of this element type and shape, checked like num_elements.
inline size_t num_bytes(DType dtype, const Shape& shape) {
  const auto element_size = static_cast<int64_t>(dtype_size(dtype));
  int64_t bytes = 0;
  if (__builtin_mul_overflow(num_elements(shape), element_size, &bytes)) {
    throw_size_overflow(shape, dtype_size(dtype));
  }
  return static_cast<size_t>(bytes);
}

// Row-major strides in elements.
inline std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

// 64-byte aligned bytes with a reference count; freed when the last counted StorageRef to
// them goes away. Borrowed storage is someone else's memory (a PJRT caller's argument
// buffer): never freed here and never written (kernels take over only owned storage for
// in-place results). Inline storage (allocate's small arrays) has its bytes in the same block
// as the Storage: one allocation per array instead of two.
struct Storage {
  std::atomic<int64_t> refs{1};  // counted StorageRefs
  void* data = nullptr;
  size_t nbytes = 0;
  bool owned = true;
  bool inline_data = false;
};

// Frees a Storage whose last counted reference went (array.cc).
void destroy_storage(Storage* storage);

// A reference to a Storage. The count lives in the Storage (intrusive), so copying a
// reference is one atomic add and the last release frees the Storage without a virtual call:
// the executor copies and drops references for every operand of every instruction it runs.
// A view (StorageRef::view) points at storage that another reference keeps alive, and adds
// nothing to its count: the executor lends a step the operands their slots still hold that
// way, and can_take_over never lets a step write into a view. A copy of a view counts.
class StorageRef {
 public:
  StorageRef() = default;
  StorageRef(std::nullptr_t) {}  // NOLINT: as a null shared pointer converts
  StorageRef(const StorageRef& other) : p_(other.p_) {
    if (p_ != nullptr) p_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  StorageRef(StorageRef&& other) noexcept : p_(other.p_), counted_(other.counted_) {
    other.p_ = nullptr;
    other.counted_ = true;
  }
  StorageRef& operator=(const StorageRef& other) {
    StorageRef(other).swap(*this);
    return *this;
  }
  StorageRef& operator=(StorageRef&& other) noexcept {
    StorageRef(std::move(other)).swap(*this);
    return *this;
  }
  ~StorageRef() {
    if (p_ != nullptr && counted_ && p_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      destroy_storage(p_);
    }
  }
  // Takes over a new Storage's initial count.
  static StorageRef adopt(Storage* storage) {
    StorageRef ref;
    ref.p_ = storage;
    return ref;
  }
  // An uncounted reference to what `of` refers to; valid while `of` (or another counted
  // reference) keeps it.
  static StorageRef view(const StorageRef& of) {
    StorageRef ref;
    ref.p_ = of.p_;
    ref.counted_ = false;
    return ref;
  }
  void reset() { StorageRef().swap(*this); }
  void swap(StorageRef& other) noexcept {
    std::swap(p_, other.p_);
    std::swap(counted_, other.counted_);
  }
  Storage* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool counted() const { return counted_; }
  // Counted references (a view's own is not among them).
  int64_t use_count() const { return p_ == nullptr ? 0 : p_->refs.load(std::memory_order_acquire); }
  friend bool operator==(const StorageRef& a, const StorageRef& b) { return a.p_ == b.p_; }
  friend bool operator!=(const StorageRef& a, const StorageRef& b) { return a.p_ != b.p_; }
  friend bool operator==(const StorageRef& a, std::nullptr_t) { return a.p_ == nullptr; }
  friend bool operator!=(const StorageRef& a, std::nullptr_t) { return a.p_ != nullptr; }

 private:
  Storage* p_ = nullptr;
  bool counted_ = true;
};

// A counted reference to `bytes` of someone else's memory (Borrowed above).
StorageRef borrow_storage(void* data, size_t bytes);

// Live Storage count and bytes, for leak tests and memory statistics.
int64_t live_storage_count();
int64_t live_storage_bytes();
// The most bytes live at once since the last reset (which sets it to the bytes live then): what
// a program run really held, to check the compiler's peak-memory figure against.
int64_t peak_storage_bytes();
void reset_peak_storage_bytes();

struct Array {
  DType dtype = DType::F32;
  Shape shape;
  StorageRef storage;

  bool defined() const { return storage != nullptr; }
  int64_t size() const { return num_elements(shape); }
  size_t nbytes() const { return num_bytes(dtype, shape); }
  void* raw() const { return storage->data; }
  template <typename T> T* data() const { return static_cast<T*>(storage->data); }
};

// A new array of the given type; contents uninitialized.
Array allocate(DType dtype, const Shape& shape);
// A new array holding a copy of `array`'s bytes in storage of its own.
Array copy_array(const Array& array);
// A new array with all bytes zero.
Array allocate_zeroed(DType dtype, const Shape& shape);

// Whether a kernel may write a result of `nbytes` into `operand`'s storage: the storage is
// owned, exactly that long, and nobody else holds it (the executor moves an operand's last use
// out of its slot, so the step's operand is then the only reference; an operand that its slot
// still holds is lent to the step as a view, which is never taken over). Only for kernels whose
// result element i depends on operand element i alone, written after it is read.
inline bool can_take_over(const Array& operand, size_t nbytes) {
  return operand.storage != nullptr && operand.storage.counted() && operand.storage->owned &&
         operand.storage.use_count() == 1 && operand.nbytes() == nbytes;
}

// Scalar C++ types of the element types, for templated kernels.
struct f16_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };
template <DType D> struct CType;
template <> struct CType<DType::PRED> { using type = bool; };
template <> struct CType<DType::S8> { using type = int8_t; };
template <> struct CType<DType::S16> { using type = int16_t; };
template <> struct CType<DType::S32> { using type = int32_t; };
template <> struct CType<DType::S64> { using type = int64_t; };
template <> struct CType<DType::U8> { using type = uint8_t; };
template <> struct CType<DType::U16> { using type = uint16_t; };
template <> struct CType<DType::U32> { using type = uint32_t; };
template <> struct CType<DType::U64> { using type = uint64_t; };
template <> struct CType<DType::F16> { using type = f16_t; };
template <> struct CType<DType::BF16> { using type = bf16_t; };
template <> struct CType<DType::F32> { using type = float; };
template <> struct CType<DType::F64> { using type = double; };

template <typename T> struct TypeTag { using type = T; };

// Calls fn(TypeTag<T>{}) for the integer (and bool) element types, and other() for the rest;
// both must return the same type.
template <typename Fn, typename Other>
auto dispatch_integer(DType dtype, Fn&& fn, Other&& other) {
  switch (dtype) {
    case DType::PRED: return fn(TypeTag<bool>{});
    case DType::S8: return fn(TypeTag<int8_t>{});
    case DType::S16: return fn(TypeTag<int16_t>{});
    case DType::S32: return fn(TypeTag<int32_t>{});
    case DType::S64: return fn(TypeTag<int64_t>{});
    case DType::U8: return fn(TypeTag<uint8_t>{});
    case DType::U16: return fn(TypeTag<uint16_t>{});
    case DType::U32: return fn(TypeTag<uint32_t>{});
    case DType::U64: return fn(TypeTag<uint64_t>{});
    default: return other();
  }
}

// Calls fn(TypeTag<T>{}) for the real (non-complex, non-16-bit-float) element types and
// returns its result; throws std::invalid_argument otherwise. Kernels use it at compile time
// to pick a typed loop:
//   auto loop = dispatch_real(dtype, [&](auto tag) { using T = typename decltype(tag)::type; ...});
template <typename Fn>
auto dispatch_real(DType dtype, Fn&& fn) {
  return dispatch_integer(dtype, fn, [&] {
    if (dtype == DType::F32) return fn(TypeTag<float>{});
    if (dtype == DType::F64) return fn(TypeTag<double>{});
    throw std::invalid_argument(std::string("element type ") + dtype_name(dtype) +
                                " has no native arithmetic");
  });
}

// Calls fn(TypeTag<uintN_t>{}) with the unsigned integer of the element size: for kernels
// that only move bytes (transpose, slice, gather, ...) and so work for every element type.
template <typename Fn>
auto dispatch_bytes(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1: return fn(TypeTag<uint8_t>{});
    case 2: return fn(TypeTag<uint16_t>{});
    case 4: return fn(TypeTag<uint32_t>{});
    case 8: return fn(TypeTag<uint64_t>{});
    case 16: {
      struct alignas(16) u128 { uint64_t lo, hi; };
      return fn(TypeTag<u128>{});
    }
    default:
      throw std::invalid_argument("unexpected element size");
  }
}

}  // namespace openhlo::cpu
