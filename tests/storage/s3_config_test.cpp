// resolve_s3_config: S3Options, then the environment, then the AWS shared files, as the AWS SDKs
// resolve them; and the options it refuses.

#include "dcpp_test.h"
#include "storage/aws_environment.h"

#include "s3/config/s3_config.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

using dcpp::CheckpointError;
using dcpp::ErrorKind;
using dcpp::S3Options;
using dcpp::detail::resolve_s3_config;
using dcpp::detail::S3Config;
using dcpp::test::ScopedAwsEnvironment;

namespace {

/// The kind and message of what resolve_s3_config throws for `options`.
std::pair<ErrorKind, std::string> resolve_error(const S3Options& options,
                                                const std::string& bucket = "bkt") {
  try {
    resolve_s3_config(options, bucket);
  } catch (const CheckpointError& e) {
    return {e.kind(), e.what()};
  }
  FAIL("resolve_s3_config did not throw");
  return {};
}

S3Options with_keys() {
  S3Options options;
  options.access_key_id = "OPTKEY";
  options.secret_access_key = "optsecret";
  return options;
}

constexpr const char* kCredentials = R"(# shared credentials
[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = defaultsecret

[work]
aws_access_key_id=WORKKEY
aws_secret_access_key=worksecret
aws_session_token = worktoken
)";

constexpr const char* kConfig = R"([default]
region = eu-west-1

[profile work]
region = ap-south-1
; the profile's own store
endpoint_url = http://store.example:9000/
s3 =
  endpoint_url = http://nested.example:1

[work]
region = not-read-without-the-profile-prefix
)";

}  // namespace

TEST_CASE("S3 options win over the environment and the shared files") {
  ScopedAwsEnvironment env;
  dcpp::test::write_file(env.home() / "credentials", kCredentials);
  dcpp::test::write_file(env.home() / "config", kConfig);
  env.set("AWS_SHARED_CREDENTIALS_FILE", (env.home() / "credentials").string());
  env.set("AWS_CONFIG_FILE", (env.home() / "config").string());
  env.set("AWS_PROFILE", "work");
  env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
  env.set("AWS_SESSION_TOKEN", "envtoken");
  env.set("AWS_REGION", "us-west-2");
  env.set("AWS_ENDPOINT_URL", "http://env.example:1");

  S3Options options = with_keys();
  options.region = "eu-central-1";
  options.endpoint_url = "https://opt.example:8443/";
  options.path_style = false;
  options.max_attempts = 7;
  options.part_size = 8u << 20;
  const S3Config config = resolve_s3_config(options, "bkt");
  CHECK(config.bucket == "bkt");
  CHECK(config.access_key_id == "OPTKEY");
  CHECK(config.secret_access_key == "optsecret");
  CHECK(config.session_token.empty());  // the environment's token belongs to its keys
  CHECK(config.credentials_source == "options");
  CHECK(config.region == "eu-central-1");
  CHECK(config.endpoint_url == "https://opt.example:8443");
  CHECK_FALSE(config.path_style);
  CHECK(config.max_attempts == 7);
  CHECK(config.part_size == (8u << 20));
}

TEST_CASE("S3 settings come from the environment when the options leave them empty") {
  ScopedAwsEnvironment env;
  env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
  env.set("AWS_SESSION_TOKEN", "envtoken");
  env.set("AWS_DEFAULT_REGION", "us-west-1");
  env.set("AWS_ENDPOINT_URL", "http://generic.example:1");

  SECTION("AWS_REGION and AWS_ENDPOINT_URL_S3 win over the generic variables") {
    env.set("AWS_REGION", "us-west-2");
    env.set("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000/");
    const S3Config config = resolve_s3_config(S3Options{}, "bkt");
    CHECK(config.region == "us-west-2");
    CHECK(config.endpoint_url == "http://127.0.0.1:9000");
  }
  SECTION("the generic variables alone") {
    const S3Config config = resolve_s3_config(S3Options{}, "bkt");
    CHECK(config.region == "us-west-1");
    CHECK(config.endpoint_url == "http://generic.example:1");
  }
  const S3Config config = resolve_s3_config(S3Options{}, "bkt");
  CHECK(config.access_key_id == "ENVKEY");
  CHECK(config.secret_access_key == "envsecret");
  CHECK(config.session_token == "envtoken");
  CHECK(config.credentials_source == "environment (AWS_ACCESS_KEY_ID)");
  CHECK(config.path_style);  // a configured endpoint: path-style
}

