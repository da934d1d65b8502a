// S3Options built with its setters alone, as the other options structs are: every field they set
// is the one named, and such options reach the store.

#include "dcpp_test.h"
#include "storage/s3_test_server.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/s3_options.h>

#include <ATen/ATen.h>

using dcpp::test::S3TestServer;

TEST_CASE("S3Options' setters set the fields they name") {
  const dcpp::S3Options options = dcpp::S3Options()
                                      .with_endpoint_url("http://127.0.0.1:9000")
                                      .with_region("eu-west-3")
                                      .with_profile("training")
                                      .with_credentials("AKID", "SECRET", "TOKEN")
                                      .with_path_style(false)
                                      .with_max_attempts(7)
                                      .with_initial_backoff(std::chrono::milliseconds(20))
                                      .with_max_backoff(std::chrono::milliseconds(900))
                                      .with_throttle_budget(std::chrono::seconds(45))
                                      .with_process_requests_in_flight(16)
                                      .with_stall_timeout(std::chrono::seconds(30))
                                      .with_connect_timeout(std::chrono::seconds(3))
                                      .with_part_size(64ull << 20)
                                      .with_concurrency(2)
                                      .with_content_md5(false)
                                      .with_crc32c(false);
  CHECK(options.endpoint_url == "http://127.0.0.1:9000");
  CHECK(options.region == "eu-west-3");
  CHECK(options.profile == "training");
  CHECK(options.access_key_id == "AKID");
  CHECK(options.secret_access_key == "SECRET");
  CHECK(options.session_token == "TOKEN");
  CHECK(options.path_style == std::optional<bool>(false));
  CHECK(options.max_attempts == 7);
  CHECK(options.initial_backoff == std::chrono::milliseconds(20));
  CHECK(options.max_backoff == std::chrono::milliseconds(900));
  CHECK(options.throttle_budget == std::chrono::seconds(45));
  CHECK(options.process_requests_in_flight == 16);
  CHECK(options.stall_timeout == std::chrono::seconds(30));
  CHECK(options.connect_timeout == std::chrono::seconds(3));
  CHECK(options.part_size == (64ull << 20));
  CHECK(options.concurrency == 2);
  CHECK_FALSE(options.content_md5);
  CHECK_FALSE(options.crc32c);
}

TEST_CASE("S3Options made with setters reach the store: a save and a load, bit for bit") {
  S3TestServer& server = S3TestServer::get();
  const dcpp::S3Options s3 = dcpp::S3Options()
                                 .with_endpoint_url(server.endpoint())
                                 .with_region("us-east-1")
                                 .with_credentials("S3RVER", "S3RVER")
                                 .with_path_style(true)
                                 .with_part_size(5 << 20);
  const std::string url = "s3://" + server.create_bucket("setters") + "/ckpt";
  dcpp::StateDict saved;
  saved.insert("w", at::arange(1000, at::kFloat));
  dcpp::SaveOptions save;
  save.s3 = s3;
  dcpp::save(saved, url, save);
  dcpp::StateDict loaded;
  loaded.insert("w", at::zeros({1000}, at::kFloat));
  dcpp::LoadOptions load;
  load.s3 = s3;
  dcpp::load(loaded, url, load);
  CHECK(at::equal(loaded.at("w").tensor(), saved.at("w").tensor()));
}
