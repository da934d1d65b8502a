#include "s3/protocol/s3_xml.h"

#include <pugixml.hpp>

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace dcpp::detail {

namespace {

/// The document's root element, or an empty node when `body` does not parse. Text is kept
/// byte for byte: a key of spaces stays spaces, a carriage return stays one.
pugi::xml_node parse_root(pugi::xml_document& document, std::string_view body) {
  constexpr unsigned kFlags =
      (pugi::parse_default & ~pugi::parse_eol) | pugi::parse_ws_pcdata_single;
  if (body.empty() || !document.load_buffer(body.data(), body.size(), kFlags)) return {};
  return document.document_element();
}

std::optional<uint64_t> parse_size(const char* text) {
  if (*text < '0' || *text > '9') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return value;
}

}  // namespace

std::optional<S3ErrorBody> parse_s3_error(std::string_view body) {
  pugi::xml_document document;
  const pugi::xml_node root = parse_root(document, body);
  if (std::string_view(root.name()) != "Error") return std::nullopt;
  return S3ErrorBody{root.child_value("Code"), root.child_value("Message")};
}

std::optional<std::string> parse_upload_id(std::string_view body) {
  pugi::xml_document document;
  const pugi::xml_node root = parse_root(document, body);
  if (std::string_view(root.name()) != "InitiateMultipartUploadResult") return std::nullopt;
  const std::string id = root.child_value("UploadId");
  if (id.empty()) return std::nullopt;
  return id;
}

std::optional<S3ListPage> parse_list_page(std::string_view body) {
  pugi::xml_document document;
  const pugi::xml_node root = parse_root(document, body);
  if (std::string_view(root.name()) != "ListBucketResult") return std::nullopt;
  S3ListPage page;
  for (const pugi::xml_node contents : root.children("Contents")) {
    const std::optional<uint64_t> size = parse_size(contents.child_value("Size"));
    if (!size) return std::nullopt;
    page.objects.push_back({contents.child_value("Key"), *size, contents.child_value("ETag")});
  }
  for (const pugi::xml_node prefix : root.children("CommonPrefixes")) {
    page.common_prefixes.emplace_back(prefix.child_value("Prefix"));
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_continuation_token = root.child_value("NextContinuationToken");
  return page;
}

std::optional<S3UploadsPage> parse_uploads_page(std::string_view body) {
  pugi::xml_document document;
  const pugi::xml_node root = parse_root(document, body);
  if (std::string_view(root.name()) != "ListMultipartUploadsResult") return std::nullopt;
  S3UploadsPage page;
  for (const pugi::xml_node upload : root.children("Upload")) {
    page.uploads.push_back({upload.child_value("Key"), upload.child_value("UploadId")});
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_key_marker = root.child_value("NextKeyMarker");
  page.next_upload_id_marker = root.child_value("NextUploadIdMarker");
  return page;
}

std::string complete_multipart_body(const std::vector<S3UploadedPart>& parts) {
  pugi::xml_document document;
  pugi::xml_node root = document.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  for (const S3UploadedPart& part : parts) {
    pugi::xml_node node = root.append_child("Part");
    node.append_child("PartNumber").text() = part.part_number;
    node.append_child("ETag").text() = part.etag.c_str();
    if (!part.checksum_crc32c.empty()) {
      node.append_child("ChecksumCRC32C").text() = part.checksum_crc32c.c_str();
    }
  }
  std::ostringstream out;
  document.save(out, "", pugi::format_raw);
  return out.str();
}

}  // namespace dcpp::detail
