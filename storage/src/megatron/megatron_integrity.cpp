#include "storage/megatron_integrity.h"

#include "dcp_item_reader.h"
#include "megatron/megatron_json.h"

#include "core/durable_file.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/megatron_storage.h>

#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace dcpp::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIntegrityFile = kMegatronIntegrityFile;

// The SHA-256 of the file at `path`, in lowercase hex, read in blocks.
std::string sha256_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          path.string() + ", which " + kIntegrityFile +
                              " lists, cannot be read: the checkpoint is incomplete");
  }
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                        &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    throw CheckpointError(ErrorKind::kIo, "OpenSSL's SHA-256 could not start");
  }
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (in.gcount() > 0 &&
        EVP_DigestUpdate(context.get(), block.data(), static_cast<size_t>(in.gcount())) != 1) {
      throw CheckpointError(ErrorKind::kIo, "OpenSSL's SHA-256 failed on " + path.string());
    }
  }
  if (in.bad()) throw CheckpointError(ErrorKind::kIo, "reading " + path.string() + " failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(context.get(), digest, &size);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

}  // namespace

bool has_integrity_file(const fs::path& directory) {
  return fs::is_regular_file(directory / kIntegrityFile);
}

void check_integrity_file(const fs::path& directory) {
  const fs::path path = directory / kIntegrityFile;
  if (!fs::is_regular_file(path)) return;
  constexpr const char* kWritten = "{\"algorithm\": \"sha256\", \"files\": {name: hex digest}}";
  const json integrity = read_megatron_json(path, kWritten);
  const auto corrupt = [&](const std::string& problem) {
    megatron_json_corrupt(path, problem, kWritten);
  };
  const auto algorithm = integrity.find("algorithm");
  if (algorithm == integrity.end() || !algorithm->is_string()) corrupt("no algorithm string");
  if (*algorithm != "sha256") {
    throw CheckpointError(
        ErrorKind::kIncompatible,
        path.string() + ": algorithm " + algorithm->dump() + "; dcpp checks sha256 digests only");
  }
  const auto files = integrity.find("files");
  if (files == integrity.end() || !files->is_object()) corrupt("no files object");
  for (const auto& [name, expected] : files->items()) {
    check_data_file_name(name, directory.string());  // no path out of the checkpoint
    if (!expected.is_string()) corrupt("the digest of '" + name + "' is not a string");
    const std::string actual = sha256_of(directory / name);
    if (actual != expected.get<std::string>()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            (directory / name).string() + " does not match " + kIntegrityFile +
                                ": its SHA-256 is " + actual + ", not " +
                                expected.get<std::string>() +
                                "; the file changed after the save: load an earlier checkpoint");
    }
  }
}

void write_integrity_file(const fs::path& directory, bool sync) {
  json files = json::object();  // sorted by name, as Megatron's sorted(iterdir())
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name != kIntegrityFile) files[name] = sha256_of(entry.path());
  }
  const json integrity = {{"algorithm", "sha256"}, {"files", std::move(files)}};
  write_file_durably(directory / kIntegrityFile, integrity.dump(2, ' ', /*ensure_ascii=*/true),
                     sync);
}

}  // namespace dcpp::detail
