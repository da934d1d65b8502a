#include "s3/config/s3_credentials.h"

#include "s3/protocol/s3_http.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_deadline.h>

#include <curl/curl.h>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

namespace dcpp::detail {

namespace {

using nlohmann::json;

std::string env_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

struct PlainResponse {
  CURLcode transport = CURLE_OK;
  long status = 0;
  std::string body;
};

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

/// One unsigned HTTP exchange (the credential endpoints'), at most `timeout_ms` in all.
PlainResponse plain_http(const char* method, const std::string& url,
                         const std::vector<std::string>& header_lines, const std::string& body,
                         long timeout_ms) {
  if (const std::optional<S3Deadline::Clock::time_point> deadline = S3Deadline::current()) {
    const long left = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - S3Deadline::Clock::now())
            .count());
    if (left <= 0) {
      throw std::runtime_error(std::string(method) + " " + url + ": no time left before the " +
                               "deadline (" + S3Deadline::current_what() + ")");
    }
    timeout_ms = std::min(timeout_ms, left);
  }
  init_curl_once();
  std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  if (!handle) throw std::runtime_error("curl_easy_init failed (out of memory?)");
  curl_slist* headers = nullptr;
  for (const std::string& line : header_lines) headers = curl_slist_append(headers, line.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
  PlainResponse response;
  CURL* h = handle.get();
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 1000L));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dcpp");
  if (std::string(method) != "GET") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  }
  response.transport = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  return value;
}

[[noreturn]] void refuse(const std::string& source, const std::string& what) {
  throw CheckpointError(ErrorKind::kUsage, "S3 credentials from " + source + ": " + what);
}

/// The JSON object of the process and container providers (their field names differ only in
/// the session token's: "SessionToken" or "Token").
S3Credentials credentials_from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    refuse(source, std::string("the answer is not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) refuse(source, "the answer is not a JSON object");
  const auto text_of = [&](const char* key) {
    const auto found = j.find(key);
    return found != j.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  S3Credentials credentials;
  credentials.access_key_id = text_of("AccessKeyId");
  credentials.secret_access_key = text_of("SecretAccessKey");
  credentials.session_token = text_of("SessionToken");
  if (credentials.session_token.empty()) credentials.session_token = text_of("Token");
  credentials.source = source;
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    refuse(source, "the answer has no AccessKeyId or SecretAccessKey");
  }
  const std::string expiration = text_of("Expiration");
  if (!expiration.empty()) {
    credentials.expiration = parse_iso8601_utc(expiration);
    if (!credentials.expiration) refuse(source, "Expiration '" + expiration + "' is not ISO 8601");
  }
  return credentials;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(const std::string& text) {
  std::tm parts{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &parts.tm_year, &parts.tm_mon,
                  &parts.tm_mday, &parts.tm_hour, &parts.tm_min, &parts.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  std::string rest = text.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest.front() == '.') {  // a fraction of a second
    size_t digits = 1;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    rest = rest.substr(digits);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  const std::time_t seconds = timegm(&parts);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(seconds);
}

S3Credentials credentials_from_process(const std::string& command, const std::string& source) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) refuse(source, "cannot run '" + command + "'");
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0) {
    output.append(buffer.data(), n);
    if (output.size() > (1 << 20)) refuse(source, "'" + command + "' printed over 1 MiB");
  }
  const int status = pclose(pipe.release());
  if (status != 0) {
    refuse(source, "'" + command + "' exited with status " + std::to_string(status) +
                       "; run it yourself to see why");
  }
  S3Credentials credentials = credentials_from_json(output, source);
  const json j = json::parse(output);
  if (j.value("Version", 0) != 1) {
    refuse(source,
           "'" + command + "' printed Version " + j.value("Version", json()).dump() + ", not 1");
  }
  return credentials;
}

