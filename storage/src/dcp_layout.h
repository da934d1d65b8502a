#pragma once
// PyTorch DCP's layout ("pytorch-dcp"): `.metadata` (or, saved without collectives, every rank's
// `__<rank>.metadata`) and the data files, at a location of any driver.

#include <dcpp/storage/checkpoint_layout.h>

namespace dcpp::detail {

class DcpLayout final : public CheckpointLayout {
 public:
  std::string name() const override { return kDcpLayout; }
  bool recognizes(const Location& location, LocationFiles& files) const override;
  std::unique_ptr<StorageReader> make_reader(const Location& location,
                                             const FileSystemReaderOptions& reading) const override;
  /// `dcp_files` itself.
  std::unique_ptr<StorageWriter> make_writer(
      const Location& location, std::unique_ptr<StorageWriter> dcp_files) const override {
    return dcp_files;
  }
};

}  // namespace dcpp::detail
