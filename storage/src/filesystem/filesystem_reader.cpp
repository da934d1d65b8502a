// The file system reader. `.metadata` is decoded by dcpp's restricted unpickler; every file it
// names must lie inside the checkpoint directory, and every item must lie inside its file, before
// any data is read. Items of one data file are read by one thread, in file order.
//
// With checksums verified (the default) and a checksum file present (checksum_file.h), `.metadata`
// must match its CRC-32 before it is decoded, and every item read in full must match its CRC-32;
// without a checksum file, items get the format's own checks (item_codec.h).
//
// Items come in the layouts PyTorch 2.14 writes: a `torch.save` archive; the same in zstd frames
// (`transform_descriptors` ["stream.zstd/1"]; decompressed into memory, bounded by what
// `.metadata` lets the item hold, zstd_stream.h); a tensor in the file's safetensors blob (DCP's
// SAFETENSORS format, told apart by its first bytes; its header parsed once per blob and checked
// against `.metadata`, safetensors_item.h).
//
// Without `.metadata`, a checkpoint saved without collectives (`__<r>.metadata` per rank) is read
// as the merge of its ranks' metadata, each checked against its `__<r>.checksums`
// (per_rank_metadata.h).

#include <dcpp/storage/filesystem_reader.h>

#include "core/huge_pages.h"
#include "dcp_item_lengths.h"
#include "dcp_item_reader.h"
#include "format/checksum_file.h"
#include "format/file_io.h"
#include "format/metadata_pickle.h"
#include "parallel_for.h"
#include "storage/per_rank_metadata.h"

#include <dcpp/core/checkpoint_error.h>

#include <sys/vfs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

namespace dcpp {

namespace {

namespace fs = std::filesystem;

// statfs() f_type values of file systems whose bytes come over a network.
constexpr int64_t kNetworkFileSystems[] = {
    0x6969,      // NFS
    0x517B,      // SMB
    0xFF534D42,  // CIFS
    0xFE534D42,  // SMB2
    0x0BD00BD0,  // Lustre
    0x47504653,  // GPFS (IBM Storage Scale)
    0x00C36400,  // CephFS
    0x19830326,  // BeeGFS
    0x65735546,  // FUSE (GlusterFS, sshfs, s3fs, ...)
    0x01021997,  // 9p
    0x5346414F,  // AFS
};

}  // namespace

// Hidden: as a nested class of an exported class, its members would otherwise be exported too.
class [[gnu::visibility("hidden")]] FileSystemReader::Impl {
 public:
  Impl(fs::path directory, FileSystemReaderOptions options)
      : directory_(std::move(directory)),
        options_(options),
        items_(directory_.string(),
               {options.verify_checksums, options.max_decompressed_value_size}) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "FileSystemReaderOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
  }

  Metadata read_metadata() {
    const std::optional<MetadataSelection> selection = std::exchange(selection_, std::nullopt);
    const fs::path path = directory_ / ".metadata";
    if (!fs::exists(path)) {
      const std::vector<int> ranks = detail::find_rank_metadata_files(directory_);
      if (!ranks.empty()) {
        return read_per_rank_metadata(ranks);
      }
      throw CheckpointError(
          ErrorKind::kNotFound,
          "no complete checkpoint at " + directory_.string() +
              ": .metadata is missing, and so is __0.metadata (the directory does "
              "not exist, or a save into it did not finish)");
    }
    // Read whole into memory neither zeroed first nor faulted in 4 KiB at a time: at 1,024 ranks
    // the file is 133 MB, and every loading rank reads it.
    detail::File file(path, detail::File::Mode::kRead);
    const std::size_t size = file.size();
    const std::unique_ptr<char[]> buffer(new char[std::max<std::size_t>(size, 1)]);
    detail::advise_huge_pages(buffer.get(), size);
    file.read_exactly(0, buffer.get(), size);
    const std::string_view bytes(buffer.get(), size);
    // `.metadata` must match its checksum before it is decoded. Narrowed, the items' checksums
    // are indexed after the decode, for the items it kept only.
    std::optional<detail::ItemChecksumIndex> checksums;
    bool items_listed = false;
    if (options_.verify_checksums) {
      const auto save = selection ? detail::check_metadata_checksum(
                                        directory_, bytes, [](std::string_view, uint64_t) {
                                          return false;
                                        })
                                  : detail::check_metadata_checksum(directory_, bytes);
      items_listed = save && save->items;
      if (items_listed && !selection) checksums.emplace(*save->items);
    }
    detail::MetadataDecodeStats stats;
    Metadata metadata = detail::decode_metadata(bytes, path.string(), stats,
                                                selection ? &*selection : nullptr);
    if (items_listed && selection) checksums.emplace(checksums_of_kept_items(bytes, metadata));
    items_.set_checksums(std::move(checksums), (directory_ / detail::kChecksumFileName).string());
    detail::check_item_lengths(metadata, path.string());
    for (const auto& [index, info] : metadata.storage_data) {
      detail::check_data_file_name(info.relative_path, directory_.string());
    }
    return metadata;
  }

