#include "s3/protocol/s3_client.h"

#include "core/logging.h"
#include "s3/protocol/content_crc32c.h"
#include "s3/protocol/content_md5.h"
#include "s3/protocol/process_request_limit.h"
#include "s3/protocol/s3_http.h"
#include "s3/protocol/s3_xml.h"
#include "s3/protocol/sigv4_uri_encoding.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_deadline.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

namespace dcpp::detail {

namespace {

/// libcurl's failures that a new connection may mend.
bool is_retryable_transport(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SEND_FAIL_REWIND:
      return true;
    default:
      return false;
  }
}

bool is_retryable_status(long status) {
  return status == 500 || status == 502 || status == 503 || status == 504 || status == 429;
}

/// S3's error codes that say "try again" whatever the status (a CompleteMultipartUpload answers
/// 200 and then an <Error>; a socket S3 gave up on is a 400 RequestTimeout).
bool is_retryable_code(const std::string& code) {
  return code == "InternalError" || code == "SlowDown" || code == "ServiceUnavailable" ||
         code == "RequestTimeout" || code == "BadDigest";  // bytes changed on the way
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

/// A uniformly random duration in [0, cap]: "full jitter".
std::chrono::milliseconds jittered(std::chrono::milliseconds cap) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  if (cap.count() <= 0) return cap;
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, cap.count())(random));
}

// Whether an endpoint checks x-amz-checksum-crc32c: not known until an upload's answer says.
enum class Crc32cChecks { kUnknown, kYes, kNo };

// The process's knowledge of `endpoint` (what its answers said), shared by all its clients: each
// save makes clients of its own, and needs not learn again.
std::shared_ptr<std::atomic<Crc32cChecks>> crc32c_checks_of(const std::string& endpoint) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<std::atomic<Crc32cChecks>>> by_endpoint;
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<std::atomic<Crc32cChecks>>& checks = by_endpoint[endpoint];
  if (!checks) checks = std::make_shared<std::atomic<Crc32cChecks>>(Crc32cChecks::kUnknown);
  return checks;
}

}  // namespace

class S3Client::Impl {
 public:
  explicit Impl(S3Config config)
      : config_(std::move(config)),
        transport_(config_),
        credentials_(std::make_shared<const S3Credentials>(
            S3Credentials{config_.access_key_id, config_.secret_access_key, config_.session_token,
                          config_.credentials_source, config_.credentials_expiration})) {
    const std::string& endpoint = config_.endpoint_url;
    if (config_.path_style) {
      bucket_url_ = endpoint + "/" + s3_uri_encode(config_.bucket, true);
    } else {
      const std::size_t host = endpoint.find("://") + 3;
      bucket_url_ = endpoint.substr(0, host) + config_.bucket + "." + endpoint.substr(host);
    }
  }

  const S3Config& config() const { return config_; }

  /// One request and what to say about it.
  struct Call {
    std::string what;  // "PUT s3://bucket/key (part 3 of upload ID)", for messages
    std::string key;   // "" for the bucket
    HttpRequest request;
    /// The answer may be 200 with an <Error> body (CompleteMultipartUpload): a failure then.
    bool error_in_ok_body = false;
  };

  /// The last try's answer, and how many tries it took.
  struct Outcome {
    HttpResponse response;
    int attempts = 0;
    std::optional<S3ErrorBody> error;        // the <Error> of the body, if any
    bool retry_after_beyond_budget = false;  // its Retry-After asked for more than was left
    bool past_deadline = false;              // the thread's S3Deadline ended its tries

    bool ok(bool error_in_ok_body) const {
      return response.transport == CURLE_OK && response.status / 100 == 2 &&
             !(error_in_ok_body && error);
    }
  };

  std::string object_url(const std::string& key, const std::string& query = "") const {
    std::string url = bucket_url_ + "/" + s3_uri_encode(key, false);
    if (!query.empty()) url += "?" + query;
    return url;
  }

  /// The bucket's URL: "endpoint/bucket" path-style, "bucket.endpoint/" virtual-hosted.
  std::string bucket_url(const std::string& query = "") const {
    std::string url = config_.path_style ? bucket_url_ : bucket_url_ + "/";
    if (!query.empty()) url += "?" + query;
    return url;
  }

  std::string url_of(const std::string& key) const { return "s3://" + config_.bucket + "/" + key; }

