#pragma once
// A StorageReader that reads its checkpoint's Metadata once, for commands that load from one
// checkpoint in several passes (inspect: values, then tensor stats; a Hugging Face source: one
// tensor at a time).

#include <dcpp/format/metadata.h>
#include <dcpp/storage/storage_reader.h>

#include <memory>

namespace dcpp::tools {

class CachedMetadataReader final : public StorageReader {
 public:
  /// Reads `reader`'s Metadata now (throwing what it throws).
  explicit CachedMetadataReader(std::unique_ptr<StorageReader> reader)
      : reader_(std::move(reader)), metadata_(reader_->read_metadata()) {}

  Metadata read_metadata() override { return metadata_; }
  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override {
    reader_->set_up(metadata, rank, is_coordinator);
  }
  void read_data(const LoadPlan& plan, LoadPlanner& planner) override {
    reader_->read_data(plan, planner);
  }
  const Metadata& metadata() const { return metadata_; }

 private:
  std::unique_ptr<StorageReader> reader_;
  Metadata metadata_;
};

}  // namespace dcpp::tools
