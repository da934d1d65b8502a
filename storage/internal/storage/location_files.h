#pragma once
// The files of a location (LocationFiles, location_driver.h) for dcpp's own readers, which read
// through RandomAccessData.

#include "format/file_io.h"

#include <dcpp/storage/location_driver.h>

#include <memory>
#include <string>

namespace dcpp::detail {

/// The files of `location`, through its scheme's driver.
inline std::unique_ptr<LocationFiles> open_location_files(const Location& location) {
  return location_driver(location)->open_files(location);
}

/// `files`' file `name` as RandomAccessData; null when there is none of that name.
std::unique_ptr<RandomAccessData> open_random_access(LocationFiles& files, const std::string& name);

}  // namespace dcpp::detail
