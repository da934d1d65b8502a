#pragma once
// S3Options resolved against the environment and the AWS shared files, as the AWS SDKs do.

#include "s3/config/s3_credentials.h"

#include <dcpp/storage/s3_options.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dcpp::detail {

/// Everything a request needs, nothing left to look up.
struct S3Config {
  std::string bucket;
  std::string endpoint_url;  // scheme://host[:port], no trailing slash
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
  bool path_style = true;
  /// Where the credentials came from ("options", "environment (AWS_ACCESS_KEY_ID)", "profile
  /// 'default' of /home/u/.aws/credentials"), for error messages.
  std::string credentials_source;
  /// When they expire (nullopt: long-term keys), and how to ask for them again (the whole chain,
  /// the environment and the shared files read anew); the client does before they expire and
  /// when the store refuses them (s3_client.h).
  std::optional<std::chrono::system_clock::time_point> credentials_expiration;
  std::function<S3Credentials()> reload_credentials;
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  std::chrono::seconds throttle_budget{30};
  int process_requests_in_flight = 64;
  std::chrono::seconds stall_timeout{60};
  std::chrono::seconds connect_timeout{10};
  uint64_t part_size = 16ull << 20;
  int concurrency = 8;
  bool content_md5 = true;
  bool crc32c = true;
};

/// Resolves `options` for `bucket`: fields set in `options` win, then the environment, then the
/// profile's entries in the shared files (`aws_access_key_id`, `aws_secret_access_key`,
/// `aws_session_token` in the credentials file; `region`, `endpoint_url` in the config file's
/// `[profile NAME]` or `[default]`, `services` sections are not read), then the providers of
/// s3_credentials.h in the SDKs' order (resolve_credentials). A profile named in
/// `options` is asked for by name: its credentials win over the environment's, as the CLI's
/// --profile does. Throws CheckpointError (kUsage) when no credentials are found (saying where
/// it looked), or an option is out of range.
S3Config resolve_s3_config(const S3Options& options, const std::string& bucket);

}  // namespace dcpp::detail