  Call object_call(const char* method, const std::string& key, const std::string& query = "",
                   const std::string& suffix = "") const {
    if (key.empty()) {
      throw CheckpointError(ErrorKind::kUsage, std::string("S3 ") + method + " in bucket '" +
                                                   config_.bucket +
                                                   "' without an object key: name an object");
    }
    Call call;
    call.what = std::string(method) + " " + url_of(key) + suffix;
    call.key = key;
    call.request.method = method;
    call.request.url = object_url(key, query);
    return call;
  }

  /// Whether `outcome` is a failure another try may mend.
  static bool retryable(const Call& call, const Outcome& outcome) {
    const HttpResponse& response = outcome.response;
    if (response.transport != CURLE_OK) return is_retryable_transport(response.transport);
    if (is_retryable_status(response.status)) return true;
    if (!outcome.error || !is_retryable_code(outcome.error->code)) return false;
    return response.status == 400 || (call.error_in_ok_body && response.status / 100 == 2);
  }

  /// Whether the store refused the credentials themselves (expired, unknown, badly signed, or
  /// a 400 or 403 without a body, a HEAD's, which cannot say): asking for them again may mend it.
  static bool refused_credentials(const Outcome& outcome) {
    const long status = outcome.response.status;
    if (outcome.response.transport != CURLE_OK || (status != 400 && status != 403)) return false;
    if (!outcome.error) return status == 403 || outcome.response.body.empty();
    const std::string& code = outcome.error->code;
    return code == "ExpiredToken" || code == "TokenRefreshRequired" || code == "InvalidToken" ||
           code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
           code == "RequestExpired" || code == "AccessDenied";
  }

  /// The credentials to sign with now: asked for again first when they expire within five
  /// minutes, by one request at a time; the others sign with the old ones meanwhile (they wait
  /// only once those have expired). When asking fails, the old ones are used while they last,
  /// with a warning, and no request asks again for kRenewalRetry: an STS or IMDS that hangs costs
  /// one request its timeout, not every request.
  std::shared_ptr<const S3Credentials> current_credentials() {
    using SystemClock = std::chrono::system_clock;
    std::unique_lock<std::mutex> lock(credentials_mutex_);
    for (;;) {
      const auto& expiration = credentials_->expiration;
      const SystemClock::time_point now = SystemClock::now();
      const bool due = expiration && config_.reload_credentials &&
                       now + std::chrono::minutes(5) >= *expiration &&
                       std::chrono::steady_clock::now() >= next_renewal_;
      if (!due) return credentials_;
      if (!renewing_) break;
      if (now < *expiration) return credentials_;  // another request is renewing them
      renewal_done_.wait(lock);
    }
    renewing_ = true;
    lock.unlock();
    std::shared_ptr<const S3Credentials> fresh;
    std::string failure;
    try {
      fresh = std::make_shared<const S3Credentials>(config_.reload_credentials());
    } catch (const std::exception& e) {
      failure = e.what();
    }
    lock.lock();
    renewing_ = false;
    if (fresh) {
      credentials_ = std::move(fresh);
      logger().debug("S3 credentials for bucket '{}' renewed before they expire (from {})",
                     config_.bucket, credentials_->source);
    } else {
      next_renewal_ = std::chrono::steady_clock::now() + kRenewalRetry;
      logger().warn(
          "renewing the S3 credentials for bucket '{}' failed (the old ones are used while they "
          "last; asked again in {} s): {}",
          config_.bucket, kRenewalRetry.count(), failure);
    }
    renewal_done_.notify_all();
    return credentials_;
  }

  /// After the store refused `used`: asks for the credentials again. True when the request may
  /// be sent again (they changed, or another request renewed them meanwhile).
  bool renew_refused(const std::shared_ptr<const S3Credentials>& used) {
    const std::lock_guard<std::mutex> lock(credentials_mutex_);
    if (credentials_ != used) return true;
    if (!config_.reload_credentials) return false;
    try {
      S3Credentials fresh = config_.reload_credentials();
      if (fresh.same_keys(*credentials_)) return false;
      logger().info("S3 credentials for bucket '{}' refused; using new ones from {}",
                    config_.bucket, fresh.source);
      credentials_ = std::make_shared<const S3Credentials>(std::move(fresh));
      return true;
    } catch (const std::exception& e) {
      logger().warn("asking for S3 credentials again for bucket '{}' failed: {}", config_.bucket,
                    e.what());
      return false;
    }
  }

  /// Whether the store asks us to slow down (503, 429, SlowDown): the throttle budget applies.
  static bool throttled(const Outcome& outcome) {
    const long status = outcome.response.status;
    return outcome.response.transport == CURLE_OK &&
           (status == 503 || status == 429 || (outcome.error && outcome.error->code == "SlowDown"));
  }

