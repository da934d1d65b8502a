// S3Prefix over the S3 driver's client: whole files up (through S3UploadSink) and back.

#include <dcpp/storage/s3_prefix.h>

#include "format/crc32.h"
#include "s3/driver/s3_location_url.h"
#include "s3/driver/s3_upload_sink.h"
#include "s3/protocol/s3_client.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace dcpp {
using detail::S3Client;

class [[gnu::visibility("hidden")]] S3Prefix::Impl {
 public:
  Impl(const std::string& url, const S3Options& s3)
      : url(detail::parse_s3_url(url)), client(detail::resolve_s3_config(s3, this->url.bucket)) {}

  std::string key_of(std::string_view name) const { return url.prefix + std::string(name); }

  detail::S3Url url;
  S3Client client;
};

S3Prefix::S3Prefix(const std::string& url, const S3Options& s3)
    : impl_(std::make_unique<Impl>(url, s3)) {}

S3Prefix::~S3Prefix() = default;

std::string S3Prefix::url() const { return impl_->url.text(); }

std::string S3Prefix::url_of(std::string_view name) const {
  return impl_->client.url_of(impl_->key_of(name));
}

std::vector<S3ObjectEntry> S3Prefix::list(std::string_view name_prefix) {
  std::vector<S3ObjectEntry> entries;
  for (const detail::S3ObjectInfo& object :
       impl_->client.list_objects(impl_->key_of(name_prefix))) {
    entries.push_back(
        S3ObjectEntry{object.key.substr(impl_->url.prefix.size()), object.size, object.etag});
  }
  return entries;
}

std::vector<std::string> S3Prefix::list_directories(std::string_view name_prefix) {
  const std::string own_prefix = impl_->key_of("");
  std::vector<std::string> names;
  for (std::string& key : impl_->client.list_common_prefixes(impl_->key_of(name_prefix))) {
    names.push_back(key.substr(std::min(own_prefix.size(), key.size())));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> S3Prefix::read(const std::string& name) {
  return impl_->client.get_object_if_exists(impl_->key_of(name));
}

void S3Prefix::write(const std::string& name, std::string_view body) {
  impl_->client.put_object(impl_->key_of(name), body);
}

int S3Prefix::abort_uploads(std::string_view name_prefix) { return abort_uploads(name_prefix, {}); }

int S3Prefix::abort_uploads(std::string_view name_prefix,
                            const std::function<bool(const std::string& name)>& spare) {
  S3Client& client = impl_->client;
  const std::string own_prefix = impl_->key_of("");
  int aborted = 0;
  for (const detail::S3UploadInfo& upload :
       client.list_multipart_uploads(impl_->key_of(name_prefix))) {
    if (spare && spare(upload.key.substr(std::min(own_prefix.size(), upload.key.size())))) {
      continue;
    }
    client.abort_multipart_upload(upload.key, upload.upload_id);
    ++aborted;
  }
  return aborted;
}

bool S3Prefix::create(const std::string& name, std::string_view body) {
  return impl_->client.put_object_if_absent(impl_->key_of(name), body);
}

std::optional<S3TaggedObject> S3Prefix::read_tagged(const std::string& name) {
  auto object = impl_->client.get_object_and_etag(impl_->key_of(name));
  if (!object) return std::nullopt;
  return S3TaggedObject{std::move(object->first), std::move(object->second)};
}

bool S3Prefix::replace_if_unchanged(const std::string& name, std::string_view body,
                                    const std::string& etag) {
  return impl_->client.put_object_if_match(impl_->key_of(name), body, etag);
}

uint32_t S3Prefix::upload_file(const std::filesystem::path& source, const std::string& name) {
  std::ifstream in(source, std::ios::binary);
  if (!in) {
    throw CheckpointError(ErrorKind::kIo, "cannot open '" + source.string() + "' to upload it to " +
                                              url_of(name) + ": " + std::strerror(errno));
  }
  S3Client& client = impl_->client;
  detail::S3UploadSink sink(client, impl_->key_of(name), client.config().concurrency);
  std::string buffer(static_cast<std::size_t>(client.config().part_size), '\0');
  uint32_t crc = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    crc = detail::crc32(crc, buffer.data(), n);
    sink.write(buffer.data(), n);
  }
  if (in.bad()) {
    throw CheckpointError(ErrorKind::kIo, "reading '" + source.string() + "' to upload it to " +
                                              url_of(name) + " failed: " + std::strerror(errno));
  }
  sink.finish();
  return crc;
}

uint32_t S3Prefix::crc32_of(const std::string& name) {
  S3Client& client = impl_->client;
  const std::string key = impl_->key_of(name);
  const std::optional<uint64_t> size = client.head_object(key);
  if (!size) {
    throw CheckpointError(ErrorKind::kNotFound, "no object " + url_of(name));
  }
  std::string buffer(static_cast<std::size_t>(std::min<uint64_t>(*size, client.config().part_size)),
                     '\0');
  uint32_t crc = 0;
  for (uint64_t offset = 0; offset < *size; offset += buffer.size()) {
    const auto n = static_cast<std::size_t>(std::min<uint64_t>(buffer.size(), *size - offset));
    client.get_range(key, offset, buffer.data(), n);
    crc = detail::crc32(crc, buffer.data(), n);
  }
  return crc;
}

void S3Prefix::remove(const std::string& name) { impl_->client.delete_object(impl_->key_of(name)); }

}  // namespace dcpp
