#include "s3/protocol/s3_http.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace dcpp::detail {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) {
      throw std::runtime_error(std::string("curl_global_init failed: ") + curl_easy_strerror(code));
    }
  });
}

namespace {

constexpr long kDownloadBufferSize = 512L << 10;
constexpr long kUploadBufferSize = 1L << 20;
constexpr uint64_t kMaxBodyReserve = 1ull << 30;  // a Content-Length is a hint, not a promise

/// One request in flight: what the callbacks read and write.
struct Exchange {
  CURL* handle = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  std::size_t sent = 0;        // body bytes handed to libcurl
  bool body_started = false;   // the first body callback ran
  bool body_to_dst = false;    // the body goes to request->dst
  bool out_of_memory = false;  // a callback could not allocate: perform() throws bad_alloc
};

size_t read_body(char* buffer, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const std::string_view body = exchange->request->body;
  const size_t n = std::min(size * count, body.size() - exchange->sent);
  std::memcpy(buffer, body.data() + exchange->sent, n);
  exchange->sent += n;
  return n;
}

/// libcurl rewinds a body it must send again on a fresh connection (a reused one had closed).
int seek_body(void* user, curl_off_t offset, int origin) {
  auto* exchange = static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0 ||
      static_cast<uint64_t>(offset) > exchange->request->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  exchange->sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  HttpResponse& response = *exchange->response;
  const size_t n = size * count;
  if (!exchange->body_started) {
    exchange->body_started = true;
    long status = 0;
    curl_easy_getinfo(exchange->handle, CURLINFO_RESPONSE_CODE, &status);
    exchange->body_to_dst = exchange->request->dst != nullptr && status / 100 == 2;
  }
  if (!exchange->body_to_dst) {
    try {  // no exception may cross libcurl's C frames
      if (response.body.empty() && response.content_length) {
        response.body.reserve(std::min(*response.content_length, kMaxBodyReserve));
      }
      response.body.append(data, n);
    } catch (const std::bad_alloc&) {
      exchange->out_of_memory = true;
      return 0;
    }
    return n;
  }
  if (n > exchange->request->dst_size - response.dst_bytes) {
    response.dst_overflow = true;
    return 0;  // ends the transfer: CURLE_WRITE_ERROR
  }
  std::memcpy(exchange->request->dst + response.dst_bytes, data, n);
  response.dst_bytes += n;
  return n;
}

bool header_is(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

std::string header_value(std::string_view line, std::size_t name_size) {
  std::string_view value = line.substr(name_size + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
    value.remove_suffix(1);
  }
  return std::string(value);
}

void parse_header_line(std::string_view line, HttpResponse& response) {
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a 100 Continue): forget the last
    response.content_length.reset();
    response.etag.clear();
    response.bucket_region.clear();
    response.retry_after_seconds.reset();
    response.checksum_crc32c.clear();
    response.checksum_algorithm.clear();
  } else if (header_is(line, "x-amz-checksum-crc32c")) {
    response.checksum_crc32c = header_value(line, 21);
  } else if (header_is(line, "x-amz-checksum-algorithm")) {
    response.checksum_algorithm = header_value(line, 24);
  } else if (header_is(line, "etag")) {
    response.etag = header_value(line, 4);
  } else if (header_is(line, "x-amz-bucket-region")) {
    response.bucket_region = header_value(line, 19);
  } else if (header_is(line, "retry-after")) {  // seconds; an HTTP date is not followed
    const std::string value = header_value(line, 11);
    char* end = nullptr;
    const long long seconds = std::strtoll(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0' && seconds >= 0) response.retry_after_seconds = seconds;
  } else if (header_is(line, "content-length")) {
    const std::string value = header_value(line, 14);
    char* end = nullptr;
    const unsigned long long length = std::strtoull(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0') response.content_length = length;
  }
}

size_t receive_header_line(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  try {  // no exception may cross libcurl's C frames
    parse_header_line(std::string_view(data, size * count), *exchange->response);
  } catch (const std::bad_alloc&) {
    exchange->out_of_memory = true;
    return 0;
  }
  return size * count;
}

/// Frees a curl_slist on every path out.
struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  void append(const std::string& line) {
    curl_slist* appended = curl_slist_append(list, line.c_str());
    if (appended == nullptr) throw std::bad_alloc();
    list = appended;
  }
};

}  // namespace

