// S3 credentials beyond fixed keys, against the real S3 server and the fault proxy's stand-ins for
// the credential endpoints (storage/s3_test_server.h): a profile's credential_process, web identity
// (STS), a container's endpoint and EC2's instance metadata; credentials asked for again before
// they expire, and when the store refuses them (the shared files changed under a running job).

#include "dcpp_test.h"
#include "storage/aws_environment.h"
#include "storage/s3_test_server.h"

#include "s3/config/s3_credentials.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_prefix.h>
#include <dcpp/storage/s3_storage.h>

#include <chrono>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using dcpp::StateDict;
using dcpp::test::error_of;
using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;
using dcpp::test::ScopedAwsEnvironment;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

StateDict credentials_state() {
  StateDict state;
  state.insert("w", at::arange(64, at::kFloat).reshape({8, 8}));
  return state;
}

// The test server's endpoint and region, no credentials: the chain must find them.
dcpp::S3Options without_keys() {
  dcpp::S3Options options = S3TestServer::get().options();
  options.access_key_id.clear();
  options.secret_access_key.clear();
  options.session_token.clear();
  return options;
}

// Saves to a new bucket with `options` and loads it back, bit for bit.
void round_trip(const dcpp::S3Options& options, const std::string& hint) {
  const std::string url = "s3://" + S3TestServer::get().create_bucket(hint) + "/ckpt";
  dcpp::SaveOptions saving;
  saving.s3 = options;
  const StateDict saved = credentials_state();
  dcpp::save(saved, url, saving);
  dcpp::LoadOptions loading;
  loading.s3 = options;
  StateDict loaded = dcpp::test::zeros_like(saved);
  dcpp::load(loaded, url, loading);
  dcpp::test::require_equal(loaded, saved);
}

}  // namespace

TEST_CASE("S3 credentials: expirations are ISO 8601 in UTC") {
  using dcpp::detail::parse_iso8601_utc;
  const auto at = parse_iso8601_utc("2026-11-28T05:00:00Z");
  REQUIRE(at);
  CHECK(std::chrono::system_clock::to_time_t(*at) == 1795842000);
  CHECK(parse_iso8601_utc("2026-11-28T05:00:00.123Z") == at);
  CHECK(parse_iso8601_utc("2026-11-28T05:00:00+00:00") == at);
  CHECK_FALSE(parse_iso8601_utc("2026-11-28 05:00"));
  CHECK_FALSE(parse_iso8601_utc("2026-11-28T05:00:00+02:00"));
}

