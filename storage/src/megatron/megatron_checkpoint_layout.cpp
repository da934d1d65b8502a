#include "megatron/megatron_checkpoint_layout.h"

#include "megatron/megatron_json.h"
#include "megatron/megatron_writer.h"

#include "storage/dcp_file_names.h"
#include "storage/megatron_integrity.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/megatron_storage.h>

#include <nlohmann/json.hpp>

#include <fstream>

namespace dcpp::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfigFile = kMegatronConfigFile;

}  // namespace

bool MegatronCheckpointLayout::recognizes(const Location& location, LocationFiles&) const {
  if (!location.is_directory()) return false;
  const fs::path path = location.path() / kConfigFile;
  if (!fs::is_regular_file(path)) return false;
  // A JSON object without "sharded_backend" is some other program's metadata.json beside a DCP
  // checkpoint, not Megatron's; anything else that is there (even malformed) is taken as
  // Megatron's, whose reader then says what is wrong with it.
  std::error_code error;
  if (fs::file_size(path, error) > (std::uintmax_t{1} << 20) || error) return true;
  std::ifstream in(path, std::ios::binary);
  const json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return !config.is_object() || config.contains("sharded_backend");
}

void check_megatron_config(const fs::path& directory) {
  const fs::path path = directory / kConfigFile;
  constexpr const char* kWritten = kMegatronConfigText;
  const json config = read_megatron_json(path, kWritten);
  const auto backend = config.find("sharded_backend");
  if (backend == config.end() || !backend->is_string()) {
    megatron_json_corrupt(path, "no sharded_backend string", kWritten);
  }
  if (*backend != "torch_dist") {
    throw CheckpointError(ErrorKind::kIncompatible,
                          path.string() + ": the checkpoint's sharded backend is '" +
                              backend->get<std::string>() +
                              "'; dcpp reads Megatron-Core's 'torch_dist' checkpoints only "
                              "(convert it with Megatron-Core first)");
  }
  const auto version = config.find("sharded_backend_version");
  if (version != config.end() && (!version->is_number_integer() || *version != 1)) {
    throw CheckpointError(ErrorKind::kIncompatible, path.string() + ": sharded_backend_version " +
                                                        version->dump() +
                                                        " of 'torch_dist'; dcpp reads version 1");
  }
  const auto common = config.find("common_backend");
  if (common != config.end() && (!common->is_string() || *common != "torch")) {
    throw CheckpointError(ErrorKind::kIncompatible,
                          path.string() + ": common_backend " + common->dump() +
                              "; dcpp reads 'torch' (a common.pt written by torch.save)");
  }
}

std::unique_ptr<StorageReader> MegatronCheckpointLayout::make_reader(
    const Location& location, const FileSystemReaderOptions& reading) const {
  if (!location.is_directory()) {
    throw CheckpointError(ErrorKind::kUsage, "'" + location.url() +
                                                 "': dcpp reads Megatron-Core checkpoints from "
                                                 "a directory only, for now");
  }
  check_megatron_config(location.path());
  if (reading.verify_checksums) check_integrity_file(location.path());
  return location_driver(location)->make_reader(location, reading);
}

std::unique_ptr<StorageWriter> MegatronCheckpointLayout::make_writer(
    const Location& location, std::unique_ptr<StorageWriter> dcp_files) const {
  if (!location.is_directory()) {
    throw CheckpointError(ErrorKind::kUsage, "'" + location.url() +
                                                 "': dcpp writes Megatron-Core checkpoints to a "
                                                 "directory only, for now");
  }
  return std::make_unique<MegatronWriter>(std::move(dcp_files), location.path(),
                                          /*integrity_file=*/false,
                                          /*validate_access_integrity=*/true, /*sync_files=*/true);
}

}  // namespace dcpp::detail