  /// Sends `call`, again after a backoff while it fails in a way a retry may mend: up to
  /// max_attempts tries, or while throttled, until throttle_budget has passed since the first
  /// (each wait at least the answer's Retry-After). Each try holds one of the process's request
  /// slots. Returns the last answer, success or not; throws only bad_alloc and the like.
  Outcome execute(const Call& call) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point first_try = Clock::now();
    std::chrono::milliseconds backoff = config_.initial_backoff;
    Outcome outcome;
    bool renewed = false;
    const std::optional<Clock::time_point> deadline = S3Deadline::current();
    for (int attempt = 1;; ++attempt) {
      const std::shared_ptr<const S3Credentials> credentials = current_credentials();
      {
        const ProcessRequestSlot slot(config_.process_requests_in_flight);
        if (deadline) {
          const auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
          if (left.count() <= 0) {
            outcome.past_deadline = true;
            outcome.attempts = attempt - 1;
            return outcome;
          }
          HttpRequest bounded = call.request;
          bounded.timeout_ms = left.count();
          outcome.response = transport_.perform(bounded, *credentials);
        } else {
          outcome.response = transport_.perform(call.request, *credentials);
        }
      }
      outcome.attempts = attempt;
      if (deadline && outcome.response.transport == CURLE_OPERATION_TIMEDOUT &&
          Clock::now() >= *deadline) {
        outcome.past_deadline = true;
        return outcome;
      }
      // A 2xx body is the payload (megabytes, maybe): parsed only where it may be an <Error>.
      const bool may_be_error = outcome.response.status / 100 != 2 || call.error_in_ok_body;
      outcome.error = may_be_error ? parse_s3_error(outcome.response.body) : std::nullopt;
      if (!renewed && refused_credentials(outcome) && renew_refused(credentials)) {
        renewed = true;  // once per request: new credentials the store refuses too are an error
        continue;
      }
      if (outcome.ok(call.error_in_ok_body) || !retryable(call, outcome)) return outcome;
      std::chrono::milliseconds delay = jittered(backoff);
      if (outcome.response.retry_after_seconds) {
        // Obeyed within the throttle budget only: a store asking for more (an hour, say) would
        // stall a collective save that long; the request fails now, saying so.
        const std::chrono::seconds asked(*outcome.response.retry_after_seconds);
        if (Clock::now() + asked - first_try > config_.throttle_budget) {
          outcome.retry_after_beyond_budget = true;
          return outcome;
        }
        delay = std::max<std::chrono::milliseconds>(delay, asked);
      }
      const bool within_budget =
          throttled(outcome) && Clock::now() + delay - first_try <= config_.throttle_budget;
      if (attempt >= config_.max_attempts && !within_budget) return outcome;
      if (deadline && Clock::now() + delay >= *deadline) {
        outcome.past_deadline = true;  // no answer worth waiting for before it
        return outcome;
      }
      logger().debug("S3 {} failed ({}), try {} of {}; trying again in {} ms", call.what,
                     describe(outcome), attempt, config_.max_attempts, delay.count());
      std::this_thread::sleep_for(delay);
      backoff = std::min(backoff * 2, config_.max_backoff);
    }
  }

  /// "HTTP 503 SlowDown: Please reduce your request rate", "HTTP 404 (no error body)", or
  /// libcurl's account of a transport failure.
  static std::string describe(const Outcome& outcome) {
    const HttpResponse& response = outcome.response;
    if (response.transport != CURLE_OK) {
      if (response.dst_overflow) return "more bytes than asked for";
      std::string text = response.transport_error;
      if (response.status != 0) text += " (after HTTP " + std::to_string(response.status) + ")";
      return text;
    }
    std::string text = "HTTP " + std::to_string(response.status);
    if (outcome.error) {
      text += " " + outcome.error->code;
      if (!outcome.error->message.empty()) text += ": " + outcome.error->message;
    } else if (response.status / 100 != 2) {
      text += response.body.empty() ? " (no error body)" : " (not an S3 error body)";
    }
    return text;
  }

  std::string error_code(const Outcome& outcome) const {
    return outcome.error ? outcome.error->code : "";
  }

  /// The CheckpointError for a call that failed for good (module comment of s3_client.h).
  [[noreturn]] void fail(const Call& call, const Outcome& outcome) {
    const HttpResponse& response = outcome.response;
    const std::string code = error_code(outcome);
    const std::string endpoint = " (endpoint " + config_.endpoint_url + ")";
    const std::string head = "S3 " + call.what + " failed";
    if (outcome.past_deadline) {
      throw CheckpointError(
          ErrorKind::kIo,
          head + ": no answer within the deadline (" + S3Deadline::current_what() + ") after " +
              plural(outcome.attempts, "attempt") +
              (outcome.attempts > 0 ? " (the last: " + describe(outcome) + ")" : std::string()) +
              endpoint + "; the store is down or hangs: retry when it answers");
    }
    if (outcome.retry_after_beyond_budget) {
      throw CheckpointError(ErrorKind::kIo, head + " after " + plural(outcome.attempts, "attempt") +
                                                ": " + describe(outcome) + endpoint +
                                                ": the store asked to wait " +
                                                std::to_string(*response.retry_after_seconds) +
                                                " s (Retry-After), beyond what is left of "
                                                "S3Options::throttle_budget (" +
                                                std::to_string(config_.throttle_budget.count()) +
                                                " s); retry later, or raise the budget");
    }
    if (retryable(call, outcome)) {
      throw CheckpointError(ErrorKind::kIo,
                            head + " after " + plural(outcome.attempts, "attempt") + ": " +
                                describe(outcome) + endpoint +
                                "; the store is overloaded or unreachable: retry later, or raise "
                                "S3Options::max_attempts (throttle_budget when it throttles)");
    }
    if (response.transport != CURLE_OK) {
      throw CheckpointError(ErrorKind::kIo, head + ": " + describe(outcome) + endpoint +
                                                ": check the endpoint URL and the network");
    }
    if (code == "NoSuchBucket" || (response.status == 404 && call.key.empty())) {
      throw CheckpointError(ErrorKind::kNotFound,
                            "bucket '" + config_.bucket + "' does not exist at " +
                                config_.endpoint_url + " (S3 " + call.what + ": " +
                                describe(outcome) + "): create it, or fix the s3:// URL");
    }
    if (code == "NoSuchKey" || (response.status == 404 && code.empty())) {
      throw CheckpointError(ErrorKind::kNotFound, "object " + url_of(call.key) +
                                                      " does not exist (S3 " + call.what + ": " +
                                                      describe(outcome) + ")" + endpoint);
    }
    if (code == "NoSuchUpload") {
      throw CheckpointError(ErrorKind::kIo, head + ": " + describe(outcome) + endpoint +
                                                ": the multipart upload was aborted, completed "
                                                "or expired meanwhile; write the object again");
    }
    if (response.status == 403) {
      const std::shared_ptr<const S3Credentials> credentials = current_credentials();
      throw CheckpointError(
          ErrorKind::kUsage,
          head + ": " + describe(outcome) + endpoint + ": the credentials (access key id '" +
              credentials->access_key_id + "', from " + credentials->source +
              ") may not do this in bucket '" + config_.bucket +
              "': check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or "
              "the profile (AWS_PROFILE, ~/.aws/credentials), and the bucket's policy");
    }
    if (response.status == 301 || code == "PermanentRedirect" ||
        code == "AuthorizationHeaderMalformed" || code == "IllegalLocationConstraintException") {
      const std::string where = response.bucket_region.empty()
                                    ? "another region"
                                    : "region '" + response.bucket_region + "'";
      throw CheckpointError(ErrorKind::kUsage,
                            head + ": " + describe(outcome) + endpoint + ": bucket '" +
                                config_.bucket + "' is in " + where + ", not '" + config_.region +
                                "': set AWS_REGION or S3Options::region (or the endpoint)");
    }
    throw CheckpointError(ErrorKind::kIo, head + ": " + describe(outcome) + endpoint);
  }

  /// A conditional PUT of `body` with the header `condition`: true when it was written, false
  /// when the condition did not hold.
  bool put_if(const std::string& key, std::string_view body, const std::string& condition);

  /// Sends `call` and throws unless it succeeds.
  HttpResponse run(const Call& call) {
    Outcome outcome = execute(call);
    if (!outcome.ok(call.error_in_ok_body)) fail(call, outcome);
    return std::move(outcome.response);
  }

  /// GET of a whole object; nullopt for a missing object (a 404 that is not NoSuchBucket) when
  /// `missing_ok`, else kNotFound.
  std::optional<std::string> get(const std::string& key, bool missing_ok,
                                 std::string* etag = nullptr) {
    const Call call = object_call("GET", key);
    Outcome outcome = execute(call);
    if (outcome.ok(false)) {
      if (etag) *etag = outcome.response.etag;
      return std::move(outcome.response.body);
    }
    const std::string code = error_code(outcome);
    if (missing_ok && outcome.response.transport == CURLE_OK && outcome.response.status == 404 &&
        code != "NoSuchBucket") {
      return std::nullopt;
    }
    fail(call, outcome);
  }

  /// ListObjectsV2 of `prefix`, every page, into `page_sink`.
  template <typename Sink>
  void list(const std::string& prefix, const std::string& delimiter, Sink&& page_sink) {
    std::string token;
    for (;;) {
      std::vector<std::pair<std::string, std::string>> params = {{"list-type", "2"},
                                                                 {"prefix", prefix}};
      if (!delimiter.empty()) params.emplace_back("delimiter", delimiter);
      if (!token.empty()) params.emplace_back("continuation-token", token);
      Call call;
      call.what = "GET " + url_of(prefix) + " (ListObjectsV2)";
      call.request.method = "GET";
      call.request.url = bucket_url(s3_canonical_query(std::move(params)));
      const HttpResponse response = run(call);
      std::optional<S3ListPage> page = parse_list_page(response.body);
      if (!page) {
        throw CheckpointError(ErrorKind::kIo, "S3 " + call.what + " (endpoint " +
                                                  config_.endpoint_url +
                                                  ") answered with something other than a "
                                                  "ListBucketResult: is this an S3 endpoint?");
      }
      page_sink(*page);
      if (!page->truncated) return;
      if (page->next_continuation_token.empty() || page->next_continuation_token == token) {
        throw CheckpointError(ErrorKind::kIo,
                              "S3 " + call.what + " (endpoint " + config_.endpoint_url +
                                  ") said the listing goes on but gave no new continuation token");
      }
      token = std::move(page->next_continuation_token);
    }
  }

  // The checksums of an upload of `body` (S3Options::content_md5, crc32c): the CRC-32C unless
  // the store does not check it, the MD5 unless it does. Returns the CRC-32C sent ("" if none).
  std::string add_checksums(Call& call, std::string_view body) {
    const Crc32cChecks checks = *crc32c_checks_;
    std::string crc;
    if (config_.crc32c && checks != Crc32cChecks::kNo) {
      crc = content_crc32c(body);
      call.request.headers.push_back("x-amz-checksum-crc32c: " + crc);
    }
    if (config_.content_md5 && (crc.empty() || checks != Crc32cChecks::kYes)) {
      call.request.headers.push_back("Content-MD5: " + content_md5(body));
    }
    return crc;
  }

  // What an answer to an upload that sent `crc` (or a CreateMultipartUpload that asked for
  // CRC-32C, `crc` "CRC32C") says of the store: it returned the checksum (it checked it), or not
  // (then the uploads after it carry their MD5 again).
  void learn_checksums(const std::string& crc, const std::string& returned) {
    if (crc.empty()) return;
    const Crc32cChecks learned = returned == crc ? Crc32cChecks::kYes : Crc32cChecks::kNo;
    if (crc32c_checks_->exchange(learned) != learned && learned == Crc32cChecks::kNo) {
      logger().debug(
          "S3 endpoint {} does not check x-amz-checksum-crc32c: uploads carry their "
          "Content-MD5",
          config_.endpoint_url);
    }
  }

  Crc32cChecks crc32c_checks() const { return *crc32c_checks_; }

 private:
  S3Config config_;
  S3Transport transport_;
  std::mutex credentials_mutex_;
  // The renewal before expiry (current_credentials), guarded by credentials_mutex_: whether a
  // request is asking now, and when one may ask again after a failure.
  static constexpr std::chrono::seconds kRenewalRetry{15};
  bool renewing_ = false;
  std::chrono::steady_clock::time_point next_renewal_{};
  std::condition_variable renewal_done_;
  std::shared_ptr<const S3Credentials> credentials_;  // replaced whole, never changed
  std::string bucket_url_;  // path-style "endpoint/bucket", virtual-hosted "scheme://bucket.host"
  // What the endpoint's answers said, shared by every client of the endpoint in the process.
  std::shared_ptr<std::atomic<Crc32cChecks>> crc32c_checks_ =
      crc32c_checks_of(config_.endpoint_url);
};

