#include "dcp_layout.h"

#include "storage/dcp_file_names.h"

namespace dcpp::detail {

bool DcpLayout::recognizes(const Location&, LocationFiles& files) const {
  for (const std::string& name : files.list()) {
    if (name == kMetadataFileName || parse_rank_metadata_file_name(name)) return true;
  }
  return false;
}

std::unique_ptr<StorageReader> DcpLayout::make_reader(
    const Location& location, const FileSystemReaderOptions& reading) const {
  return location_driver(location)->make_reader(location, reading);
}

}  // namespace dcpp::detail
