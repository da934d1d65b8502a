#include "s3/config/s3_config.h"

#include "s3/config/aws_shared_file.h"
#include "s3/config/s3_credentials.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstdlib>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dcpp::detail {

namespace {

constexpr uint64_t kMinPartSize = 5ull << 20;  // S3's limits on a multipart upload's parts
constexpr uint64_t kMaxPartSize = 5ull << 30;

/// The variable's value, or "" when it is unset or empty (the SDKs treat both alike).
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

/// A setting and where it came from.
struct Found {
  std::string value;
  std::string source;
};

/// `path` with a leading "~/" replaced by $HOME, as the SDKs expand AWS_*_FILE.
std::string expand_home(const std::string& path, const std::string& home) {
  if (path.rfind("~/", 0) == 0 && !home.empty()) return home + path.substr(1);
  return path;
}

/// One of the shared files: where it is, and what it holds (nullopt: could not be read).
struct SharedFile {
  std::string path;
  std::optional<AwsSharedFile> contents;

  std::string describe() const { return contents ? path : path + " (not found)"; }
};

SharedFile load_shared_file(const char* variable, const std::string& default_name,
                            const std::string& home) {
  SharedFile file;
  const std::string overridden = env(variable);
  if (!overridden.empty()) {
    file.path = expand_home(overridden, home);
  } else if (!home.empty()) {
    file.path = home + "/.aws/" + default_name;
  } else {
    file.path = "~/.aws/" + default_name + " ($HOME unset)";
    return file;
  }
  file.contents = read_aws_shared_file(file.path);
  return file;
}

/// The profile's section in the config file: `[default]` (or `[profile default]`) for the
/// default profile, `[profile NAME]` for any other.
std::string config_section(const AwsSharedFile& config, const std::string& profile) {
  if (profile == "default" && config.has_section("default")) return "default";
  return "profile " + profile;
}

std::optional<std::string> config_value(const SharedFile& config, const std::string& profile,
                                        const std::string& key) {
  if (!config.contents) return std::nullopt;
  return config.contents->get(config_section(*config.contents, profile), key);
}

bool is_dns_compatible(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;  // dots break TLS for virtual-hosted names: path-style then
  }
  return bucket.front() != '-' && bucket.back() != '-';
}

/// "scheme://host[:port][/path]" without trailing slashes; throws for anything but http(s).
std::string normalize_endpoint(std::string url, const std::string& source) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  const std::size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if ((scheme != "http" && scheme != "https") || url.size() == scheme_end + 3) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the S3 endpoint '" + url + "' (from " + source +
                              ") is not an http:// or https:// URL: give one such as "
                              "'https://s3.us-east-1.amazonaws.com' or 'http://127.0.0.1:9000'");
  }
  return url;
}

using Credentials = S3Credentials;

/// Both halves of a key pair or neither: one alone is a mistake worth naming.
bool complete_pair(const std::string& id, const std::string& secret, const std::string& source,
                   const std::string& id_name, const std::string& secret_name) {
  if (id.empty() && secret.empty()) return false;
  if (id.empty() || secret.empty()) {
    throw CheckpointError(ErrorKind::kUsage, "incomplete S3 credentials in " + source + ": " +
                                                 (id.empty() ? secret_name : id_name) +
                                                 " is set but " +
                                                 (id.empty() ? id_name : secret_name) +
                                                 " is not: set both, or neither");
  }
  return true;
}

std::optional<Credentials> profile_credentials(const SharedFile& file, const std::string& section,
                                               const std::string& profile) {
  if (!file.contents) return std::nullopt;
  const std::string id = file.contents->get(section, "aws_access_key_id").value_or("");
  const std::string secret = file.contents->get(section, "aws_secret_access_key").value_or("");
  const std::string source = "profile '" + profile + "' of " + file.path;
  if (!complete_pair(id, secret, source, "aws_access_key_id", "aws_secret_access_key")) {
    return std::nullopt;
  }
  return Credentials{id, secret, file.contents->get(section, "aws_session_token").value_or(""),
                     source, std::nullopt};
}

