#pragma once
// Reading the items of DCP data files, wherever the files are kept: what the file system and S3
// readers share. A driver finds the data files and their bytes (RandomAccessData); this reads the
// items `.metadata` places in them, in every layout PyTorch 2.14 writes, checked against dcpp's
// checksum file when there is one.

#include "format/checksum_file.h"
#include "format/file_io.h"
#include "format/item_codec.h"
#include "format/transform_descriptors.h"

#include <dcpp/format/metadata.h>
#include <dcpp/planner/load_planner.h>
#include <dcpp/planner/plan.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Throws CheckpointError (kCorrupt) when `name`, a data file `.metadata` names, is not a plain
/// relative path inside the checkpoint at `location` (empty, absolute, "." or ".." parts, NUL).
void check_data_file_name(const std::string& name, const std::string& location);

class DcpItemReader {
 public:
  struct Options {
    bool verify_checksums = true;
    uint64_t max_decompressed_value_size = uint64_t{1} << 30;
  };

  /// `location` names the checkpoint in messages (a directory, an s3:// URL).
  DcpItemReader(std::string location, Options options)
      : location_(std::move(location)), options_(options) {}

  /// The item checksums of the save being read (from its checksum file, named `checksum_file`
  /// in messages), or none.
  void set_checksums(std::optional<ItemChecksumIndex> checksums, std::string checksum_file);
  /// Indexes `metadata`, which must outlive the following reads. Checks every data file name.
  void set_up(const Metadata& metadata);

  /// The data file `.metadata` names for the item.
  const std::string& data_file_of(const ReadItem& item) const;
  /// Reads every item of `plan`, the data files `thread_count` at a time: `read_file(name, items)`
  /// for each file (it opens the file, then calls read_file below). Throws what one threw.
  void read_plan(const LoadPlan& plan, int thread_count,
                 const std::function<void(const std::string& name,
                                          std::vector<const ReadItem*> items)>& read_file) const;
  /// Reads `items`, all in data file `name` whose bytes are `data` (`data_name` in messages: its
  /// path or URL), into the planner: tensor boxes through resolve_tensor and commit_tensor,
  /// values through load_bytes. Items are read in file order; a file too short for any of them
  /// fails before one is read.
  void read_file(const RandomAccessData& data, const std::string& name,
                 const std::string& data_name, std::vector<const ReadItem*> items,
                 LoadPlanner& planner) const;

 private:
  struct Chunk {
    const TensorStorageMetadata* tensor;
    const ChunkStorageMetadata* chunk;
  };

  const StorageInfo& storage_info(const MetadataIndex& index) const;
  void read_zstd_item(const RandomAccessData& data, const std::string& name,
                      const std::string& data_name, const ReadItem& item, const StorageInfo& info,
                      int layers, LoadPlanner& planner) const;
  const ItemChecksum* item_checksum(const std::string& file, const StorageInfo& info,
                                    const std::string& where) const;
  Chunk find_chunk(const ReadItem& item, const std::string& where) const;
  static TensorReadRequest tensor_request(const ReadItem& item, const Chunk& chunk,
                                          LoadPlanner& planner);
  void read_tensor(const ReadItem& item, const ByteSource& source, LoadPlanner& planner,
                   bool verify, const ItemChecksum* expected) const;

  std::string location_;
  Options options_;
  std::map<MetadataIndex, const StorageInfo*> storage_;
  std::map<std::string, const TensorStorageMetadata*> tensors_;
  // The stream transforms of the items that have any.
  std::map<MetadataIndex, ItemTransforms> transforms_;
  std::optional<ItemChecksumIndex> checksums_;
  std::string checksum_file_ = kChecksumFileName;  // for messages
};

}  // namespace dcpp::detail
