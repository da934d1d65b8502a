#pragma once
// A real S3-compatible server for the tests: s3rver (npm) on loopback, installed by `make test`
// (tests/s3/install_s3_server.sh), behind a fault-injecting proxy of our own
// (tests/s3/fault_proxy.js) through which the tests make it fail as a store or a network fails.
// The proxy checks each upload's Content-MD5 as S3 does (s3rver does not).

#include <dcpp/storage/s3_options.h>

#include <cstdint>
#include <map>
#include <string>

namespace dcpp::test {

/// What the proxy does to the next `times` requests that match `method` (empty: any) and whose
/// path, query included ("?partNumber=2"), contains `path_contains` (empty: any; the credential
/// endpoints' paths start "/__dcpp_credentials/sts", ".../imds", ".../container"). One of:
///   - status != 0: answers it with that HTTP status and an S3 XML error body whose Code is
///     `code` (e.g. 503 "SlowDown", 500 "InternalError"), without forwarding it, and with
///     `retry_after_seconds` >= 0 a Retry-After header of that many seconds;
///   - drop_request_after_bytes != 0: forwards nothing; reads that many bytes of the request
///     body, then resets the connection (a connection dropped mid-upload);
///   - drop_response_after_bytes != 0: forwards the request, then sends the response's headers
///     and only that many bytes of its body before resetting the connection (the reset may
///     overtake the last of them: the client gets at most that many).
struct S3Fault {
  std::string method;
  std::string path_contains;
  int times = 1;
  int status = 0;
  std::string code = "InternalError";
  uint64_t drop_request_after_bytes = 0;
  uint64_t drop_response_after_bytes = 0;
  int retry_after_seconds = -1;
  /// Forwards it with one bit of its body's first byte flipped (bytes changed on the way).
  bool corrupt_request_body = false;
  /// Accepts it, reads its body and never answers (a store, STS or IMDS that hangs), until the
  /// client gives up or clear_faults() closes the connection.
  bool stall = false;
  /// Forwards it and flips one bit in the middle of its answer's first bytes (a body changed on
  /// the way back).
  bool corrupt_response_body = false;
};

/// What the proxy forwarded or failed since the last reset_traffic().
struct S3Traffic {
  int requests = 0;             // every request the proxy received
  int faults = 0;               // those a fault answered or dropped
  uint64_t get_body_bytes = 0;  // response body bytes of forwarded GETs
  uint64_t put_body_bytes = 0;  // request body bytes of forwarded PUTs and POSTs
  int ranged_gets = 0;          // forwarded GETs with a Range header
  int aborted_uploads = 0;      // AbortMultipartUpload requests (DELETE ...?uploadId=)
  int most_in_flight = 0;       // the most requests the proxy held at once
  int credentials_issued = 0;   // by the credential endpoints (credentials_endpoint())
  int bad_digests = 0;          // bodies refused for their Content-MD5 or CRC-32C (by the proxy)
  int crc32c_checked = 0;       // PUTs whose x-amz-checksum-crc32c the proxy checked and returned
  int content_md5_sent = 0;     // requests that carried a Content-MD5
  std::map<std::string, int> gets_by_name;  // GETs by the object's name (".metadata")
  std::string last_security_token;  // the x-amz-security-token of the last request forwarded
};

/// The process-wide server, started on first use and stopped at exit: s3rver on 127.0.0.1 with a
/// free port and its data in a fresh temporary directory, and the proxy in front of it. Throws
/// std::runtime_error, saying to run `make s3-server` (or tests/s3/install_s3_server.sh), when
/// s3rver or node is not installed, or naming the log when a server does not start.
class S3TestServer {
 public:
  static S3TestServer& get();

  /// The proxy's URL ("http://127.0.0.1:PORT"): what the tests' clients use.
  std::string endpoint() const;
  /// s3rver's own URL, bypassing the proxy and its faults.
  std::string direct_endpoint() const;
  /// Creates a new, empty bucket named after `hint` (made unique and valid) and returns its name.
  std::string create_bucket(const std::string& hint);
  /// Options that reach this server through the proxy: endpoint(), region us-east-1, path-style,
  /// credentials S3RVER/S3RVER, max_attempts 4, backoff 10 ms to 100 ms, stall timeout 5 s.
  S3Options options() const;
  /// The proxy's stand-ins for the credential endpoints,
  /// "http://127.0.0.1:PORT/__dcpp_credentials":
  /// + "/sts" (STS, AssumeRoleWithWebIdentity for the token "dcpp-web-identity-token"), + "/imds"
  /// (EC2's instance metadata), + "/container" (Authorization "dcpp-container-token"). Each
  /// gives the key pair the server accepts, a new session token and an expiration
  /// `ttl_seconds` ahead (set_credentials_ttl; 3600 by default).
  std::string credentials_endpoint() const;
  /// Begins a multipart upload of `key` through the proxy and leaves it (what a killed writer
  /// leaves); returns its id. The proxy keeps the uploads begun through it and answers
  /// ListMultipartUploads and AbortMultipartUpload for them (s3rver implements neither).
  std::string begin_upload(const std::string& bucket, const std::string& key);
  /// The multipart uploads in progress in `bucket`, as the proxy lists them.
  int uploads_in_progress(const std::string& bucket);
  void set_credentials_ttl(int ttl_seconds);
  /// Whether the proxy checks and returns x-amz-checksum-crc32c as S3 does (the default), or
  /// ignores it as s3rver does; clear_faults() makes it check again.
  void set_crc32c_checks(bool checks);
  /// Adds a fault (faults apply in the order added; each is spent after `times` matches).
  void inject(const S3Fault& fault);
  void clear_faults();
  S3Traffic traffic() const;
  void reset_traffic();

  ~S3TestServer();

 private:
  S3TestServer();
  struct State;
  State* state_;
};

}  // namespace dcpp::test