S3Client::S3Client(S3Config config) : impl_(std::make_unique<Impl>(std::move(config))) {}
S3Client::~S3Client() = default;

const S3Config& S3Client::config() const { return impl_->config(); }

std::string S3Client::url_of(const std::string& key) const { return impl_->url_of(key); }

void S3Client::check_bucket() {
  Impl::Call call;
  call.what = "HEAD s3://" + impl_->config().bucket;
  call.request.method = "HEAD";
  call.request.url = impl_->bucket_url();
  impl_->run(call);
}

void S3Client::put_object(const std::string& key, std::string_view body) {
  Impl::Call call = impl_->object_call("PUT", key);
  call.request.body = body;
  const std::string crc = impl_->add_checksums(call, body);
  impl_->learn_checksums(crc, impl_->run(call).checksum_crc32c);
}

bool S3Client::put_object_if_absent(const std::string& key, std::string_view body) {
  return impl_->put_if(key, body, "If-None-Match: *");
}

bool S3Client::put_object_if_match(const std::string& key, std::string_view body,
                                   const std::string& etag) {
  return impl_->put_if(key, body, "If-Match: " + etag);
}

bool S3Client::Impl::put_if(const std::string& key, std::string_view body,
                            const std::string& condition) {
  Impl::Call call = object_call("PUT", key, "", " (" + condition + ")");
  call.request.body = body;
  call.request.headers.push_back(condition);
  const std::string crc = add_checksums(call, body);
  const Impl::Outcome outcome = execute(call);
  if (outcome.ok(false)) {
    learn_checksums(crc, outcome.response.checksum_crc32c);
    return true;
  }
  // 412: the condition does not hold; 409 ConditionalRequestConflict: another such PUT is in
  // flight; 404: If-Match of an object that is gone.
  const long status = outcome.response.status;
  if (outcome.response.transport == CURLE_OK &&
      (status == 412 || status == 409 || (status == 404 && error_code(outcome) == "NoSuchKey"))) {
    return false;
  }
  fail(call, outcome);
}

