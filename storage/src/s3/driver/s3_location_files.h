#pragma once
// The objects directly under an S3 prefix, as LocationFiles.

#include "s3/driver/s3_location_url.h"
#include "s3/protocol/s3_client.h"

#include <dcpp/storage/location_driver.h>

#include <atomic>

namespace dcpp::detail {

class S3LocationFiles final : public LocationFiles {
 public:
  S3LocationFiles(const std::string& url, const S3Options& s3);

  std::string describe(const std::string& name) const override;
  /// The bucket missing or unreachable is an error, not an absent file.
  std::optional<std::string> read(const std::string& name) override;
  std::unique_ptr<LocationFile> open(const std::string& name) override;
  /// Objects directly under the prefix: none of the "directories" below it.
  std::vector<std::string> list() override;

 private:
  S3Url url_;
  S3Client client_;
  std::atomic<uint64_t> bytes_read_{0};
  bool bucket_checked_ = false;
  void check_bucket_once();
};

}  // namespace dcpp::detail
