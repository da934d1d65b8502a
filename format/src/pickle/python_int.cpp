#include "format/pickle/python_int.h"

#include "format/pickle/pickle_reader.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dcpp::detail {

namespace {

using Limbs = std::vector<uint32_t>;  // a magnitude, least significant 32 bits first

// Two's complement negation of little-endian `bytes` in place.
void negate(std::string& bytes) {
  unsigned carry = 1;
  for (char& c : bytes) {
    const unsigned sum = static_cast<unsigned char>(~static_cast<unsigned char>(c)) + carry;
    c = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
}

bool is_zero(const Limbs& limbs) {
  return std::all_of(limbs.begin(), limbs.end(), [](uint32_t limb) { return limb == 0; });
}

// Divides `limbs` by `divisor` in place; returns the remainder.
uint32_t divide(Limbs& limbs, uint32_t divisor) {
  uint64_t remainder = 0;
  for (std::size_t i = limbs.size(); i-- > 0;) {
    const uint64_t current = (remainder << 32) | limbs[i];
    limbs[i] = static_cast<uint32_t>(current / divisor);
    remainder = current % divisor;
  }
  return static_cast<uint32_t>(remainder);
}

// limbs = limbs * factor + addend.
void multiply_add(Limbs& limbs, uint32_t factor, uint32_t addend) {
  uint64_t carry = addend;
  for (uint32_t& limb : limbs) {
    const uint64_t product = static_cast<uint64_t>(limb) * factor + carry;
    limb = static_cast<uint32_t>(product);
    carry = product >> 32;
  }
  if (carry != 0) limbs.push_back(static_cast<uint32_t>(carry));
}

}  // namespace

std::string decimal_from_twos_complement(std::string_view bytes) {
  std::string magnitude(bytes);
  const bool negative = !bytes.empty() && (static_cast<unsigned char>(bytes.back()) & 0x80) != 0;
  if (negative) negate(magnitude);
  Limbs limbs((magnitude.size() + 3) / 4, 0);
  for (std::size_t i = 0; i < magnitude.size(); ++i) {
    limbs[i / 4] |= static_cast<uint32_t>(static_cast<unsigned char>(magnitude[i]))
                    << (8 * (i % 4));
  }
  std::string digits;
  do {
    uint32_t chunk = divide(limbs, 1000000000);
    for (int i = 0; i < 9; ++i) {
      digits.push_back(static_cast<char>('0' + chunk % 10));
      chunk /= 10;
    }
  } while (!is_zero(limbs));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::string twos_complement_from_decimal(std::string_view digits) {
  const bool negative = !digits.empty() && digits.front() == '-';
  const std::string_view body = negative ? digits.substr(1) : digits;
  if (body.empty() ||
      !std::all_of(body.begin(), body.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw CheckpointError(ErrorKind::kUsage, "'" + printable(digits.substr(0, 64)) +
                                                 "' is not an int in decimal digits");
  }
  // About 2.5 digits per byte: refuse what could not fit before doing quadratic work on it.
  if (body.size() > kMaxBigIntBytes * 5 / 2 + 8) {
    throw CheckpointError(ErrorKind::kUsage, "an int of " + std::to_string(body.size()) +
                                                 " digits is beyond what dcpp writes (" +
                                                 std::to_string(kMaxBigIntBytes) + " bytes)");
  }
  Limbs limbs{0};
  for (const char c : body) multiply_add(limbs, 10, static_cast<uint32_t>(c - '0'));
  std::string bytes;
  for (const uint32_t limb : limbs) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((limb >> (8 * i)) & 0xff));
  }
  bytes.push_back('\0');  // room for the sign bit
  if (negative) negate(bytes);
  // The shortest form: drop a top byte that only repeats the sign of the one below it.
  while (bytes.size() > 1) {
    const auto top = static_cast<unsigned char>(bytes[bytes.size() - 1]);
    const bool below_negative = (static_cast<unsigned char>(bytes[bytes.size() - 2]) & 0x80) != 0;
    if ((top == 0x00 && !below_negative) || (top == 0xff && below_negative)) {
      bytes.pop_back();
    } else {
      break;
    }
  }
  if (bytes.size() > kMaxBigIntBytes) {
    throw CheckpointError(ErrorKind::kUsage, "an int of " + std::to_string(bytes.size()) +
                                                 " bytes is beyond what dcpp writes (" +
                                                 std::to_string(kMaxBigIntBytes) + ")");
  }
  return bytes;
}

}  // namespace dcpp::detail