TEST_CASE("S3 credentials from a profile's credential_process, run again when refused") {
  S3TestServer& server = S3TestServer::get();
  ScopedAwsEnvironment env;
  const fs::path dir = env.home() / "process";
  const fs::path runs = dir / "runs";
  // Prints the server's keys with a token that counts its runs.
  write_text(dir / "credentials.sh",
             "echo run >> '" + runs.string() +
                 "'\n"
                 "n=$(wc -l < '" +
                 runs.string() +
                 "')\n"
                 "printf '{\"Version\": 1, \"AccessKeyId\": \"S3RVER\", \"SecretAccessKey\": "
                 "\"S3RVER\", \"SessionToken\": \"process-%s\"}' \"$n\"\n");
  write_text(env.home() / ".aws" / "config",
             "[default]\ncredential_process = sh " + (dir / "credentials.sh").string() + "\n");
  const auto count_runs = [&] {
    std::ifstream in(runs);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  };

  round_trip(without_keys(), "process");
  const int first_runs = count_runs();
  CHECK(first_runs >= 1);
  CHECK_THAT(server.traffic().last_security_token, Catch::Contains("process-"));

  // The store refuses the credentials once (expired): the process runs again, the request is
  // sent again with what it printed, and the save goes through.
  const std::string url = "s3://" + server.create_bucket("process-refused") + "/ckpt";
  dcpp::SaveOptions saving;
  saving.s3 = without_keys();
  server.inject(S3Fault{"PUT", ".metadata", 1, 400, "ExpiredToken"});
  dcpp::save(credentials_state(), url, saving);
  CHECK(count_runs() > first_runs + 1);  // the save's own resolution, then the renewal
  CHECK(server.traffic().last_security_token == "process-" + std::to_string(count_runs()));

  // A process that fails is an error naming it.
  write_text(dir / "credentials.sh", "exit 3\n");
  const dcpp::CheckpointError failed =
      error_of([&] { dcpp::save(credentials_state(), url, saving); });
  CHECK(failed.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(std::string(failed.what()),
             Catch::Contains("credential_process") && Catch::Contains("status"));
}

TEST_CASE("S3 credentials read again from the shared files when the store refuses them") {
  S3TestServer& server = S3TestServer::get();
  ScopedAwsEnvironment env;
  const fs::path file = env.home() / ".aws" / "credentials";
  write_text(file,
             "[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n"
             "aws_session_token = first\n");
  const std::string url = "s3://" + server.create_bucket("rotated") + "/ckpt";
  dcpp::S3StorageWriter writer(url, dcpp::S3WriterOptions::from({}, without_keys()));
  writer.set_up(0, true);  // resolves the credentials: "first"
  // The job's credentials are rotated under it; the store refuses the old token.
  write_text(file,
             "[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n"
             "aws_session_token = second\n");
  server.inject(S3Fault{"", "", 1, 400, "ExpiredToken"});
  dcpp::SaveOptions saving;
  dcpp::save(credentials_state(), writer, saving);
  CHECK(server.traffic().last_security_token == "second");
}

TEST_CASE("S3 credentials from web identity (STS), asked for again before they expire") {
  S3TestServer& server = S3TestServer::get();
  ScopedAwsEnvironment env;
  env.use_web_identity(server.credentials_endpoint() + "/sts");
  // Credentials that expire within the client's five-minute margin: renewed before each request.
  server.set_credentials_ttl(120);
  server.reset_traffic();
  round_trip(without_keys(), "web-identity");
  const dcpp::test::S3Traffic traffic = server.traffic();
  server.set_credentials_ttl(3600);
  CHECK(traffic.credentials_issued > 2);
  CHECK(traffic.last_security_token == "token-" + std::to_string(traffic.credentials_issued));

  // A token STS refuses is an error naming the role.
  write_text(env.home() / "token", "not-the-token\n");
  const dcpp::CheckpointError refused =
      error_of([] { round_trip(without_keys(), "web-identity-refused"); });
  CHECK(refused.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(std::string(refused.what()),
             Catch::Contains("dcpp-test") && Catch::Contains("InvalidIdentityToken"));
}

TEST_CASE(
    "S3 credentials whose renewal fails are asked for again once in a while, not per request") {
  S3TestServer& server = S3TestServer::get();
  ScopedAwsEnvironment env;
  env.use_web_identity(server.credentials_endpoint() + "/sts");
  server.set_credentials_ttl(120);  // within the five-minute margin: due before every request
  dcpp::S3Prefix prefix("s3://" + server.create_bucket("renewal") + "/objects", without_keys());
  prefix.write("first", "1");  // credentials from STS
  S3Fault sts_down;
  sts_down.path_contains = "__dcpp_credentials/sts";
  sts_down.status = 500;
  sts_down.times = 1000;
  server.inject(sts_down);
  server.reset_traffic();
  for (int i = 0; i < 10; ++i) prefix.write("object-" + std::to_string(i), "x");
  const dcpp::test::S3Traffic traffic = server.traffic();
  server.clear_faults();
  server.set_credentials_ttl(3600);
  CHECK(traffic.faults == 1);  // one renewal tried; the other nine writes signed with the old keys
  CHECK(prefix.read("object-9") == std::optional<std::string>("x"));
}

TEST_CASE("S3 credentials from a container's endpoint and from EC2's instance metadata") {
  S3TestServer& server = S3TestServer::get();
  SECTION("container") {
    ScopedAwsEnvironment env;
    env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", server.credentials_endpoint() + "/container");
    env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "dcpp-container-token");
    server.reset_traffic();
    round_trip(without_keys(), "container");
    CHECK(server.traffic().credentials_issued >= 1);
    env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong");
    const dcpp::CheckpointError refused =
        error_of([] { round_trip(without_keys(), "container-refused"); });
    CHECK_THAT(std::string(refused.what()), Catch::Contains("container") && Catch::Contains("403"));
  }
  SECTION("instance metadata, IMDSv2") {
    ScopedAwsEnvironment env;
    env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.credentials_endpoint() + "/imds");
    server.reset_traffic();
    round_trip(without_keys(), "imds");
    CHECK(server.traffic().credentials_issued >= 1);
    CHECK_THAT(server.traffic().last_security_token, Catch::Contains("token-"));
  }
}