  void narrow_metadata(const MetadataSelection& selection) { selection_ = selection; }

  void set_up(const Metadata& metadata, int rank, bool is_coordinator) { items_.set_up(metadata); }

  void read_data(const LoadPlan& plan, LoadPlanner& planner) {
    items_.read_plan(plan, options_.thread_count,
                     [&](const std::string& name, std::vector<const ReadItem*> items) {
                       detail::File file(directory_ / name, detail::File::Mode::kRead);
                       file.count_reads_in(bytes_read_);
                       items_.read_file(file, name, file.path().string(), std::move(items),
                                        planner);
                     });
  }

  bool is_shared_storage() const {
    struct statfs info {};
    if (::statfs(directory_.c_str(), &info) != 0) {
      return false;
    }
    const auto type = static_cast<int64_t>(static_cast<uint32_t>(info.f_type));
    return std::find(std::begin(kNetworkFileSystems), std::end(kNetworkFileSystems), type) !=
           std::end(kNetworkFileSystems);
  }

  uint64_t bytes_read() const { return bytes_read_.load(); }

  const fs::path& directory() const { return directory_; }
  const FileSystemReaderOptions& options() const { return options_; }

 private:
  // A checkpoint saved without collectives: its ranks' metadata, merged.
  Metadata read_per_rank_metadata(const std::vector<int>& ranks) {
    detail::PerRankCheckpoint checkpoint =
        detail::read_per_rank_checkpoint(directory_, ranks, options_.verify_checksums);
    items_.set_checksums(std::move(checkpoint.checksums),
                         (directory_ / "__<rank>.checksums").string());
    for (const auto& [index, info] : checkpoint.merged.storage_data) {
      detail::check_data_file_name(info.relative_path, directory_.string());
    }
    return std::move(checkpoint.merged);
  }

  // The checksum file's items that `metadata` (narrowed) names, the checksum file checked again.
  std::vector<detail::ItemChecksum> checksums_of_kept_items(
      std::string_view metadata_bytes, const Metadata& metadata) {
    std::map<std::string, std::set<uint64_t>, std::less<>> kept;  // file -> item offsets
    for (const auto& [index, info] : metadata.storage_data) {
      kept[info.relative_path].insert(static_cast<uint64_t>(info.offset));
    }
    auto save = detail::check_metadata_checksum(
        directory_, metadata_bytes, [&](std::string_view file, uint64_t offset) {
          const auto in_file = kept.find(file);
          return in_file != kept.end() && in_file->second.count(offset) != 0;
        });
    if (!save || !save->items) {  // changed between the two reads
      throw CheckpointError(ErrorKind::kCorrupt,
                            (directory_ / detail::kChecksumFileName).string() +
                                " changed while it was read; load again");
    }
    return std::move(*save->items);
  }

  fs::path directory_;
  FileSystemReaderOptions options_;
  detail::DcpItemReader items_;
  std::optional<MetadataSelection> selection_;  // for the next read_metadata only
  mutable std::atomic<uint64_t> bytes_read_{0};  // by read_data's threads
};

FileSystemReader::FileSystemReader(std::filesystem::path directory, FileSystemReaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(directory), options)) {}
FileSystemReader::~FileSystemReader() = default;

Metadata FileSystemReader::read_metadata() { return impl_->read_metadata(); }

void FileSystemReader::narrow_metadata(const MetadataSelection& selection) {
  impl_->narrow_metadata(selection);
}

void FileSystemReader::set_up(const Metadata& metadata, int rank, bool is_coordinator) {
  impl_->set_up(metadata, rank, is_coordinator);
}

void FileSystemReader::read_data(const LoadPlan& plan, LoadPlanner& planner) {
  impl_->read_data(plan, planner);
}

bool FileSystemReader::is_shared_storage() const { return impl_->is_shared_storage(); }
uint64_t FileSystemReader::bytes_read() const { return impl_->bytes_read(); }

const std::filesystem::path& FileSystemReader::directory() const { return impl_->directory(); }
const FileSystemReaderOptions& FileSystemReader::options() const { return impl_->options(); }

}  // namespace dcpp