TEST_CASE("S3 without an endpoint is AWS, virtual-hosted") {
  ScopedAwsEnvironment env;
  SECTION("in us-east-1 by default") {
    const S3Config config = resolve_s3_config(with_keys(), "my-bucket");
    CHECK(config.region == "us-east-1");
    CHECK(config.endpoint_url == "https://s3.us-east-1.amazonaws.com");
    CHECK_FALSE(config.path_style);
  }
  SECTION("in the region given") {
    env.set("AWS_REGION", "eu-north-1");
    const S3Config config = resolve_s3_config(with_keys(), "my-bucket");
    CHECK(config.endpoint_url == "https://s3.eu-north-1.amazonaws.com");
  }
  SECTION("path-style for a bucket name that is no DNS label") {
    CHECK(resolve_s3_config(with_keys(), "dotted.bucket").path_style);
  }
  SECTION("path-style when asked") {
    S3Options options = with_keys();
    options.path_style = true;
    CHECK(resolve_s3_config(options, "my-bucket").path_style);
  }
}

TEST_CASE("S3 credentials, region and endpoint come from the profile in the shared files") {
  ScopedAwsEnvironment env;
  const std::string credentials = (env.home() / "credentials").string();
  const std::string config_file = (env.home() / "config").string();
  dcpp::test::write_file(credentials, kCredentials);
  dcpp::test::write_file(config_file, kConfig);
  env.set("AWS_SHARED_CREDENTIALS_FILE", credentials);
  env.set("AWS_CONFIG_FILE", config_file);

  SECTION("the default profile") {
    const S3Config config = resolve_s3_config(S3Options{}, "bkt");
    CHECK(config.access_key_id == "DEFAULTKEY");
    CHECK(config.secret_access_key == "defaultsecret");
    CHECK(config.session_token.empty());
    CHECK(config.credentials_source == "profile 'default' of " + credentials);
    CHECK(config.region == "eu-west-1");
    CHECK(config.endpoint_url == "https://s3.eu-west-1.amazonaws.com");
    CHECK_FALSE(config.path_style);
  }
  SECTION("AWS_PROFILE's, with its [profile NAME] section and not its nested s3 block") {
    env.set("AWS_PROFILE", "work");
    const S3Config config = resolve_s3_config(S3Options{}, "bkt");
    CHECK(config.access_key_id == "WORKKEY");
    CHECK(config.session_token == "worktoken");
    CHECK(config.credentials_source == "profile 'work' of " + credentials);
    CHECK(config.region == "ap-south-1");
    CHECK(config.endpoint_url == "http://store.example:9000");
    CHECK(config.path_style);
  }
  SECTION("the environment's keys win over the profile's") {
    env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
    env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
    CHECK(resolve_s3_config(S3Options{}, "bkt").access_key_id == "ENVKEY");
  }
  SECTION("a profile named in the options wins over the environment's keys") {
    env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
    env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
    S3Options options;
    options.profile = "work";
    const S3Config config = resolve_s3_config(options, "bkt");
    CHECK(config.access_key_id == "WORKKEY");
    CHECK(config.region == "ap-south-1");
  }
  SECTION("the environment's region and endpoint win over the profile's") {
    env.set("AWS_PROFILE", "work");
    env.set("AWS_REGION", "us-west-2");
    env.set("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000");
    const S3Config config = resolve_s3_config(S3Options{}, "bkt");
    CHECK(config.access_key_id == "WORKKEY");
    CHECK(config.region == "us-west-2");
    CHECK(config.endpoint_url == "http://127.0.0.1:9000");
  }
}

TEST_CASE("S3 shared files are found under HOME") {
  ScopedAwsEnvironment env;
  std::filesystem::create_directories(env.home() / ".aws");
  dcpp::test::write_file(env.home() / ".aws" / "credentials", kCredentials);
  dcpp::test::write_file(env.home() / ".aws" / "config", kConfig);
  const S3Config config = resolve_s3_config(S3Options{}, "bkt");
  CHECK(config.access_key_id == "DEFAULTKEY");
  CHECK(config.region == "eu-west-1");
  CHECK(config.credentials_source ==
        "profile 'default' of " + (env.home() / ".aws" / "credentials").string());
}

