// Dense-literal hot paths: hex blobs and MLIR's float printing.
//
// Native twins of the pure-Python references in stablehlo/text/literals.py (decode_hex,
// encode_hex, format_floats); a test checks that both agree bit for bit. The float printing
// reproduces LLVM APFloat::toString arithmetic, including its truncating first step, as
// described in Note [MLIR float printing] in literals.py.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace py = pybind11;

namespace {

// ---------------------------------------------------------------------------------------------
// Hex blobs

constexpr char kHexDigits[] = "0123456789ABCDEF";

// Value of a hex digit, or -1.
inline int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Length of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
inline Py_ssize_t Utf8Length(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

py::bytes DecodeHex(const py::str& digits) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(digits.ptr(), &size);
  if (data == nullptr) throw py::error_already_set();
  // Every character before the first bad one is an ASCII hex digit, so the byte offset of
  // the bad one is also its offset in characters.
  for (Py_ssize_t i = 0; i < size; ++i) {
    unsigned char c = static_cast<unsigned char>(data[i]);
    if (HexValue(c) < 0) {
      Py_ssize_t len = std::min(Utf8Length(c), size - i);
      py::str bad(data + i, static_cast<size_t>(len));
      throw py::value_error(
          py::str("invalid hex digit {!r} at offset {}").format(bad, i).cast<std::string>());
    }
  }
  if (size % 2 != 0) {
    throw py::value_error("odd number of hex digits (" + std::to_string(size) + ")");
  }
  std::string out(static_cast<size_t>(size / 2), '\0');
  for (Py_ssize_t i = 0; i < size / 2; ++i) {
    int hi = HexValue(static_cast<unsigned char>(data[2 * i]));
    int lo = HexValue(static_cast<unsigned char>(data[2 * i + 1]));
    out[static_cast<size_t>(i)] = static_cast<char>((hi << 4) | lo);
  }
  return py::bytes(out);
}

py::str EncodeHex(const py::object& data) {
  Py_buffer view;
  if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    throw py::error_already_set();
  }
  const auto* bytes = static_cast<const unsigned char*>(view.buf);
  std::string out(static_cast<size_t>(view.len) * 2, '\0');
  {
    py::gil_scoped_release release;
    for (Py_ssize_t i = 0; i < view.len; ++i) {
      out[2 * i] = kHexDigits[bytes[i] >> 4];
      out[2 * i + 1] = kHexDigits[bytes[i] & 0xF];
    }
  }
  PyBuffer_Release(&view);
  return py::str(out);
}

// ---------------------------------------------------------------------------------------------
// Exact integers for the decimal expansion of a binary float

// Unsigned big integer, little-endian 32-bit limbs; just the operations the printer needs.
class BigUint {
 public:
  explicit BigUint(uint64_t v) {
    while (v != 0) {
      limbs_.push_back(static_cast<uint32_t>(v));
      v >>= 32;
    }
  }

  bool IsZero() const { return limbs_.empty(); }

  void MulSmall(uint32_t m) {
    uint64_t carry = 0;
    for (uint32_t& limb : limbs_) {
      uint64_t p = static_cast<uint64_t>(limb) * m + carry;
      limb = static_cast<uint32_t>(p);
      carry = p >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<uint32_t>(carry));
  }

  void MulPow5(int k) {
    constexpr uint32_t kPow5_13 = 1220703125u;  // 5**13, the largest power of 5 in 32 bits
    for (; k >= 13; k -= 13) MulSmall(kPow5_13);
    uint32_t rest = 1;
    for (; k > 0; --k) rest *= 5;
    if (rest != 1) MulSmall(rest);
  }

  void ShiftLeft(int n) {
    int words = n / 32;
    int bits = n % 32;
    if (bits != 0) {
      uint32_t carry = 0;
      for (uint32_t& limb : limbs_) {
        uint32_t next = limb >> (32 - bits);
        limb = (limb << bits) | carry;
        carry = next;
      }
      if (carry != 0) limbs_.push_back(carry);
    }
    limbs_.insert(limbs_.begin(), static_cast<size_t>(words), 0u);
  }

  int BitLength() const {
    if (limbs_.empty()) return 0;
    uint32_t top = limbs_.back();
    return static_cast<int>(limbs_.size() - 1) * 32 + (32 - __builtin_clz(top));
  }

  // Divides in place and returns the remainder.
  uint32_t DivSmall(uint32_t d) {
    uint64_t rem = 0;
    for (size_t i = limbs_.size(); i-- > 0;) {
      uint64_t cur = (rem << 32) | limbs_[i];
      limbs_[i] = static_cast<uint32_t>(cur / d);
      rem = cur % d;
    }
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
    return static_cast<uint32_t>(rem);
  }

