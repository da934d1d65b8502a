// The S3 writer's commit protocol. Every rank uploads its data files (`__<rank>_<n>.distcp`,
// s3_upload_sink.h), computing each item's CRC-32 as it writes it. Then the coordinator uploads
// the checksum file `.checksums`, then `.metadata`. A PUT makes an object appear whole or not at
// all, so `.metadata`, uploaded after every byte it points at, marks a complete checkpoint, as
// the rename does on a file system.
//
// Saving to a prefix that holds a checkpoint is refused unless `overwrite` is set; then the new
// data objects get names no existing object has (`__<rank>_<tag>_<n>.distcp`), the checksum file
// keeps the old `.metadata`'s entry (the old checkpoint stays loadable until its `.metadata` is
// replaced), and the old data objects are deleted after the new `.metadata` is in place.

#include <dcpp/storage/s3_storage.h>

#include "core/logging.h"
#include "dcp_item_writer.h"
#include "format/checksum_file.h"
#include "format/metadata_pickle.h"
#include "parallel_for.h"
#include "random_tag.h"
#include "s3/config/s3_config.h"
#include "s3/driver/s3_location_url.h"
#include "s3/driver/s3_upload_sink.h"
#include "s3/protocol/s3_client.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <optional>
#include <set>

namespace dcpp {

namespace {

constexpr const char* kMetadataObject = detail::kMetadataFileName;

}  // namespace

S3WriterOptions S3WriterOptions::from(const FileSystemWriterOptions& layout, S3Options s3) {
  S3WriterOptions options;
  options.s3 = std::move(s3);
  options.thread_count = layout.thread_count;
  options.single_file_per_rank = layout.single_file_per_rank;
  options.overwrite = layout.overwrite;
  options.checksum_file = layout.checksum_file;
  options.compression = layout.compression;
  options.compression_level = layout.compression_level;
  return options;
}

// Hidden: as a nested class of an exported class, its members would otherwise be exported too.
class [[gnu::visibility("hidden")]] S3StorageWriter::Impl {
 public:
  Impl(const std::string& url, S3WriterOptions options)
      : url_(detail::parse_s3_url(url)), url_text_(url_.text()), options_(std::move(options)) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "S3WriterOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
    if (options_.compression == Compression::kZstd &&
        (options_.compression_level < 1 || options_.compression_level > 19)) {
      throw CheckpointError(ErrorKind::kUsage,
                            "S3WriterOptions::compression_level must be 1 to 19 for zstd, not " +
                                std::to_string(options_.compression_level));
    }
  }

  // The credentials and the endpoint are resolved here, not in the constructor: set_up is part of
  // the save's first step, whose outcome every rank learns, so a rank without credentials fails
  // the save on every rank instead of leaving the others waiting in it.
  void set_up() {
    if (!client_) client_.emplace(detail::resolve_s3_config(options_.s3, url_.bucket));
    client_->check_bucket();
    if (!options_.overwrite && holds_checkpoint()) {
      throw CheckpointError(ErrorKind::kUsage,
                            url_text_ +
                                " already holds a checkpoint; save to a new prefix, or set "
                                "S3WriterOptions::overwrite (FileSystemWriterOptions::overwrite "
                                "for a save to an s3:// path) to replace it");
    }
  }

  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) {
    detail::assign_file_prefixes(plans, holds_checkpoint() ? detail::random_tag(8) + "_" : "");
    return plans;
  }

  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) {
    // The rank's requests in flight, shared among the files it uploads at once.
    const std::size_t files = options_.single_file_per_rank
                                  ? static_cast<std::size_t>(std::max(1, options_.thread_count))
                                  : std::max<std::size_t>(1, plan.items.size());
    const int parts_in_flight =
        std::max(1, client().config().concurrency /
                        static_cast<int>(std::min<std::size_t>(options_.thread_count, files)));
    return detail::write_data_files(
        plan, options_.single_file_per_rank, options_.thread_count,
        [&](const std::string& name, const std::vector<const WriteItem*>& items) {
          detail::S3UploadSink sink(client(), url_.prefix + name, parts_in_flight);
          std::vector<WriteResult> written = detail::write_data_file(
              sink, name, items, planner, options_.compression, options_.compression_level);
          sink.finish();
          return written;
        });
  }

  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) {
    if (!metadata.storage_meta) {
      metadata.storage_meta = StorageMeta{url_text_, detail::random_tag(8), "", {}};
    }
    const std::optional<std::string> replaced = client().get_object_if_exists(key(kMetadataObject));
    std::set<std::string> referenced;
    const std::string bytes = detail::encode_metadata_with_results(metadata, results, &referenced);
    if (options_.checksum_file) {
      std::optional<detail::SaveChecksums> replaced_entry;
      if (replaced) {
        const std::string checksum_key = key(detail::kChecksumFileName);
        replaced_entry = detail::replaced_save_checksums(
            *replaced, client().get_object_if_exists(checksum_key), client().url_of(checksum_key));
      }
      client().put_object(key(detail::kChecksumFileName),
                          detail::checksum_file_of(bytes, results, replaced_entry));
    }
    client().put_object(key(kMetadataObject), bytes);
    if (replaced) {
      delete_unreferenced_data_objects(referenced);
    }
  }

  const std::string& url() const { return url_text_; }
  const S3WriterOptions& options() const { return options_; }

 private:
  std::string key(const std::string& name) const { return url_.prefix + name; }

  detail::S3Client& client() {
    if (!client_) {
      throw CheckpointError(ErrorKind::kUsage, "S3StorageWriter for " + url_text_ +
                                                   ": set_up was not called before it was used");
    }
    return *client_;
  }

  bool holds_checkpoint() { return client().head_object(key(kMetadataObject)).has_value(); }

  // After a replacing commit: the data objects directly under the prefix with DCP's names
  // (`__*.distcp`) that the new `.metadata` does not reference; nothing else is touched.
  void delete_unreferenced_data_objects(const std::set<std::string>& referenced) {
    try {
      for (const detail::S3ObjectInfo& object : client().list_objects(url_.prefix)) {
        const std::string name = object.key.substr(url_.prefix.size());
        if (detail::is_data_file_name(name) && referenced.count(name) == 0) {
          client().delete_object(object.key);
        }
      }
    } catch (const CheckpointError& error) {
      detail::logger().warn("cannot delete the replaced checkpoint's data objects under {}: {}",
                            url_text_, error.what());
    }
  }

  detail::S3Url url_;
  std::string url_text_;
  S3WriterOptions options_;
  std::optional<detail::S3Client> client_;  // from set_up on
};

S3StorageWriter::S3StorageWriter(std::string url, S3WriterOptions options)
    : impl_(std::make_unique<Impl>(url, std::move(options))) {}
S3StorageWriter::~S3StorageWriter() = default;

void S3StorageWriter::set_up(int, bool) { impl_->set_up(); }

std::vector<SavePlan> S3StorageWriter::prepare_global_plan(std::vector<SavePlan> plans) {
  return impl_->prepare_global_plan(std::move(plans));
}

std::vector<WriteResult> S3StorageWriter::write_data(const SavePlan& plan, SavePlanner& planner) {
  return impl_->write_data(plan, planner);
}

void S3StorageWriter::finish(Metadata metadata,
                             const std::vector<std::vector<WriteResult>>& results) {
  impl_->finish(std::move(metadata), results);
}

const std::string& S3StorageWriter::url() const { return impl_->url(); }
const S3WriterOptions& S3StorageWriter::options() const { return impl_->options(); }

}  // namespace dcpp