std::string S3Client::get_object(const std::string& key) {
  return std::move(*impl_->get(key, false));
}

std::optional<std::string> S3Client::get_object_if_exists(const std::string& key) {
  return impl_->get(key, true);
}

std::optional<std::pair<std::string, std::string>> S3Client::get_object_and_etag(
    const std::string& key) {
  std::string etag;
  std::optional<std::string> body = impl_->get(key, true, &etag);
  if (!body) return std::nullopt;
  return std::make_pair(std::move(*body), std::move(etag));
}

void S3Client::get_range(const std::string& key, uint64_t offset, void* dst, std::size_t n) {
  if (n == 0) return;
  const uint64_t last = offset + n - 1;
  const std::string range = "bytes=" + std::to_string(offset) + "-" + std::to_string(last);
  Impl::Call call = impl_->object_call("GET", key, "", " (" + range + ")");
  call.request.headers.push_back("Range: " + range);
  call.request.dst = static_cast<char*>(dst);
  call.request.dst_size = n;
  const Impl::Outcome outcome = impl_->execute(call);
  const HttpResponse& response = outcome.response;
  const auto corrupt = [&](const std::string& what) {
    throw CheckpointError(ErrorKind::kCorrupt, "object " + url_of(key) + " " + what +
                                                   " (endpoint " + config().endpoint_url +
                                                   "): the object is not the one the "
                                                   "checkpoint's metadata describes");
  };
  if (response.dst_overflow) {
    corrupt("answered " + range + " with more than the " + std::to_string(n) + " bytes asked for");
  }
  if (response.transport == CURLE_OK && response.status == 416) {
    corrupt("ends before byte " + std::to_string(offset) + " (S3 GET " + range + ": HTTP 416)");
  }
  if (!outcome.ok(false)) impl_->fail(call, outcome);
  if (response.status != 206 && offset != 0) {
    throw CheckpointError(
        ErrorKind::kIo, "S3 " + call.what + " answered HTTP " + std::to_string(response.status) +
                            " rather than 206 Partial Content (endpoint " + config().endpoint_url +
                            "): the store ignored the Range header");
  }
  if (response.dst_bytes != n) {
    corrupt("is shorter than expected: " + range + " gave " + std::to_string(response.dst_bytes) +
            " of " + std::to_string(n) + " bytes");
  }
}