  // Decimal digits, most significant first (consumes the value).
  std::string TakeDecimal() {
    std::vector<uint32_t> chunks;  // base 1e9, least significant first
    while (!IsZero()) chunks.push_back(DivSmall(1000000000u));
    std::string out = std::to_string(chunks.back());
    size_t pos = out.size();
    out.resize(pos + 9 * (chunks.size() - 1));
    for (size_t i = chunks.size() - 1; i-- > 0; pos += 9) {
      uint32_t chunk = chunks[i];
      for (int j = 8; j >= 0; --j) {
        out[pos + static_cast<size_t>(j)] = static_cast<char>('0' + chunk % 10);
        chunk /= 10;
      }
    }
    return out;
  }

 private:
  std::vector<uint32_t> limbs_;
};

// Bit layout of the two IEEE types the native path prints.
template <typename T>
struct FloatTraits;

template <>
struct FloatTraits<float> {
  using Bits = uint32_t;
  static constexpr int kMantissaBits = 23;
  static constexpr int kExponentBits = 8;
  static constexpr int kPrecision = 24;
};

template <>
struct FloatTraits<double> {
  using Bits = uint64_t;
  static constexpr int kMantissaBits = 52;
  static constexpr int kExponentBits = 11;
  static constexpr int kPrecision = 53;
};

// A finite non-zero float as an exact decimal: value = digits * 10**exp, where `digits` is
// the decimal expansion of APFloat's integer significand (trailing binary zeros removed).
struct ExactDecimal {
  std::string digits;
  int exp;
  int bit_length;  // of the integer significand; drives APFloat's truncation step
};

// Significant decimal digits and the power of ten of the last one.
struct Digits {
  std::string digits;
  int exp;
};

template <typename T>
ExactDecimal ToExactDecimal(typename FloatTraits<T>::Bits bits) {
  using Traits = FloatTraits<T>;
  constexpr int kBias = (1 << (Traits::kExponentBits - 1)) - 1;
  const uint64_t mantissa_mask = (uint64_t{1} << Traits::kMantissaBits) - 1;
  const int exponent_field =
      static_cast<int>((bits >> Traits::kMantissaBits) & ((1u << Traits::kExponentBits) - 1));
  uint64_t significand = bits & mantissa_mask;
  int exp2;
  if (exponent_field == 0) {
    exp2 = 1 - kBias - Traits::kMantissaBits;
  } else {
    significand |= uint64_t{1} << Traits::kMantissaBits;
    exp2 = exponent_field - kBias - Traits::kMantissaBits;
  }
  int zeros = __builtin_ctzll(significand);
  significand >>= zeros;
  exp2 += zeros;

  BigUint big(significand);
  int exp = 0;
  if (exp2 >= 0) {
    big.ShiftLeft(exp2);
  } else {
    big.MulPow5(-exp2);  // N / 2**k == N * 5**k / 10**k
    exp = exp2;
  }
  int bit_length = big.BitLength();
  return ExactDecimal{big.TakeDecimal(), exp, bit_length};
}

void StripTrailingZeros(Digits& d) {
  size_t keep = d.digits.find_last_not_of('0') + 1;
  d.exp += static_cast<int>(d.digits.size() - keep);
  d.digits.resize(keep);
}

// The digits APFloat::toString keeps for `precision` significant digits.
Digits ApFloatDigits(const ExactDecimal& exact, int precision) {
  // Step 1: floor division by a power of ten chosen from bit counts (can truncate).
  const int bits_needed = (precision * 196 + 58) / 59;
  int removable = 0;
  if (exact.bit_length > bits_needed) removable = (exact.bit_length - bits_needed) * 59 / 196;
  Digits out{exact.digits.substr(0, exact.digits.size() - static_cast<size_t>(removable)),
             exact.exp + removable};
  StripTrailingZeros(out);
  // Step 2: round half-up on the first dropped digit.
  const size_t keep = static_cast<size_t>(precision);
  if (out.digits.size() > keep) {
    bool round_up = out.digits[keep] >= '5';
    out.exp += static_cast<int>(out.digits.size() - keep);
    out.digits.resize(keep);
    if (round_up) {
      size_t i = keep;
      while (i > 0 && out.digits[i - 1] == '9') out.digits[--i] = '0';
      if (i == 0) {
        out.digits.insert(out.digits.begin(), '1');
      } else {
        ++out.digits[i - 1];
      }
    }
    StripTrailingZeros(out);
  }
  return out;
}

void AppendExponent(std::string& out, int exp10, size_t min_digits) {
  out += exp10 < 0 ? '-' : '+';
  std::string magnitude = std::to_string(exp10 < 0 ? -exp10 : exp10);
  if (magnitude.size() < min_digits) out.append(min_digits - magnitude.size(), '0');
  out += magnitude;
}

