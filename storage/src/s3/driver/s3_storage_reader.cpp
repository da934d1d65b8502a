// The S3 reader: `.metadata` (checked against `.checksums` when there is one) by GET, each data
// object's size by HEAD, and only the bytes the plan needs by ranged GETs (dcp_item_reader.h).

#include <dcpp/storage/s3_storage.h>

#include "dcp_item_lengths.h"
#include "dcp_item_reader.h"
#include "format/checksum_file.h"
#include "format/metadata_pickle.h"
#include "parallel_for.h"
#include "s3/config/s3_config.h"
#include "s3/driver/s3_location_url.h"
#include "s3/driver/s3_object.h"
#include "s3/protocol/s3_client.h"

#include <dcpp/core/checkpoint_error.h>

#include <atomic>
#include <map>
#include <optional>

namespace dcpp {

// Hidden: as a nested class of an exported class, its members would otherwise be exported too.
class [[gnu::visibility("hidden")]] S3StorageReader::Impl {
 public:
  Impl(const std::string& url, S3ReaderOptions options)
      : url_(detail::parse_s3_url(url)),
        url_text_(url_.text()),
        options_(std::move(options)),
        items_(url_text_, {options_.verify_checksums, options_.max_decompressed_value_size}) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "S3ReaderOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
  }

  // The credentials and the endpoint are resolved here, not in the constructor: read_metadata is
  // part of the load's first step, whose outcome every rank learns, so a rank without
  // credentials fails the load on every rank instead of leaving the others waiting in it.
  Metadata read_metadata() {
    if (!client_) client_.emplace(detail::resolve_s3_config(options_.s3, url_.bucket));
    const std::string metadata_key = url_.prefix + ".metadata";
    std::optional<std::string> bytes = client().get_object_if_exists(metadata_key);
    if (!bytes) {
      client().check_bucket();  // a missing bucket or bad credentials, named as such
      throw CheckpointError(ErrorKind::kNotFound,
                            "no complete checkpoint at " + url_text_ +
                                ": .metadata is missing (nothing was saved there, or a save to "
                                "it did not finish)");
    }
    std::optional<std::string> checksum_file;
    if (options_.verify_checksums) {
      checksum_file = client().get_object_if_exists(url_.prefix + detail::kChecksumFileName);
    }
    Metadata metadata = adopt(*bytes, checksum_file);
    shared_ = encode_shared(*bytes, checksum_file);
    return metadata;
  }

  std::optional<std::string> metadata_to_share() const { return shared_; }

  // Another rank's read_metadata, adopted: the same checks, no request.
  Metadata read_shared_metadata(const std::string& shared) {
    if (!client_) client_.emplace(detail::resolve_s3_config(options_.s3, url_.bucket));
    const auto [bytes, checksum_file] = decode_shared(shared);
    return adopt(bytes, checksum_file);
  }

  void set_up(const Metadata& metadata) { items_.set_up(metadata); }

  void read_data(const LoadPlan& plan, LoadPlanner& planner) {
    items_.read_plan(plan, options_.thread_count,
                     [&](const std::string& name, std::vector<const ReadItem*> items) {
                       const std::string key = url_.prefix + name;
                       const std::optional<uint64_t> size = client().head_object(key);
                       if (!size) {
                         throw CheckpointError(ErrorKind::kNotFound,
                                               "data file " + client().url_of(key) +
                                                   ", which .metadata names, is missing; the "
                                                   "checkpoint is incomplete: load an earlier "
                                                   "checkpoint");
                       }
                       const detail::S3Object object(client(), key, *size, bytes_read_);
                       items_.read_file(object, name, client().url_of(key), std::move(items),
                                        planner);
                     });
  }

  uint64_t bytes_read() const { return bytes_read_.load(); }
  const std::string& url() const { return url_text_; }