std::optional<uint64_t> S3Client::head_object(const std::string& key) {
  const std::optional<S3ObjectInfo> object = stat_object(key);
  if (!object) return std::nullopt;
  return object->size;
}

std::optional<S3ObjectInfo> S3Client::stat_object(const std::string& key) {
  const Impl::Call call = impl_->object_call("HEAD", key);
  const Impl::Outcome outcome = impl_->execute(call);
  if (outcome.ok(false)) {
    if (!outcome.response.content_length) {
      throw CheckpointError(ErrorKind::kIo, "S3 " + call.what + " (endpoint " +
                                                config().endpoint_url +
                                                ") answered without a Content-Length");
    }
    return S3ObjectInfo{key, *outcome.response.content_length, outcome.response.etag};
  }
  if (outcome.response.transport == CURLE_OK && outcome.response.status == 404) {
    return std::nullopt;
  }
  impl_->fail(call, outcome);
}

std::vector<S3ObjectInfo> S3Client::list_objects(const std::string& prefix) {
  std::vector<S3ObjectInfo> objects;
  impl_->list(prefix, "", [&](S3ListPage& page) {
    objects.insert(objects.end(), std::make_move_iterator(page.objects.begin()),
                   std::make_move_iterator(page.objects.end()));
  });
  return objects;
}

