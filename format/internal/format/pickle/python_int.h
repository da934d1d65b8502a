#pragma once
// Python ints beyond int64, between the two forms dcpp meets them in: a pickle's little-endian
// two's complement bytes (LONG1/LONG4) and the decimal digits of a "builtins.int" value
// (<dcpp/state_dict/python_object.h>).

#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>

namespace dcpp::detail {

/// The decimal digits ("-123...") of the int whose little-endian two's complement bytes are
/// `bytes` (empty: 0). Quadratic in the length: callers bound it (kMaxBigIntBytes).
std::string decimal_from_twos_complement(std::string_view bytes);

/// The shortest little-endian two's complement bytes of the int `digits` (an optional '-', then
/// one or more decimal digits), as Python's pickle `encode_long` writes them. Throws
/// CheckpointError (kUsage) for anything else, or an int of more than kMaxBigIntBytes bytes.
std::string twos_complement_from_decimal(std::string_view digits);

/// The value of the int `normal` (digits as decimal_from_twos_complement writes them): an int when
/// it fits int64, else a "builtins.int".
c10::IValue int_value_of_normal_digits(const std::string& normal);

}  // namespace dcpp::detail