 private:
  // `.metadata`'s bytes, checked against the checksum file's (when there is one and checksums
  // are verified), decoded.
  Metadata adopt(const std::string& bytes, const std::optional<std::string>& checksum_file) {
    const std::string metadata_key = url_.prefix + ".metadata";
    std::optional<detail::ItemChecksumIndex> checksums;
    const std::string checksum_key = url_.prefix + detail::kChecksumFileName;
    if (options_.verify_checksums) {
      if (const std::optional<std::string>& file = checksum_file) {
        const auto saves = detail::decode_checksum_file(*file, client().url_of(checksum_key));
        const detail::SaveChecksums* save = detail::find_save(saves, bytes);
        if (save == nullptr) {
          throw CheckpointError(
              ErrorKind::kCorrupt,
              detail::metadata_mismatch_message(saves, bytes, client().url_of(metadata_key),
                                                client().url_of(checksum_key)));
        }
        if (save->items) checksums.emplace(*save->items);
      }
    }
    items_.set_checksums(std::move(checksums), client().url_of(checksum_key));
    Metadata metadata = detail::decode_metadata(bytes, client().url_of(metadata_key));
    detail::check_item_lengths(metadata, client().url_of(metadata_key));
    for (const auto& [index, info] : metadata.storage_data) {
      detail::check_data_file_name(info.relative_path, url_text_);
    }
    return metadata;
  }

  // What read_metadata read, for the other ranks: `.metadata`'s size (8 bytes, little-endian),
  // its bytes, then 1 and the checksum file, or 0.
  static std::string encode_shared(const std::string& bytes,
                                   const std::optional<std::string>& checksum_file) {
    std::string shared(8, '\0');
    for (int i = 0; i < 8; ++i) shared[i] = static_cast<char>((bytes.size() >> (8 * i)) & 0xff);
    shared += bytes;
    shared += checksum_file ? '\1' : '\0';
    if (checksum_file) shared += *checksum_file;
    return shared;
  }

  std::pair<std::string, std::optional<std::string>> decode_shared(const std::string& shared) {
    uint64_t size = 0;
    for (int i = 0; i < 8 && i < static_cast<int>(shared.size()); ++i) {
      size |= static_cast<uint64_t>(static_cast<unsigned char>(shared[i])) << (8 * i);
    }
    if (shared.size() < 9 || size > shared.size() - 9) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "the metadata of " + url_text_ +
                                " that the coordinator shared is malformed; every rank must run "
                                "the same dcpp build");
    }
    std::string bytes = shared.substr(8, size);
    std::optional<std::string> checksum_file;
    if (shared[8 + size] != '\0') checksum_file = shared.substr(9 + size);
    return {std::move(bytes), std::move(checksum_file)};
  }

  detail::S3Client& client() {
    if (!client_) {
      throw CheckpointError(ErrorKind::kUsage, "S3StorageReader for " + url_text_ +
                                                   ": read_metadata was not called before it "
                                                   "was used");
    }
    return *client_;
  }

  detail::S3Url url_;
  std::string url_text_;
  S3ReaderOptions options_;
  std::optional<detail::S3Client> client_;  // from read_metadata on
  detail::DcpItemReader items_;
  std::optional<std::string> shared_;    // what read_metadata read, for metadata_to_share
  std::atomic<uint64_t> bytes_read_{0};  // by read_data's threads
};

S3StorageReader::S3StorageReader(std::string url, S3ReaderOptions options)
    : impl_(std::make_unique<Impl>(url, std::move(options))) {}
S3StorageReader::~S3StorageReader() = default;

Metadata S3StorageReader::read_metadata() { return impl_->read_metadata(); }

std::optional<std::string> S3StorageReader::metadata_to_share() {
  return impl_->metadata_to_share();
}

Metadata S3StorageReader::read_shared_metadata(const std::string& shared) {
  return impl_->read_shared_metadata(shared);
}

void S3StorageReader::set_up(const Metadata& metadata, int, bool) { impl_->set_up(metadata); }

void S3StorageReader::read_data(const LoadPlan& plan, LoadPlanner& planner) {
  impl_->read_data(plan, planner);
}

bool S3StorageReader::is_shared_storage() const { return true; }
uint64_t S3StorageReader::bytes_read() const { return impl_->bytes_read(); }
const std::string& S3StorageReader::url() const { return impl_->url(); }

}  // namespace dcpp
