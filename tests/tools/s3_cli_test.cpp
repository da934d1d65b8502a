// `dcpp inspect | verify | convert | diff` on s3:// checkpoints, the store from the AWS_*
// environment as a user's shell gives it.

#include "dcpp_test.h"
#include "s3_test_server.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/s3_storage.h>

#include "s3/config/s3_config.h"
#include "s3/protocol/s3_client.h"

namespace {

using dcpp::test::S3TestServer;

// Runs the dcpp command line with the test server in its environment.
dcpp::test::CommandResult dcpp_cli(const S3TestServer& server, const std::string& arguments) {
  const dcpp::S3Options s3 = server.options();
  return dcpp::test::run_command(
      "env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL_S3 AWS_ENDPOINT_URL=" +
      s3.endpoint_url + " AWS_REGION=" + s3.region + " AWS_ACCESS_KEY_ID=" + s3.access_key_id +
      " AWS_SECRET_ACCESS_KEY=" + s3.secret_access_key + " " + DCPP_CLI + " " + arguments +
      " 2>&1");
}

}  // namespace

TEST_CASE("s3: dcpp inspect, verify, convert and diff take s3:// checkpoints") {
  S3TestServer& server = S3TestServer::get();
  server.clear_faults();
  const std::string bucket = server.create_bucket("cli");
  const std::string url = "s3://" + bucket + "/ckpt";
  dcpp::StateDict state;
  state.insert("layer.weight", at::randn({32, 16}));
  state.insert("layer.bias", at::randn({16}));
  state.insert("step", c10::IValue(int64_t{7}));
  dcpp::SaveOptions save;
  save.s3 = server.options();
  dcpp::save(state, url, save);

  const auto inspected = dcpp_cli(server, "inspect " + url);
  INFO(inspected.output);
  REQUIRE(inspected.exit_code == 0);
  CHECK_THAT(inspected.output, Catch::Contains("layer.weight") && Catch::Contains("[32,16]") &&
                                   !Catch::Contains("missing"));

  const auto verified = dcpp_cli(server, "verify " + url);
  INFO(verified.output);
  REQUIRE(verified.exit_code == 0);
  CHECK_THAT(verified.output,
             Catch::Contains("ok: " + url) && Catch::Contains("checksum file included"));

  dcpp::test::TempDir dir;
  const auto to_file =
      dcpp_cli(server, "convert " + url + " " + (dir / "model.pt").string() + " --to torch-save");
  INFO(to_file.output);
  REQUIRE(to_file.exit_code == 0);
  const std::string copy = "s3://" + bucket + "/copy";
  const auto to_store =
      dcpp_cli(server, "convert " + (dir / "model.pt").string() + " " + copy + " --to dcp");
  INFO(to_store.output);
  REQUIRE(to_store.exit_code == 0);
  const auto compared = dcpp_cli(server, "diff " + url + " " + copy);
  INFO(compared.output);
  CHECK(compared.exit_code == 0);
  CHECK_THAT(compared.output, Catch::Contains("equal: "));

  // An altered byte of a data object: verify names the object and the key.
  dcpp::S3Options direct = server.options();
  direct.endpoint_url = server.direct_endpoint();
  dcpp::detail::S3Client client(dcpp::detail::resolve_s3_config(direct, bucket));
  std::string object = client.get_object("ckpt/__0_0.distcp");
  object[object.size() / 2] = static_cast<char>(object[object.size() / 2] ^ 1);
  client.put_object("ckpt/__0_0.distcp", object);
  const auto damaged = dcpp_cli(server, "verify " + url);
  INFO(damaged.output);
  CHECK(damaged.exit_code == 1);
  CHECK_THAT(damaged.output, Catch::Contains("__0_0.distcp") && Catch::Contains("CRC-32"));
}