std::vector<std::string> S3Client::list_common_prefixes(const std::string& prefix) {
  std::vector<std::string> prefixes;
  impl_->list(prefix, "/", [&](S3ListPage& page) {
    prefixes.insert(prefixes.end(), std::make_move_iterator(page.common_prefixes.begin()),
                    std::make_move_iterator(page.common_prefixes.end()));
  });
  return prefixes;
}

void S3Client::delete_object(const std::string& key) {
  const Impl::Call call = impl_->object_call("DELETE", key);
  const Impl::Outcome outcome = impl_->execute(call);
  if (outcome.ok(false)) return;
  if (outcome.response.transport == CURLE_OK && outcome.response.status == 404 &&
      impl_->error_code(outcome) != "NoSuchBucket") {
    return;  // some stores answer 404 where S3 answers 204
  }
  impl_->fail(call, outcome);
}

S3NewUpload S3Client::create_multipart_upload(const std::string& key) {
  Impl::Call call = impl_->object_call("POST", key, s3_canonical_query({{"uploads", ""}}),
                                       " (CreateMultipartUpload)");
  const bool ask_crc32c = config().crc32c && impl_->crc32c_checks() != Crc32cChecks::kNo;
  if (ask_crc32c) call.request.headers.push_back("x-amz-checksum-algorithm: CRC32C");
  const HttpResponse response = impl_->run(call);
  std::optional<std::string> upload_id = parse_upload_id(response.body);
  if (!upload_id) {
    throw CheckpointError(ErrorKind::kIo, "S3 " + call.what + " (endpoint " +
                                              config().endpoint_url +
                                              ") answered without an UploadId");
  }
  S3NewUpload upload;
  upload.upload_id = std::move(*upload_id);
  if (ask_crc32c) {
    impl_->learn_checksums("CRC32C", response.checksum_algorithm);
    upload.crc32c = response.checksum_algorithm == "CRC32C";
  }
  return upload;
}

S3UploadedPart S3Client::upload_part(const std::string& key, const S3NewUpload& upload,
                                     int part_number, std::string_view body) {
  const std::string& upload_id = upload.upload_id;
  if (part_number < 1 || part_number > 10000) {
    throw CheckpointError(ErrorKind::kUsage, "S3 part number " + std::to_string(part_number) +
                                                 " of " + url_of(key) +
                                                 " is outside 1 to 10,000: raise "
                                                 "S3Options::part_size");
  }
  Impl::Call call = impl_->object_call(
      "PUT", key,
      s3_canonical_query({{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}}),
      " (part " + std::to_string(part_number) + " of upload " + upload_id + ")");
  call.request.body = body;
  S3UploadedPart part;
  part.part_number = part_number;
  // A part carries the checksum its upload was created with; the store checks it.
  if (upload.crc32c) {
    part.checksum_crc32c = content_crc32c(body);
    call.request.headers.push_back("x-amz-checksum-crc32c: " + part.checksum_crc32c);
  } else if (config().content_md5) {
    call.request.headers.push_back("Content-MD5: " + content_md5(body));
  }
  HttpResponse response = impl_->run(call);
  if (response.etag.empty()) {
    throw CheckpointError(ErrorKind::kIo, "S3 " + call.what + " (endpoint " +
                                              config().endpoint_url + ") answered without an ETag");
  }
  part.etag = std::move(response.etag);
  return part;
}

