#include "megatron/megatron_json.h"

#include <dcpp/core/checkpoint_error.h>

#include <fstream>
#include <sstream>

namespace dcpp::detail {

void megatron_json_corrupt(const std::filesystem::path& path, const std::string& problem,
                           const std::string& written) {
  throw CheckpointError(ErrorKind::kCorrupt,
                        path.string() + ": " + problem + "; Megatron-Core writes " + written);
}

nlohmann::json read_megatron_json(const std::filesystem::path& path, const std::string& written) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError(ErrorKind::kNotFound,
                          path.string() +
                              " cannot be read: a Megatron-Core checkpoint is "
                              "complete only once it is there");
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  nlohmann::json object = nlohmann::json::parse(bytes.str(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) megatron_json_corrupt(path, "not a JSON object", written);
  return object;
}

}  // namespace dcpp::detail