// MLIR's first attempt: 6 significant digits, zero-padded to 6 decimals, `e`, 2+ digit
// exponent.
std::string ShortForm(const ExactDecimal& exact, bool negative) {
  constexpr size_t kPrecision = 6;
  std::string out = negative ? "-" : "";
  Digits d = ApFloatDigits(exact, static_cast<int>(kPrecision));
  int exp10 = d.exp + static_cast<int>(d.digits.size()) - 1;
  out += d.digits[0];
  out += '.';
  out.append(d.digits, 1, std::string::npos);
  out.append(kPrecision + 1 - d.digits.size(), '0');
  out += 'e';
  AppendExponent(out, exp10, 2);
  return out;
}

// APFloat::toString with its defaults: 2 + precision*59/196 digits, at most 3 padding zeros.
std::string NaturalForm(const ExactDecimal& exact, int precision_bits, bool negative) {
  constexpr int kMaxPadding = 3;
  const int precision = 2 + precision_bits * 59 / 196;
  Digits d = ApFloatDigits(exact, precision);
  const int count = static_cast<int>(d.digits.size());
  const int msd = d.exp + count - 1;
  bool scientific;
  if (d.exp >= 0) {
    scientific = d.exp > kMaxPadding || count + d.exp > precision;
  } else {
    scientific = msd < 0 && -msd > kMaxPadding;
  }
  std::string out = negative ? "-" : "";
  if (scientific) {
    out += d.digits[0];
    out += '.';
    if (count == 1) {
      out += '0';
    } else {
      out.append(d.digits, 1, std::string::npos);
    }
    out += 'E';
    AppendExponent(out, msd, 1);
  } else if (d.exp >= 0) {
    out += d.digits;
    out.append(static_cast<size_t>(d.exp), '0');
  } else if (count + d.exp > 0) {
    const size_t whole = static_cast<size_t>(count + d.exp);
    out.append(d.digits, 0, whole);
    out += '.';
    out.append(d.digits, whole, std::string::npos);
  } else {
    out += "0.";
    out.append(static_cast<size_t>(-(count + d.exp)), '0');
    out += d.digits;
  }
  return out;
}

template <typename T>
std::string FormatFloat(T value) {
  using Bits = typename FloatTraits<T>::Bits;
  Bits bits;
  std::memcpy(&bits, &value, sizeof bits);
  const bool negative = (bits >> (8 * sizeof(Bits) - 1)) != 0;
  const Bits exponent_mask = ((Bits{1} << FloatTraits<T>::kExponentBits) - 1)
                             << FloatTraits<T>::kMantissaBits;
  if ((bits & exponent_mask) != exponent_mask) {  // finite
    if (static_cast<Bits>(bits << 1) == 0) return negative ? "-0.000000e+00" : "0.000000e+00";
    const ExactDecimal exact = ToExactDecimal<T>(bits);
    std::string shortest = ShortForm(exact, negative);
    T parsed{};
    auto result = std::from_chars(shortest.data(), shortest.data() + shortest.size(), parsed);
    Bits parsed_bits;
    std::memcpy(&parsed_bits, &parsed, sizeof parsed_bits);
    if (result.ec == std::errc() && parsed_bits == bits) return shortest;
    std::string natural = NaturalForm(exact, FloatTraits<T>::kPrecision, negative);
    if (natural.find('.') != std::string::npos) return natural;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(bits));
  return buf;
}

template <typename T>
py::list FormatArray(const py::array& arr) {
  auto view = arr.unchecked<T, 1>();
  std::vector<T> values(static_cast<size_t>(view.shape(0)));
  for (py::ssize_t i = 0; i < view.shape(0); ++i) values[static_cast<size_t>(i)] = view(i);
  std::vector<std::string> texts(values.size());
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < values.size(); ++i) texts[i] = FormatFloat(values[i]);
  }
  py::list out(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(texts[i].data(),
                                              static_cast<Py_ssize_t>(texts[i].size()));
    if (s == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), s);
  }
  return out;
}

py::list FormatFloats(const py::array& arr) {
  if (arr.ndim() == 1 && py::isinstance<py::array_t<float>>(arr)) return FormatArray<float>(arr);
  if (arr.ndim() == 1 && py::isinstance<py::array_t<double>>(arr)) {
    return FormatArray<double>(arr);
  }
  throw py::type_error(py::str("expected a 1-D float32 or float64 array, got {} {}")
                           .format(arr.attr("dtype"), arr.attr("shape"))
                           .cast<std::string>());
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "C++ hot paths for dense literals (twins of stablehlo.text.literals).";
  m.def("decode_hex", &DecodeHex, py::arg("digits"),
        "Hex digits (either case, no 0x) -> bytes; ValueError names the first bad offset.");
  m.def("encode_hex", &EncodeHex, py::arg("data"),
        "Bytes (any C-contiguous buffer) -> uppercase hex digits, no prefix.");
  m.def("format_floats", &FormatFloats, py::arg("arr"),
        "A 1-D float32/float64 array -> MLIR's text for each element.");
}
