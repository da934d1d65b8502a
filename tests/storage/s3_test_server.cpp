#include "storage/s3_test_server.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <regex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef DCPP_S3_SERVER_DIR
#error "DCPP_S3_SERVER_DIR must name where tests/s3/install_s3_server.sh installed s3rver"
#endif
#ifndef DCPP_S3_FAULT_PROXY
#error "DCPP_S3_FAULT_PROXY must name tests/s3/fault_proxy.js"
#endif

namespace dcpp::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// s3rver's account (built in; it knows no other key id).
constexpr const char* kAccessKey = "S3RVER";
constexpr const char* kSecretKey = "S3RVER";
constexpr auto kStartDeadline = std::chrono::seconds(20);
constexpr auto kStopGrace = std::chrono::seconds(5);

std::string install_hint() {
  return "run `make s3-server` (or tests/s3/install_s3_server.sh " +
         std::string(DCPP_S3_SERVER_DIR) + ")";
}

// The executable `name` on $PATH; empty when there is none.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

// s3rver's entry script in the install; empty when it is not installed.
std::string find_s3rver() {
  const fs::path dir = DCPP_S3_SERVER_DIR;
  for (const fs::path& script :
       {dir / "node_modules/s3rver/bin/s3rver.js", dir / "node_modules/.bin/s3rver"}) {
    std::error_code ignored;
    if (fs::exists(script, ignored)) return script.string();
  }
  return {};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// A started child: its pid and where its stdout and stderr go.
struct Child {
  pid_t pid = -1;
  fs::path log;
};

// Starts `argv` (argv[0] a path) with stdin from /dev/null and stdout and stderr to `log`. The
// child gets SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG), so the servers never
// outlive a test process that is killed.
Child spawn(const std::vector<std::string>& argv, const fs::path& log) {
  // Everything the child needs is made before fork: between fork and exec it may only make
  // async-signal-safe calls (the test process has other threads).
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) {
    if (out >= 0) ::close(out);
    if (in >= 0) ::close(in);
    throw std::runtime_error("cannot open " + log.string() + " or /dev/null for a test server");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    // What the test process set for itself is not the server's: default signals, none blocked,
    // no descriptor but the three standard ones.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(out);
  ::close(in);
  if (pid < 0) {
    throw std::runtime_error("cannot fork a test server: " +
                             std::string(std::strerror(fork_errno)));
  }
  return {pid, log};
}

// Ends `child`: SIGTERM, then SIGKILL after kStopGrace; reaps it either way.
void stop(Child& child) {
  if (child.pid <= 0) return;
  ::kill(child.pid, SIGTERM);
  const auto deadline = Clock::now() + kStopGrace;
  int status = 0;
  while (::waitpid(child.pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  child.pid = -1;
}

// Waits until the child's log says "<what> listening on 127.0.0.1:PORT" and returns PORT. Throws,
// naming the log, when the child exits first or the deadline passes.
int wait_for_port(Child& child, const std::string& what) {
  const std::regex listening(what + " listening on 127\\.0\\.0\\.1:([0-9]+)\\r?\\n");
  const auto deadline = Clock::now() + kStartDeadline;
  for (;;) {
    const std::string log = read_text(child.log);
    std::smatch match;
    if (std::regex_search(log, match, listening)) return std::stoi(match[1].str());
    int status = 0;
    const bool exited = ::waitpid(child.pid, &status, WNOHANG) == child.pid;
    if (exited || Clock::now() >= deadline) {
      if (exited) child.pid = -1;
      const std::string why =
          exited ? " exited before listening"
                 : " did not start in " + std::to_string(kStartDeadline.count()) + " s";
      throw std::runtime_error(what + why + "; its log, " + child.log.string() + ":\n" +
                               tail(log, 2000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Runs `start` on a thread that lives as long as the process, waits for it and rethrows what it
// threw: a child's death signal fires when the thread that forked it ends, and get() may first be
// called from a short-lived thread. The thread blocks every signal, so none meant for the process
// goes to it.
template <typename Start>
void start_on_lasting_thread(Start start) {
  std::promise<void> started;
  std::future<void> done = started.get_future();
  // The thread owns the promise: the caller's frame may be gone by the time set_value returns.
  std::thread([started = std::move(started), start]() mutable {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    try {
      start();
      started.set_value();
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    for (;;) ::pause();
  }).detach();
  done.get();
}

struct HttpReply {
  long status = 0;
  std::string body;
};

size_t append_to_string(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// One HTTP request to the loopback servers; signed for s3rver when `sign`. Throws on a transport
// error.
HttpReply http(const std::string& method, const std::string& url, const std::string& body = {},
               bool sign = false) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw std::runtime_error("curl_easy_init failed");
  CURL* c = curl.get();
  HttpReply reply;
  curl_slist* headers = nullptr;
  if (sign) {
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
    curl_easy_setopt(c, CURLOPT_USERPWD, (std::string(kAccessKey) + ":" + kSecretKey).c_str());
    headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  }
  if (!body.empty()) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // loopback: never through $http_proxy
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_to_string);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    throw std::runtime_error(method + " " + url + ": " + curl_easy_strerror(rc));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

HttpReply expect_ok(HttpReply reply, const std::string& what) {
  if (reply.status < 200 || reply.status >= 300) {
    throw std::runtime_error(what + ": HTTP " + std::to_string(reply.status) + ": " + reply.body);
  }
  return reply;
}

// A valid bucket name (3 to 63 of [a-z0-9-], starting and ending with a letter or digit) made of
// `hint` and a suffix unique to this process and call.
std::string bucket_name(const std::string& hint, int serial) {
  const std::string suffix = "-" + std::to_string(::getpid()) + "-" + std::to_string(serial);
  std::string prefix;
  for (char ch : hint) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool valid = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (valid) {
      prefix += c;
    } else if (!prefix.empty() && prefix.back() != '-') {
      prefix += '-';
    }
  }
  prefix = prefix.substr(0, 63 - suffix.size());
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  return (prefix.empty() ? "b" : prefix) + suffix;
}

}  // namespace

struct S3TestServer::State {
  pid_t owner = ::getpid();
  fs::path dir;  // logs and s3rver's data
  Child s3rver;
  Child proxy;
  int s3rver_port = 0;
  int proxy_port = 0;
  std::atomic<int> buckets{0};

  void start() {
    const std::string node = find_on_path("node");
    if (node.empty()) throw std::runtime_error("node is not installed: " + install_hint());
    const std::string s3rver_script = find_s3rver();
    if (s3rver_script.empty()) {
      throw std::runtime_error("s3rver is not installed in " + std::string(DCPP_S3_SERVER_DIR) +
                               ": " + install_hint());
    }
    std::string pattern = (fs::temp_directory_path() / "dcpp-s3-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary directory: " + pattern);
    }
    dir = pattern;
    fs::create_directories(dir / "data");

    // --openssl-legacy-provider: s3rver 3.7 encrypts listing continuation tokens with DES,
    // which OpenSSL 3 refuses otherwise (a listing of over 1,000 keys would answer 500).
    s3rver = spawn({node, "--openssl-legacy-provider", s3rver_script, "-d", (dir / "data").string(),
                    "-a", "127.0.0.1", "-p", "0"},
                   dir / "s3rver.log");
    s3rver_port = wait_for_port(s3rver, "S3rver");
    proxy = spawn({node, DCPP_S3_FAULT_PROXY, "http://127.0.0.1:" + std::to_string(s3rver_port)},
                  dir / "fault_proxy.log");
    proxy_port = wait_for_port(proxy, "fault proxy");
  }

  // Stops the servers and removes the directory, unless a server did not start: then its log
  // stays for the error that names it.
  void stop_all(bool keep_dir) {
    stop(proxy);
    stop(s3rver);
    if (!dir.empty() && !keep_dir) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  }

  std::string proxy_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(proxy_port) + path;
  }
};

S3TestServer& S3TestServer::get() {
  static S3TestServer server;
  return server;
}

S3TestServer::S3TestServer() : state_(new State) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  try {
    start_on_lasting_thread([state = state_] {
      try {
        state->start();
      } catch (...) {
        state->stop_all(/*keep_dir=*/true);
        throw;
      }
    });
  } catch (...) {
    delete state_;
    curl_global_cleanup();
    throw;
  }
}

S3TestServer::~S3TestServer() {
  // A forked copy of the test process that exits normally must not stop its parent's servers.
  if (state_->owner == ::getpid()) state_->stop_all(/*keep_dir=*/false);
  delete state_;
  curl_global_cleanup();
}

std::string S3TestServer::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(state_->proxy_port);
}

std::string S3TestServer::direct_endpoint() const {
  return "http://127.0.0.1:" + std::to_string(state_->s3rver_port);
}

std::string S3TestServer::create_bucket(const std::string& hint) {
  const std::string name = bucket_name(hint, ++state_->buckets);
  expect_ok(http("PUT", direct_endpoint() + "/" + name, {}, /*sign=*/true),
            "creating bucket " + name);
  return name;
}

S3Options S3TestServer::options() const {
  S3Options options;
  options.endpoint_url = endpoint();
  options.region = "us-east-1";
  options.path_style = true;
  options.access_key_id = kAccessKey;
  options.secret_access_key = kSecretKey;
  options.max_attempts = 4;
  options.initial_backoff = std::chrono::milliseconds(10);
  options.max_backoff = std::chrono::milliseconds(100);
  options.stall_timeout = std::chrono::seconds(5);
  return options;
}

void S3TestServer::inject(const S3Fault& fault) {
  const nlohmann::json json = {
      {"method", fault.method},
      {"path_contains", fault.path_contains},
      {"times", fault.times},
      {"status", fault.status},
      {"code", fault.code},
      {"drop_request_after_bytes", fault.drop_request_after_bytes},
      {"drop_response_after_bytes", fault.drop_response_after_bytes},
      {"retry_after_seconds", fault.retry_after_seconds},
      {"corrupt_request_body", fault.corrupt_request_body},
      {"stall", fault.stall},
      {"corrupt_response_body", fault.corrupt_response_body},
  };
  expect_ok(http("POST", state_->proxy_url("/__dcpp_test/faults"), json.dump()),
            "injecting a fault");
}

std::string S3TestServer::begin_upload(const std::string& bucket, const std::string& key) {
  const HttpReply reply =
      expect_ok(http("POST", endpoint() + "/" + bucket + "/" + key + "?uploads=", {}, true),
                "beginning a multipart upload");
  const std::size_t start = reply.body.find("<UploadId>");
  const std::size_t end = reply.body.find("</UploadId>");
  if (start == std::string::npos || end == std::string::npos) {
    throw std::runtime_error("no UploadId in " + reply.body);
  }
  return reply.body.substr(start + 10, end - start - 10);
}

int S3TestServer::uploads_in_progress(const std::string& bucket) {
  const HttpReply reply = expect_ok(http("GET", endpoint() + "/" + bucket + "?uploads=", {}, true),
                                    "listing the multipart uploads");
  int count = 0;
  for (std::size_t at = reply.body.find("<Upload>"); at != std::string::npos;
       at = reply.body.find("<Upload>", at + 1)) {
    ++count;
  }
  return count;
}

std::string S3TestServer::credentials_endpoint() const {
  return state_->proxy_url("/__dcpp_credentials");
}

void S3TestServer::set_credentials_ttl(int ttl_seconds) {
  const nlohmann::json json = {{"ttl_seconds", ttl_seconds}};
  expect_ok(http("POST", state_->proxy_url("/__dcpp_test/credentials"), json.dump()),
            "setting the credentials' lifetime");
}

void S3TestServer::set_crc32c_checks(bool checks) {
  const nlohmann::json json = {{"crc32c", checks}};
  expect_ok(http("POST", state_->proxy_url("/__dcpp_test/checksums"), json.dump()),
            "setting whether the proxy checks CRC-32C");
}

void S3TestServer::clear_faults() {
  expect_ok(http("DELETE", state_->proxy_url("/__dcpp_test/faults")), "clearing the faults");
}

S3Traffic S3TestServer::traffic() const {
  const HttpReply reply =
      expect_ok(http("GET", state_->proxy_url("/__dcpp_test/traffic")), "reading the traffic");
  const nlohmann::json json = nlohmann::json::parse(reply.body);
  S3Traffic traffic;
  traffic.requests = json.at("requests").get<int>();
  traffic.faults = json.at("faults").get<int>();
  traffic.get_body_bytes = json.at("get_body_bytes").get<uint64_t>();
  traffic.put_body_bytes = json.at("put_body_bytes").get<uint64_t>();
  traffic.ranged_gets = json.at("ranged_gets").get<int>();
  traffic.aborted_uploads = json.at("aborted_uploads").get<int>();
  traffic.most_in_flight = json.at("most_in_flight").get<int>();
  traffic.credentials_issued = json.at("credentials_issued").get<int>();
  traffic.bad_digests = json.at("bad_digests").get<int>();
  traffic.crc32c_checked = json.at("crc32c_checked").get<int>();
  traffic.content_md5_sent = json.at("content_md5_sent").get<int>();
  traffic.gets_by_name = json.at("gets_by_name").get<std::map<std::string, int>>();
  traffic.last_security_token = json.at("last_security_token").get<std::string>();
  return traffic;
}

void S3TestServer::reset_traffic() {
  expect_ok(http("DELETE", state_->proxy_url("/__dcpp_test/traffic")), "resetting the traffic");
}

}  // namespace dcpp::test