void S3Client::complete_multipart_upload(const std::string& key, const std::string& upload_id,
                                         const std::vector<S3UploadedPart>& parts) {
  std::vector<S3UploadedPart> sorted = parts;  // S3 wants ascending part numbers
  std::sort(sorted.begin(), sorted.end(), [](const S3UploadedPart& a, const S3UploadedPart& b) {
    return a.part_number < b.part_number;
  });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].part_number == sorted[i - 1].part_number) {
      throw CheckpointError(ErrorKind::kUsage,
                            "multipart upload of " + url_of(key) + " lists part " +
                                std::to_string(sorted[i].part_number) + " twice");
    }
  }
  if (sorted.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "multipart upload of " + url_of(key) + " completed without parts");
  }
  const std::string body = complete_multipart_body(sorted);
  Impl::Call call = impl_->object_call("POST", key, s3_canonical_query({{"uploadId", upload_id}}),
                                       " (CompleteMultipartUpload " + upload_id + ")");
  call.request.body = body;
  call.request.headers.push_back("Content-Type: application/xml");
  call.error_in_ok_body = true;
  const Impl::Outcome outcome = impl_->execute(call);
  if (outcome.ok(true)) return;
  // A try whose answer was lost may have completed the upload: the next finds it gone, and the
  // object there, with the ETag of these parts; an object of another ETag is an older one (or
  // another writer's), never taken for this upload's. Checked on the first try too: libcurl
  // itself sends a POST again when a reused connection closes before its answer, so a lost
  // answer's retry may be this call's only try.
  if (impl_->error_code(outcome) == "NoSuchUpload") {
    std::vector<std::string> part_etags;
    for (const S3UploadedPart& part : sorted) part_etags.push_back(part.etag);
    const std::optional<std::string> expected = multipart_etag(part_etags);
    const std::optional<S3ObjectInfo> there = stat_object(key);
    if (there && expected && there->etag == *expected) {
      logger().warn(
          "S3 {}: the upload was gone, and the object is there with these parts' ETag: taking "
          "it as completed by an earlier try whose answer was lost",
          call.what);
      return;
    }
    throw CheckpointError(
        ErrorKind::kIo,
        "S3 " + call.what + " failed: the upload was gone, and " +
            (there ? "the object there has ETag " + there->etag + ", not this upload's " +
                         expected.value_or("(unknown)") + " (an older object, or another writer's)"
                   : std::string("no object is there")) +
            "; write the object again");
  }
  impl_->fail(call, outcome);
}

std::vector<S3UploadInfo> S3Client::list_multipart_uploads(const std::string& prefix) {
  std::vector<S3UploadInfo> uploads;
  std::string key_marker, upload_id_marker;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> params = {{"uploads", ""}, {"prefix", prefix}};
    if (!key_marker.empty()) params.emplace_back("key-marker", key_marker);
    if (!upload_id_marker.empty()) params.emplace_back("upload-id-marker", upload_id_marker);
    Impl::Call call;
    call.what = "GET " + url_of(prefix) + " (ListMultipartUploads)";
    call.request.method = "GET";
    call.request.url = impl_->bucket_url(s3_canonical_query(std::move(params)));
    const HttpResponse response = impl_->run(call);
    std::optional<S3UploadsPage> page = parse_uploads_page(response.body);
    if (!page) {
      throw CheckpointError(ErrorKind::kIo, "S3 " + call.what + " (endpoint " +
                                                config().endpoint_url +
                                                ") answered with something other than a "
                                                "ListMultipartUploadsResult");
    }
    uploads.insert(uploads.end(), page->uploads.begin(), page->uploads.end());
    if (!page->truncated) return uploads;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker) {
      throw CheckpointError(ErrorKind::kIo,
                            "S3 " + call.what + " (endpoint " + config().endpoint_url +
                                ") said the listing goes on but gave no new marker");
    }
    key_marker = page->next_key_marker;
    upload_id_marker = page->next_upload_id_marker;
  }
}

void S3Client::abort_multipart_upload(const std::string& key,
                                      const std::string& upload_id) noexcept {
  try {
    const Impl::Call call =
        impl_->object_call("DELETE", key, s3_canonical_query({{"uploadId", upload_id}}),
                           " (AbortMultipartUpload " + upload_id + ")");
    const Impl::Outcome outcome = impl_->execute(call);
    if (outcome.ok(false)) return;
    if (outcome.response.transport == CURLE_OK && outcome.response.status == 404 &&
        impl_->error_code(outcome) == "NoSuchUpload") {
      return;  // gone already
    }
    impl_->fail(call, outcome);
  } catch (const std::exception& e) {
    try {
      logger().warn(
          "could not abort a multipart upload (its parts stay stored until a lifecycle "
          "rule removes them): {}",
          e.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

}  // namespace dcpp::detail