/// STS of `region`: AWS_ENDPOINT_URL_STS, else AWS's regional endpoint.
std::string sts_endpoint(const std::string& region) {
  std::string endpoint = env("AWS_ENDPOINT_URL_STS");
  if (endpoint.empty()) endpoint = "https://sts." + region + ".amazonaws.com";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::string session_name(const std::string& configured) {
  return configured.empty() ? "dcpp-" + std::to_string(std::time(nullptr)) : configured;
}

/// Throws kUsage where the AWS SDKs would not sign with the instance's or the container's role:
/// a profile named (S3Options::profile, AWS_PROFILE) that neither file holds ("profile not
/// found"), and a profile whose credentials come from what dcpp does not implement: AssumeRole
/// (`role_arn` with `source_profile` or `credential_source`) and IAM Identity Center (`sso_*`).
/// Falling through to the machine's role would sign with another identity.
void refuse_unsupported_profile(const S3Options& options, const std::string& profile,
                                const SharedFile& credentials_file, const SharedFile& config_file,
                                const std::function<std::string(const char*)>& config_entry) {
  const bool named = !options.profile.empty() || !env("AWS_PROFILE").empty();
  const bool in_credentials =
      credentials_file.contents && credentials_file.contents->has_section(profile);
  const bool in_config = config_file.contents && config_file.contents->has_section(config_section(
                                                     *config_file.contents, profile));
  if (named && !in_credentials && !in_config) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the S3 profile '" + profile + "' (" +
                              (options.profile.empty() ? "AWS_PROFILE" : "S3Options::profile") +
                              ") is in neither " + credentials_file.describe() + " nor " +
                              config_file.describe() +
                              ": fix its name, or add it; dcpp does not fall back to another "
                              "identity (the AWS SDKs fail the same way)");
  }
  const auto unsupported = [&](const std::string& how) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the S3 profile '" + profile + "' of " + config_file.describe() +
                              " gets its credentials by " + how +
                              ", which dcpp does not implement; rather than sign with another "
                              "identity it stops: give the profile a credential_process (for "
                              "example `aws configure export-credentials --profile " +
                              profile + " --format process`), or keys");
  };
  if (!config_entry("role_arn").empty() &&
      (!config_entry("source_profile").empty() || !config_entry("credential_source").empty())) {
    unsupported("AssumeRole (role_arn with source_profile or credential_source)");
  }
  if (!config_entry("sso_session").empty() || !config_entry("sso_start_url").empty() ||
      !config_entry("sso_account_id").empty()) {
    unsupported("IAM Identity Center (sso_session, sso_start_url)");
  }
}

/// In the AWS SDKs' order: S3Options' keys; the environment's keys, then its web identity
/// (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), unless options name a profile (an explicit
/// profile is asked for by name, as the CLI's --profile is); the profile's keys in the
/// credentials file, its `credential_process`, its keys in the config file, its web identity
/// (`web_identity_token_file`, `role_arn`); the container's endpoint; EC2's instance metadata.
Credentials resolve_credentials(const S3Options& options, const std::string& bucket,
                                const std::string& region, const std::string& profile,
                                const SharedFile& credentials_file, const SharedFile& config_file) {
  std::optional<Credentials> found;
  const auto config_entry = [&](const char* key) -> std::string {
    if (!config_file.contents) return "";
    return config_file.contents->get(config_section(*config_file.contents, profile), key)
        .value_or("");
  };
  if (complete_pair(options.access_key_id, options.secret_access_key, "S3Options", "access_key_id",
                    "secret_access_key")) {
    found = Credentials{options.access_key_id, options.secret_access_key, options.session_token,
                        "options", std::nullopt};
  } else if (options.profile.empty() &&
             complete_pair(env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                           "the environment", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")) {
    found = Credentials{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                        env("AWS_SESSION_TOKEN"), "environment (AWS_ACCESS_KEY_ID)", std::nullopt};
  } else if (options.profile.empty() && !env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() &&
             !env("AWS_ROLE_ARN").empty()) {
    found = credentials_from_web_identity(env("AWS_WEB_IDENTITY_TOKEN_FILE"), env("AWS_ROLE_ARN"),
                                          session_name(env("AWS_ROLE_SESSION_NAME")),
                                          sts_endpoint(region));
  } else {
    refuse_unsupported_profile(options, profile, credentials_file, config_file, config_entry);
    found = profile_credentials(credentials_file, profile, profile);
    const std::string process = config_entry("credential_process");
    if (!found && !process.empty()) {
      found = credentials_from_process(
          process, "credential_process of profile '" + profile + "' of " + config_file.path);
    }
    if (!found && config_file.contents) {
      found =
          profile_credentials(config_file, config_section(*config_file.contents, profile), profile);
    }
    const std::string token_file = config_entry("web_identity_token_file");
    if (!found && !token_file.empty() && !config_entry("role_arn").empty()) {
      found = credentials_from_web_identity(token_file, config_entry("role_arn"),
                                            session_name(config_entry("role_session_name")),
                                            sts_endpoint(region));
    }
    if (!found) found = credentials_from_container();
    if (!found) found = credentials_from_instance_metadata();
  }
  if (!found) {
    std::string looked = options.profile.empty() ? "S3Options, the environment (AWS_ACCESS_KEY_ID, "
                                                   "AWS_WEB_IDENTITY_TOKEN_FILE), "
                                                 : "S3Options, ";
    looked += "profile '" + profile + "' of " + credentials_file.describe() + " and of " +
              config_file.describe() +
              " (keys, credential_process, web_identity_token_file), the container's endpoint "
              "(AWS_CONTAINER_CREDENTIALS_FULL_URI) and EC2's instance metadata";
    throw CheckpointError(
        ErrorKind::kUsage,
        "no S3 credentials for bucket '" + bucket + "' (looked in " + looked +
            "): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or S3Options::access_key_id and "
            "secret_access_key, or add aws_access_key_id and aws_secret_access_key to the "
            "profile ('" +
            profile + "', chosen by AWS_PROFILE or S3Options::profile)");
  }
  if (!options.session_token.empty()) found->session_token = options.session_token;
  return *found;
}

void check_options(const S3Options& options, const std::string& bucket) {
  const auto usage = [&](const std::string& what) {
    throw CheckpointError(ErrorKind::kUsage, "S3Options for bucket '" + bucket + "': " + what);
  };
  if (options.part_size < kMinPartSize || options.part_size > kMaxPartSize) {
    usage("part_size " + std::to_string(options.part_size) +
          " is outside S3's limits for a multipart upload's parts: give 5 MiB (5242880) to 5 GiB");
  }
  if (options.concurrency < 1) {
    usage("concurrency " + std::to_string(options.concurrency) + " must be at least 1");
  }
  if (options.process_requests_in_flight < 1) {
    usage("process_requests_in_flight " + std::to_string(options.process_requests_in_flight) +
          " must be at least 1");
  }
  if (options.throttle_budget.count() < 0) usage("throttle_budget must not be negative");
  if (options.max_attempts < 1) {
    usage("max_attempts " + std::to_string(options.max_attempts) +
          " must be at least 1 (1: no retries)");
  }
  if (options.initial_backoff.count() < 0 || options.max_backoff.count() < 0) {
    usage("initial_backoff and max_backoff must not be negative");
  }
  if (options.stall_timeout.count() < 1 || options.connect_timeout.count() < 1) {
    usage("stall_timeout and connect_timeout must be at least 1 second");
  }
}

void check_bucket_name(const std::string& bucket) {
  bool ok = !bucket.empty();
  for (const char c : bucket) {
    if (c == '/' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) ok = false;
  }
  if (!ok) {
    throw CheckpointError(ErrorKind::kUsage, "'" + bucket +
                                                 "' is not an S3 bucket name: give s3://BUCKET/"
                                                 "PREFIX with a bucket such as 'my-checkpoints'");
  }
}

}  // namespace