S3Credentials credentials_from_web_identity(const std::string& token_file,
                                            const std::string& role_arn,
                                            const std::string& session_name,
                                            const std::string& sts_endpoint) {
  const std::string source = "web identity (role " + role_arn + ", token " + token_file + ")";
  const std::string token = read_file_text(token_file);
  if (token.empty()) refuse(source, "the token file cannot be read or is empty");
  const std::string body =
      "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + url_encode(role_arn) +
      "&RoleSessionName=" + url_encode(session_name) + "&WebIdentityToken=" + url_encode(token);
  const PlainResponse response = plain_http(
      "POST", sts_endpoint + "/",
      {"Content-Type: application/x-www-form-urlencoded", "Accept: application/xml"}, body, 10000);
  if (response.transport != CURLE_OK) {
    refuse(source,
           "STS at " + sts_endpoint + " did not answer: " + curl_easy_strerror(response.transport));
  }
  pugi::xml_document document;
  document.load_buffer(response.body.data(), response.body.size());
  if (response.status != 200) {
    const std::string code =
        document.select_node("//Code") ? document.select_node("//Code").node().child_value() : "";
    refuse(source, "STS at " + sts_endpoint + " answered HTTP " + std::to_string(response.status) +
                       (code.empty() ? "" : " " + code));
  }
  const pugi::xml_node found = document.select_node("//Credentials").node();
  S3Credentials credentials;
  credentials.access_key_id = found.child_value("AccessKeyId");
  credentials.secret_access_key = found.child_value("SecretAccessKey");
  credentials.session_token = found.child_value("SessionToken");
  credentials.source = source;
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    refuse(source, "STS's answer holds no credentials");
  }
  credentials.expiration = parse_iso8601_utc(found.child_value("Expiration"));
  return credentials;
}

std::optional<S3Credentials> credentials_from_container() {
  std::string url = env_value("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (url.empty()) {
    const std::string relative = env_value("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    if (relative.empty()) return std::nullopt;
    url = "http://169.254.170.2" + relative;
  }
  const std::string source = "the container's credentials endpoint " + url;
  std::string authorization = env_value("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  const std::string token_file = env_value("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  if (!token_file.empty()) authorization = read_file_text(token_file);
  std::vector<std::string> headers{"Accept: application/json"};
  if (!authorization.empty()) headers.push_back("Authorization: " + authorization);
  const PlainResponse response = plain_http("GET", url, headers, "", 5000);
  if (response.transport != CURLE_OK || response.status != 200) {
    refuse(source, response.transport != CURLE_OK
                       ? std::string("no answer: ") + curl_easy_strerror(response.transport)
                       : "HTTP " + std::to_string(response.status));
  }
  return credentials_from_json(response.body, source);
}

std::optional<S3Credentials> credentials_from_instance_metadata() {
  if (env_value("AWS_EC2_METADATA_DISABLED") == "true") return std::nullopt;
  std::string endpoint = env_value("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = "http://169.254.169.254";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const std::string source = "EC2 instance metadata (" + endpoint + ")";
  const PlainResponse session =
      plain_http("PUT", endpoint + "/latest/api/token",
                 {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, "", 1000);
  if (session.transport != CURLE_OK || session.status != 200) return std::nullopt;  // not EC2
  const std::string header = "X-aws-ec2-metadata-token: " + session.body;
  const std::string roles_url = endpoint + "/latest/meta-data/iam/security-credentials/";
  const PlainResponse roles = plain_http("GET", roles_url, {header}, "", 2000);
  if (roles.transport != CURLE_OK || roles.status != 200 || roles.body.empty()) {
    refuse(source, "the instance has no IAM role (" + roles_url + " answered HTTP " +
                       std::to_string(roles.status) + ")");
  }
  const std::string role = roles.body.substr(0, roles.body.find('\n'));
  const PlainResponse answer = plain_http("GET", roles_url + role, {header}, "", 2000);
  if (answer.transport != CURLE_OK || answer.status != 200) {
    refuse(source, "the credentials of role '" + role + "' cannot be read (HTTP " +
                       std::to_string(answer.status) + ")");
  }
  return credentials_from_json(answer.body, source + ", role " + role);
}

}  // namespace dcpp::detail
