#pragma once
// Checkpoints in an S3 or S3-compatible object store, in DCP's layout: the S3 storage driver.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/s3_options.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dcpp {

/// Whether `location` is an object store URL ("s3://bucket/prefix") rather than a directory.
DCPP_API bool is_s3_url(std::string_view location);

struct DCPP_API S3WriterOptions {
  /// The store, the credentials, retries, part size and requests in flight.
  S3Options s3;
  /// Data files this rank uploads at once (each its own object).
  int thread_count = 1;
  /// One data file per rank (per upload thread), or one per item.
  bool single_file_per_rank = true;
  /// Allow saving to a prefix that already holds a checkpoint: the old one stays loadable until
  /// the new `.metadata` replaces it; its data objects are deleted after. When false, such a save
  /// is refused with a CheckpointError.
  bool overwrite = false;
  /// Upload dcpp's checksum file `.checksums` before `.metadata` (docs/format.md).
  bool checksum_file = true;
  Compression compression = Compression::kNone;
  int compression_level = 3;

  /// The layout options of a file system save (thread count, files per rank, overwrite, checksum
  /// file, compression) for the same checkpoint in a store; `sync_files` has no meaning there.
  static S3WriterOptions from(const FileSystemWriterOptions& layout, S3Options s3);

  S3WriterOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  S3WriterOptions& with_thread_count(int value) {
    thread_count = value;
    return *this;
  }
  S3WriterOptions& with_single_file_per_rank(bool value) {
    single_file_per_rank = value;
    return *this;
  }
  S3WriterOptions& with_overwrite(bool value) {
    overwrite = value;
    return *this;
  }
  S3WriterOptions& with_checksum_file(bool value) {
    checksum_file = value;
    return *this;
  }
  S3WriterOptions& with_compression(Compression c, int level = 3) {
    compression = c;
    compression_level = level;
    return *this;
  }
};

/// Writes DCP's layout under `s3://bucket/prefix/`: each rank uploads its data files
/// (`__<rank>_<n>.distcp`), those larger than one part as multipart uploads whose parts go up
/// concurrently; then the coordinator uploads `.checksums`, then `.metadata`. An object store
/// has no rename: an object appears whole or not at all, so `.metadata`, uploaded last, is the
/// commit. A failed upload is aborted (its parts discarded) and nothing of the save is visible as
/// a checkpoint; a previous checkpoint under the prefix is untouched. Saves without collectives
/// are not supported (CheckpointError kUsage). Throws CheckpointError; see docs/storage.md.
///
/// The constructor parses the URL and checks the writer's own options only; the credentials,
/// endpoint and S3Options are resolved in set_up, the save's first step, so a rank without
/// credentials fails the save on every rank (naming itself) rather than before it.
class DCPP_API S3StorageWriter : public StorageWriter {
 public:
  explicit S3StorageWriter(std::string url, S3WriterOptions options = {});
  ~S3StorageWriter() override;
  S3StorageWriter(const S3StorageWriter&) = delete;
  S3StorageWriter& operator=(const S3StorageWriter&) = delete;

  /// Resolves the S3Options (credentials, endpoint; CheckpointError kUsage when there are none),
  /// checks that the bucket exists and the credentials reach it, and that the prefix holds no
  /// checkpoint unless `overwrite`.
  void set_up(int rank, bool is_coordinator) override;
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;

  /// "s3://bucket/prefix".
  const std::string& url() const;
  const S3WriterOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct DCPP_API S3ReaderOptions {
  S3Options s3;
  /// Data files this rank reads at once; each large read is split into ranged GETs of
  /// `s3.part_size` bytes, `s3.concurrency` at a time.
  int thread_count = 4;
  /// As FileSystemReaderOptions::verify_checksums.
  bool verify_checksums = true;
  /// As FileSystemReaderOptions::max_decompressed_value_size.
  uint64_t max_decompressed_value_size = uint64_t{1} << 30;

  S3ReaderOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  S3ReaderOptions& with_thread_count(int value) {
    thread_count = value;
    return *this;
  }
  S3ReaderOptions& with_verify_checksums(bool value) {
    verify_checksums = value;
    return *this;
  }
  S3ReaderOptions& with_max_decompressed_value_size(uint64_t value) {
    max_decompressed_value_size = value;
    return *this;
  }
};

/// Reads DCP's layout under `s3://bucket/prefix/`, as FileSystemReader reads a directory: every
/// item format PyTorch 2.14 writes, checked against dcpp's checksum file when there is one. Reads
/// use ranged GETs of the bytes the plan needs only, so a resharded load fetches what it needs
/// and no more. Checkpoints saved without collectives (`__<r>.metadata`) are not read. As the
/// writer's, the constructor resolves nothing: read_metadata, the load's first step, does.
class DCPP_API S3StorageReader : public StorageReader {
 public:
  explicit S3StorageReader(std::string url, S3ReaderOptions options = {});
  ~S3StorageReader() override;
  S3StorageReader(const S3StorageReader&) = delete;
  S3StorageReader& operator=(const S3StorageReader&) = delete;

  Metadata read_metadata() override;
  /// `.metadata` and the checksum file as read_metadata read them: load() sends them to the
  /// other ranks, whose readers adopt them (read_shared_metadata) without a request.
  std::optional<std::string> metadata_to_share() override;
  Metadata read_shared_metadata(const std::string& shared) override;
  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override;
  void read_data(const LoadPlan& plan, LoadPlanner& planner) override;
  /// True: every rank's bytes come over the network from one store.
  bool is_shared_storage() const override;

  /// The bytes read_data has fetched from data objects since this reader was made.
  uint64_t bytes_read() const;
  const std::string& url() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