TEST_CASE("S3 credentials found nowhere are a usage error saying where it looked") {
  ScopedAwsEnvironment env;
  const auto [kind, message] = resolve_error(S3Options{}, "my-bucket");
  CHECK(kind == ErrorKind::kUsage);
  CHECK_THAT(message, Catch::Contains("no S3 credentials for bucket 'my-bucket'"));
  CHECK_THAT(message, Catch::Contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
  CHECK_THAT(message, Catch::Contains("profile 'default'"));
  CHECK_THAT(message, Catch::Contains((env.home() / ".aws" / "credentials").string()));
}

TEST_CASE("S3 profiles dcpp cannot use stop it, never another identity") {
  ScopedAwsEnvironment env;
  const std::string config_file = (env.home() / "config").string();
  dcpp::test::write_file(config_file,
                         "[profile assumed]\nrole_arn = arn:aws:iam::123456789012:role/r\n"
                         "source_profile = default\n"
                         "[profile on-ec2]\nrole_arn = arn:aws:iam::123456789012:role/r\n"
                         "credential_source = Ec2InstanceMetadata\n"
                         "[profile sso]\nsso_session = corp\nsso_account_id = 123456789012\n");
  env.set("AWS_CONFIG_FILE", config_file);
  // The machine's own role would answer: a container's endpoint that gives keys.
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/never-asked");
  SECTION("a mistyped AWS_PROFILE") {
    env.set("AWS_PROFILE", "asumed");
    const auto [kind, message] = resolve_error(S3Options{});
    CHECK(kind == ErrorKind::kUsage);
    CHECK_THAT(message, Catch::Contains("the S3 profile 'asumed' (AWS_PROFILE) is in neither"));
  }
  SECTION("a mistyped S3Options::profile") {
    S3Options options;
    options.profile = "nope";
    CHECK_THAT(resolve_error(options).second,
               Catch::Contains("the S3 profile 'nope' (S3Options::profile) is in neither"));
  }
  for (const char* profile : {"assumed", "on-ec2"}) {
    SECTION(std::string("AssumeRole: ") + profile) {
      env.set("AWS_PROFILE", profile);
      const auto [kind, message] = resolve_error(S3Options{});
      CHECK(kind == ErrorKind::kUsage);
      CHECK_THAT(message, Catch::Contains("AssumeRole") && Catch::Contains("credential_process"));
    }
  }
  SECTION("IAM Identity Center") {
    env.set("AWS_PROFILE", "sso");
    CHECK_THAT(resolve_error(S3Options{}).second, Catch::Contains("IAM Identity Center"));
  }
}

TEST_CASE("S3 credentials given by half are a usage error naming the missing half") {
  ScopedAwsEnvironment env;
  SECTION("in the environment") {
    env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
    const auto [kind, message] = resolve_error(S3Options{});
    CHECK(kind == ErrorKind::kUsage);
    CHECK_THAT(message, Catch::Contains("AWS_SECRET_ACCESS_KEY is not"));
  }
  SECTION("in the options") {
    S3Options options;
    options.secret_access_key = "secret";
    const auto [kind, message] = resolve_error(options);
    CHECK(kind == ErrorKind::kUsage);
    CHECK_THAT(message, Catch::Contains("access_key_id is not"));
  }
}

TEST_CASE("S3 options out of range are usage errors") {
  ScopedAwsEnvironment env;
  S3Options options = with_keys();
  std::string expected;
  SECTION("a part under 5 MiB") {
    options.part_size = (5u << 20) - 1;
    expected = "part_size";
  }
  SECTION("a part over 5 GiB") {
    options.part_size = (5ull << 30) + 1;
    expected = "part_size";
  }
  SECTION("no concurrency") {
    options.concurrency = 0;
    expected = "concurrency";
  }
  SECTION("no attempts") {
    options.max_attempts = 0;
    expected = "max_attempts";
  }
  SECTION("an endpoint that is not http(s)") {
    options.endpoint_url = "ftp://store.example";
    expected = "ftp://store.example";
  }
  SECTION("no bucket") {
    const auto [kind, message] = resolve_error(options, "");
    CHECK(kind == ErrorKind::kUsage);
    return;
  }
  const auto [kind, message] = resolve_error(options);
  CHECK(kind == ErrorKind::kUsage);
  CHECK_THAT(message, Catch::Contains(expected));
}

TEST_CASE("S3 part sizes at S3's limits are accepted") {
  ScopedAwsEnvironment env;
  S3Options options = with_keys();
  options.part_size = 5u << 20;
  CHECK(resolve_s3_config(options, "bkt").part_size == (5u << 20));
  options.part_size = 5ull << 30;
  CHECK(resolve_s3_config(options, "bkt").part_size == (5ull << 30));
}
