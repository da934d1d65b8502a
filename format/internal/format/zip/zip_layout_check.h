#pragma once
// The layout check of a `torch.save` archive: every byte outside the payloads where, and what,
// PyTorch's writer puts it. What catches damage the CRC-32s cannot see (zip's CRC-32s cover
// payloads only) in checkpoints written without dcpp's checksum file.

#include "format/zip/zip_blob_reader.h"

namespace dcpp::detail {

/// Checks, beyond what ZipBlobReader's constructor checks, that the archive is laid out as miniz
/// writes it for torch.save (zip_format.h), in any PyTorch version that writes zip archives:
/// - the records lie back to back from the archive's first byte, in central directory order, and
///   the central directory, the zip64 end record and locator (when present) and the end record
///   follow the last one with nothing between and nothing after;
/// - each local header agrees with its central directory entry: version needed, flags, method,
///   time, date, and the CRC-32 and sizes (or the zeros that a data descriptor stands in for);
/// - extra fields are well formed; a zip64 field agrees with the sizes and offset; the "FB"
///   alignment field holds only 'Z' bytes; no other extra fields;
/// - each data descriptor agrees with the central directory;
/// - the fields miniz always writes alike have those values: version made by 0, no comments,
///   internal and external attributes 0, one disk; in the zip64 end record, made by 0x031e and
///   needed 45.
/// Reads only headers, descriptors and the directory, never a payload (the record CRC-32s cover
/// those). Throws CheckpointError naming `zip.source().describe()` and the first difference.
void check_pytorch_layout(const ZipBlobReader& zip);

}  // namespace dcpp::detail
