#pragma once
// The objects under one "s3://bucket/prefix" as whole files: what copies a checkpoint directory to
// an object store and back, lists and deletes it (the CheckpointManager's remote tier), outside
// the save and load protocol of the S3 storage driver.

#include <dcpp/core/export.h>
#include <dcpp/storage/s3_options.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp {

/// One object under the prefix: its name relative to the prefix ("step-00000010/.metadata").
struct DCPP_API S3ObjectEntry {
  std::string name;
  uint64_t size = 0;
  /// The store's entity tag, quotes included ("" when the listing gives none): it changes when
  /// the object is replaced, so it tells a cached copy from a stale one.
  std::string etag;
};

/// An object's bytes and the entity tag the store gave with them.
struct DCPP_API S3TaggedObject {
  std::string bytes;
  std::string etag;  // quotes included
};

/// Names are relative to the prefix and may contain "/". Thread-safe: any number of threads may
/// call it at once (requests share a pool of connections). Every method throws CheckpointError
/// naming the object's URL, as the S3 driver does: kNotFound for a missing bucket, kUsage for
/// refused credentials, kIo when the store or the network failed after the retries.
class DCPP_API S3Prefix {
 public:
  /// `url` is "s3://bucket[/prefix]"; throws CheckpointError (kUsage) when it is not one.
  explicit S3Prefix(const std::string& url, const S3Options& s3 = {});
  ~S3Prefix();
  S3Prefix(const S3Prefix&) = delete;
  S3Prefix& operator=(const S3Prefix&) = delete;

  /// "s3://bucket/prefix", without a trailing "/".
  std::string url() const;
  /// "s3://bucket/prefix/name".
  std::string url_of(std::string_view name) const;

  /// Every object whose name starts with `name_prefix` (all of them by default), sorted by name.
  std::vector<S3ObjectEntry> list(std::string_view name_prefix = {});
  /// The "directories" directly below the prefix whose names start with `name_prefix`: the
  /// distinct names up to their first "/" after it, each ending in "/" ("step-00000010/"),
  /// sorted (a listing with the delimiter "/": one entry per directory, not per object).
  std::vector<std::string> list_directories(std::string_view name_prefix = {});
  /// The whole object, or nullopt when there is none of that name.
  std::optional<std::string> read(const std::string& name);
  void write(const std::string& name, std::string_view body);
  /// Writes the object only if there is none of that name (a conditional PUT, If-None-Match: *):
  /// true when this call created it, false when one was there or another writer's won.
  bool create(const std::string& name, std::string_view body);
  /// The whole object and its entity tag, or nullopt when there is none of that name.
  std::optional<S3TaggedObject> read_tagged(const std::string& name);
  /// Replaces the object only while its entity tag is still `etag` (a conditional PUT,
  /// If-Match): true when this call replaced it, false when another writer changed or removed it
  /// first. With create() and read_tagged(), a compare-and-swap: what a lease needs.
  bool replace_if_unchanged(const std::string& name, std::string_view body,
                            const std::string& etag);
  /// Streams the local file `source` into the object `name` (one PUT, or a multipart upload of
  /// the store's part size, parts in parallel; a failed one is aborted) and returns the CRC-32
  /// of the bytes sent. Throws kIo naming `source` when it cannot be read.
  uint32_t upload_file(const std::filesystem::path& source, const std::string& name);
  /// The CRC-32 of the object's bytes as the store returns them now, read back by ranges of the
  /// part size. A missing object is kNotFound.
  uint32_t crc32_of(const std::string& name);
  /// Deletes the object; a missing one is no error.
  void remove(const std::string& name);
  /// Aborts every multipart upload in progress whose object name starts with `name_prefix` (what
  /// writers that were killed left: the store keeps, and bills, their parts until then) and
  /// returns how many it asked to abort (an abort the store refuses is logged, not thrown). Only
  /// for a prefix no live writer uploads to. Throws CheckpointError when the uploads cannot be
  /// listed (kIo for a store that does not implement ListMultipartUploads, as s3rver).
  int abort_uploads(std::string_view name_prefix);
  /// The same, sparing the uploads whose object name (relative to the prefix) `spare` accepts:
  /// those that live writers may still be sending.
  int abort_uploads(std::string_view name_prefix,
                    const std::function<bool(const std::string& name)>& spare);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
