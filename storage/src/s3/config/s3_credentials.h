#pragma once
// S3 credentials and the providers beyond keys in options, the environment and the shared files:
// a profile's `credential_process`, web identity (STS AssumeRoleWithWebIdentity), a container's
// credentials endpoint (ECS, EKS Pod Identity) and EC2's instance metadata (IMDSv2). Each returns
// credentials that may expire; the S3 client asks again before they do (s3_client.h).

#include <chrono>
#include <optional>
#include <string>

namespace dcpp::detail {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
  /// Where they came from ("environment (AWS_ACCESS_KEY_ID)", "credential_process of profile
  /// 'p'", ...), for error messages.
  std::string source;
  /// When they stop working; nullopt: never (long-term keys).
  std::optional<std::chrono::system_clock::time_point> expiration;

  bool same_keys(const S3Credentials& other) const {
    return access_key_id == other.access_key_id && secret_access_key == other.secret_access_key &&
           session_token == other.session_token;
  }
};

/// "2026-11-28T05:00:00Z" (ISO 8601, UTC, optional fraction), or nullopt when it is not one.
std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(const std::string& text);

/// Runs `command` (a profile's `credential_process`, through /bin/sh as the AWS CLI does) and
/// reads its JSON: Version 1, AccessKeyId, SecretAccessKey, optional SessionToken and Expiration.
/// Throws CheckpointError (kUsage) naming `source` when it fails or prints something else.
S3Credentials credentials_from_process(const std::string& command, const std::string& source);

/// STS AssumeRoleWithWebIdentity with the token in `token_file` for `role_arn` at `sts_endpoint`
/// ("https://sts.us-east-1.amazonaws.com"). Throws CheckpointError (kUsage) naming the role.
S3Credentials credentials_from_web_identity(const std::string& token_file,
                                            const std::string& role_arn,
                                            const std::string& session_name,
                                            const std::string& sts_endpoint);

/// The container's credentials endpoint, when AWS_CONTAINER_CREDENTIALS_FULL_URI or
/// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is set (with AWS_CONTAINER_AUTHORIZATION_TOKEN or
/// _TOKEN_FILE); nullopt when neither is. Throws CheckpointError (kUsage) when it fails.
std::optional<S3Credentials> credentials_from_container();

/// EC2's instance metadata, IMDSv2 (a session token, then the role's credentials), at
/// AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254; nullopt when it does not answer within
/// a second (not on EC2) or AWS_EC2_METADATA_DISABLED is "true".
std::optional<S3Credentials> credentials_from_instance_metadata();

}  // namespace dcpp::detail
