#pragma once
// The options structs' own `s3` fields (SaveOptions, LoadOptions, AsyncCheckpointerOptions), kept
// for locations given as plain strings: a Location's S3 options win.

#include <dcpp/storage/location.h>

namespace dcpp::detail {

/// `location`, given `s3` when it is an s3:// location without S3 options of its own.
inline Location with_default_s3(Location location, const S3Options& s3) {
  if (location.scheme() == "s3" && !location.s3()) location.with_s3(s3);
  return location;
}

}  // namespace dcpp::detail
