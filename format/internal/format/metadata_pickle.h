#pragma once
// The `.metadata` file: `Metadata` as a pickle Python's `pickle.load` reads into DCP's own classes.

#include <dcpp/format/metadata.h>

#include <string>
#include <string_view>

namespace dcpp::detail {

/// Pickles `metadata` (protocol 4) as DCP does: each class as STACK_GLOBAL + EMPTY_TUPLE + NEWOBJ +
/// state + BUILD, torch.Size as REDUCE(torch.Size, (tuple,)), dtypes as bare globals.
std::string encode_metadata(const Metadata& metadata);

/// Unpickles a `.metadata` written by PyTorch 2.x (any protocol 2 to 5) or by dcpp. Only DCP's
/// globals are accepted (old `torch.distributed._shard` locations included); nothing is called.
/// Throws CheckpointError naming `source` and what is wrong: truncation, a foreign global, a
/// missing or mistyped field, an unknown dtype.
Metadata decode_metadata(std::string_view bytes, const std::string& source);

}  // namespace dcpp::detail