S3Config resolve_s3_config(const S3Options& options, const std::string& bucket) {
  check_bucket_name(bucket);
  check_options(options, bucket);

  const std::string home = env("HOME");
  std::string profile = !options.profile.empty() ? options.profile : env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  const SharedFile credentials_file =
      load_shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", home);
  const SharedFile config_file = load_shared_file("AWS_CONFIG_FILE", "config", home);

  S3Config config;
  config.bucket = bucket;

  const std::string regions[] = {options.region, env("AWS_REGION"), env("AWS_DEFAULT_REGION"),
                                 config_value(config_file, profile, "region").value_or(""),
                                 "us-east-1"};
  for (const std::string& region : regions) {
    if (!region.empty()) {
      config.region = region;
      break;
    }
  }

  const std::vector<Found> endpoints = {
      {options.endpoint_url, "S3Options::endpoint_url"},
      {env("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"},
      {env("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"},
      {config_value(config_file, profile, "endpoint_url").value_or(""),
       "profile '" + profile + "' of " + config_file.path}};
  bool configured_endpoint = false;
  for (const Found& endpoint : endpoints) {
    if (!endpoint.value.empty()) {
      config.endpoint_url = normalize_endpoint(endpoint.value, endpoint.source);
      configured_endpoint = true;
      break;
    }
  }
  if (!configured_endpoint) config.endpoint_url = "https://s3." + config.region + ".amazonaws.com";
  config.path_style =
      options.path_style.value_or(configured_endpoint || !is_dns_compatible(bucket));

  Credentials credentials =
      resolve_credentials(options, bucket, config.region, profile, credentials_file, config_file);
  config.access_key_id = credentials.access_key_id;
  config.secret_access_key = credentials.secret_access_key;
  config.session_token = credentials.session_token;
  config.credentials_source = credentials.source;
  config.credentials_expiration = credentials.expiration;
  // Asked again when these expire or are refused: the files and the variables are read anew.
  config.reload_credentials = [options, bucket, region = config.region]() {
    const std::string home = env("HOME");
    std::string again = !options.profile.empty() ? options.profile : env("AWS_PROFILE");
    if (again.empty()) again = "default";
    return resolve_credentials(options, bucket, region, again,
                               load_shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", home),
                               load_shared_file("AWS_CONFIG_FILE", "config", home));
  };

  config.max_attempts = options.max_attempts;
  config.initial_backoff = options.initial_backoff;
  config.max_backoff = options.max_backoff;
  config.throttle_budget = options.throttle_budget;
  config.process_requests_in_flight = options.process_requests_in_flight;
  config.stall_timeout = options.stall_timeout;
  config.connect_timeout = options.connect_timeout;
  config.part_size = options.part_size;
  config.concurrency = options.concurrency;
  config.content_md5 = options.content_md5;
  config.crc32c = options.crc32c;
  return config;
}

}  // namespace dcpp::detail
