// The tests' S3 server itself (s3_test_server.h): s3rver behind the fault proxy stores and serves
// objects, and the proxy fails the requests it is told to, as S3 or a network would.

#include "dcpp_test.h"

#include "storage/s3_test_server.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <string>

using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;

namespace {

struct Reply {
  CURLcode result = CURLE_OK;
  long status = 0;
  std::string body;
};

struct Upload {
  const std::string* bytes;
  size_t sent = 0;
};

size_t read_upload(char* buffer, size_t size, size_t count, void* user) {
  auto* upload = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, upload->bytes->size() - upload->sent);
  std::copy_n(upload->bytes->data() + upload->sent, n, buffer);
  upload->sent += n;
  return n;
}

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// A request signed as the S3 driver signs them (SigV4, unsigned payload); a PUT streams `body`.
Reply s3_request(const std::string& method, const std::string& url, const std::string& body = {}) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  CURL* c = curl.get();
  Reply reply;
  Upload upload{&body};
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
      curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD"), curl_slist_free_all);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
  curl_easy_setopt(c, CURLOPT_USERPWD, "S3RVER:S3RVER");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  if (method == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, read_upload);
    curl_easy_setopt(c, CURLOPT_READDATA, &upload);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
  } else if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  reply.result = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

std::string pattern_bytes(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 131 + i / 4099) & 0xff);
  return bytes;
}

// A fresh bucket with no faults pending and the traffic counted from zero.
std::string fresh_bucket(S3TestServer& server, const std::string& hint) {
  server.clear_faults();
  const std::string bucket = server.create_bucket(hint);
  server.reset_traffic();
  return bucket;
}

}  // namespace

TEST_CASE("s3 test server: objects round-trip through the proxy", "[s3]") {
  S3TestServer& server = S3TestServer::get();
  const std::string bucket = fresh_bucket(server, "Round_Trip!");
  CHECK(bucket.size() <= 63);
  CHECK(bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
  const std::string bytes = pattern_bytes(3 << 20);
  const std::string url = server.endpoint() + "/" + bucket + "/dir/object.bin";

  const Reply put = s3_request("PUT", url, bytes);
  REQUIRE(put.result == CURLE_OK);
  REQUIRE(put.status == 200);
  const Reply got = s3_request("GET", url);
  REQUIRE(got.result == CURLE_OK);
  CHECK(got.status == 200);
  CHECK(got.body == bytes);
  // And s3rver holds it, seen past the proxy.
  CHECK(s3_request("GET", server.direct_endpoint() + "/" + bucket + "/dir/object.bin").body ==
        bytes);

  const auto traffic = server.traffic();
  CHECK(traffic.requests == 2);
  CHECK(traffic.faults == 0);
  CHECK(traffic.put_body_bytes == bytes.size());
  CHECK(traffic.get_body_bytes == bytes.size());
  CHECK(traffic.ranged_gets == 0);

  const dcpp::S3Options options = server.options();
  CHECK(options.endpoint_url == server.endpoint());
  CHECK(options.path_style == true);
  CHECK(options.access_key_id == "S3RVER");
}

TEST_CASE("s3 test server: an injected status answers as S3 would", "[s3]") {
  S3TestServer& server = S3TestServer::get();
  const std::string bucket = fresh_bucket(server, "status");
  const std::string url = server.endpoint() + "/" + bucket + "/object";
  REQUIRE(s3_request("PUT", url, "hello").status == 200);

  S3Fault elsewhere;  // matches no request made here
  elsewhere.path_contains = "/another-object";
  elsewhere.status = 500;
  server.inject(elsewhere);
  S3Fault slow_down;
  slow_down.method = "GET";
  slow_down.times = 2;
  slow_down.status = 503;
  slow_down.code = "SlowDown";
  server.inject(slow_down);

  for (int i = 0; i < 2; ++i) {
    const Reply reply = s3_request("GET", url);
    REQUIRE(reply.result == CURLE_OK);
    CHECK(reply.status == 503);
    CHECK_THAT(reply.body, Catch::Contains("<Code>SlowDown</Code>"));
  }
  const Reply spent = s3_request("GET", url);  // the fault is spent
  CHECK(spent.status == 200);
  CHECK(spent.body == "hello");

  const auto traffic = server.traffic();
  CHECK(traffic.requests == 4);
  CHECK(traffic.faults == 2);
  CHECK(traffic.get_body_bytes == 5);
}

TEST_CASE("s3 test server: a request dropped mid-upload fails and stores nothing", "[s3]") {
  S3TestServer& server = S3TestServer::get();
  const std::string bucket = fresh_bucket(server, "drop-request");
  const std::string key = "/" + bucket + "/dropped";

  S3Fault drop;
  drop.method = "PUT";
  drop.drop_request_after_bytes = 64 << 10;
  server.inject(drop);
  const Reply put = s3_request("PUT", server.endpoint() + key, pattern_bytes(2 << 20));
  CHECK(put.result != CURLE_OK);
  CHECK(s3_request("HEAD", server.direct_endpoint() + key).status == 404);

  const auto traffic = server.traffic();
  CHECK(traffic.requests == 1);
  CHECK(traffic.faults == 1);
  CHECK(traffic.put_body_bytes == 0);
}

TEST_CASE("s3 test server: a response dropped mid-body ends short", "[s3]") {
  S3TestServer& server = S3TestServer::get();
  const std::string bucket = fresh_bucket(server, "drop-response");
  const std::string url = server.endpoint() + "/" + bucket + "/object";
  const std::string bytes = pattern_bytes(1 << 20);
  REQUIRE(s3_request("PUT", url, bytes).status == 200);

  S3Fault drop;
  drop.method = "GET";
  drop.drop_response_after_bytes = 1000;
  server.inject(drop);
  const Reply got = s3_request("GET", url);
  CHECK(got.result != CURLE_OK);
  CHECK(got.body.size() <= 1000);
  CHECK(got.body == bytes.substr(0, got.body.size()));
  CHECK(s3_request("GET", url).body == bytes);  // spent

  CHECK(server.traffic().faults == 1);
}