S3Transport::S3Transport(const S3Config& config)
    : sigv4_("aws:amz:" + config.region + ":s3"),
      connect_timeout_ms_(static_cast<long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(config.connect_timeout).count())),
      stall_timeout_s_(static_cast<long>(config.stall_timeout.count())) {
  init_curl_once();
  // Payloads are not hashed (they may be gigabytes, streamed): S3 accepts UNSIGNED-PAYLOAD over
  // any connection, and s3rver refuses a request without the header. libcurl signs it.
  signed_headers_.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
}

S3Transport::~S3Transport() {
  for (CURL* handle : idle_) curl_easy_cleanup(handle);
}

CURL* S3Transport::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      CURL* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
  }
  CURL* handle = curl_easy_init();
  if (handle == nullptr) throw std::runtime_error("curl_easy_init failed (out of memory?)");
  return handle;
}

void S3Transport::release(CURL* handle) noexcept {
  curl_easy_reset(handle);  // keeps its open connections
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(handle);
  } catch (...) {
    curl_easy_cleanup(handle);
  }
}

void S3Transport::set_common_options(CURL* handle) const {
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms_);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, stall_timeout_s_);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(handle, CURLOPT_PATH_AS_IS, 1L);  // keys like "a/../b" are sent as they are
  curl_easy_setopt(handle, CURLOPT_BUFFERSIZE, kDownloadBufferSize);
  curl_easy_setopt(handle, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBufferSize);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "dcpp");
  curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, sigv4_.c_str());
}

HttpResponse S3Transport::perform(const HttpRequest& request, const S3Credentials& credentials) {
  HttpResponse response;
  Exchange exchange;
  exchange.request = &request;
  exchange.response = &response;
  const std::string_view method = request.method;

  HeaderList headers;
  for (const std::string& line : signed_headers_) headers.append(line);
  if (!credentials.session_token.empty()) {
    headers.append("x-amz-security-token: " + credentials.session_token);
  }
  for (const std::string& line : request.headers) headers.append(line);
  // libcurl adds "Expect: 100-continue" to a body over 1 MiB (after signing), so a refusal comes
  // before the body is sent. Never remove it with an empty "Expect:": libcurl 7.88 would sign
  // the header it does not send, and S3 would refuse the signature.

  CURL* handle = acquire();
  exchange.handle = handle;
  set_common_options(handle);
  curl_easy_setopt(handle, CURLOPT_USERNAME, credentials.access_key_id.c_str());  // copied
  curl_easy_setopt(handle, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
  if (request.timeout_ms > 0) curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, request.timeout_ms);
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &exchange);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, receive_header_line);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &exchange);
  if (method == "PUT") {  // the body through the read callback, its size announced
    curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(handle, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(handle, CURLOPT_READDATA, &exchange);
    curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, seek_body);
    curl_easy_setopt(handle, CURLOPT_SEEKDATA, &exchange);
    curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  } else if (method == "POST") {  // the body from memory, not copied
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS,
                     request.body.data() != nullptr ? request.body.data() : "");
  } else if (method == "HEAD") {
    curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
  } else if (method == "DELETE") {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "DELETE");
  } else {
    curl_easy_setopt(handle, CURLOPT_HTTPGET, 1L);
  }

  response.transport = curl_easy_perform(handle);
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
  release(handle);
  if (exchange.out_of_memory) throw std::bad_alloc();
  if (response.transport != CURLE_OK) {
    response.transport_error = error[0] != '\0' ? error : curl_easy_strerror(response.transport);
  }
  return response;
}

}  // namespace dcpp::detail
