#pragma once
// The AWS environment of a test: every variable dcpp's S3 configuration reads, unset for a scope.

#include "dcpp_test.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace dcpp::test {

/// Every variable resolve_s3_config reads, unset for the scope (HOME pointed at an empty
/// directory), and restored as it was on destruction.
class ScopedAwsEnvironment {
 public:
  ScopedAwsEnvironment() {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_[name] = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
      unsetenv(name);
    }
    set("HOME", home_.str());
  }
  ~ScopedAwsEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ScopedAwsEnvironment(const ScopedAwsEnvironment&) = delete;
  ScopedAwsEnvironment& operator=(const ScopedAwsEnvironment&) = delete;

  void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
  /// Credentials by web identity, as on EKS: the token the tests' STS stand-in accepts
  /// ("dcpp-web-identity-token", in a file under HOME), a role, and that STS at `sts_endpoint`.
  void use_web_identity(const std::string& sts_endpoint) {
    dcpp::test::write_file(home_.path() / "token", "dcpp-web-identity-token\n");
    set("AWS_WEB_IDENTITY_TOKEN_FILE", (home_.path() / "token").string());
    set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/dcpp-test");
    set("AWS_ENDPOINT_URL_STS", sts_endpoint);
  }
  /// The empty directory HOME points at.
  const dcpp::test::TempDir& home() const { return home_; }

 private:
  static constexpr const char* kNames[] = {"HOME",
                                           "AWS_ENDPOINT_URL_S3",
                                           "AWS_ENDPOINT_URL",
                                           "AWS_REGION",
                                           "AWS_DEFAULT_REGION",
                                           "AWS_ACCESS_KEY_ID",
                                           "AWS_SECRET_ACCESS_KEY",
                                           "AWS_SESSION_TOKEN",
                                           "AWS_PROFILE",
                                           "AWS_SHARED_CREDENTIALS_FILE",
                                           "AWS_CONFIG_FILE",
                                           "AWS_WEB_IDENTITY_TOKEN_FILE",
                                           "AWS_ROLE_ARN",
                                           "AWS_ROLE_SESSION_NAME",
                                           "AWS_ENDPOINT_URL_STS",
                                           "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                           "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                           "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                           "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                                           "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                                           "AWS_EC2_METADATA_DISABLED"};
  dcpp::test::TempDir home_;
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace dcpp::test
