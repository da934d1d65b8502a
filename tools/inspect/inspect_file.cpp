#include "inspect/inspect_file.h"

#include "common/json_value.h"
#include "common/tensor_stats.h"
#include "convert/checkpoint_source.h"
#include "inspect/inspect_tree.h"

#include <dcpp/format/metadata.h>

namespace dcpp::tools {

namespace {

using nlohmann::json;

json whole_tensor_chunk(const SourceEntry& entry) {
  return json{{"offsets", std::vector<int64_t>(entry.shape.size(), 0)},
              {"sizes", entry.shape},
              {"file", entry.file},
              {"rank", nullptr},
              {"offset", nullptr},
              {"length", entry.nbytes()}};
}

}  // namespace

json inspect_file(const std::filesystem::path& file, bool with_stats) {
  std::unique_ptr<CheckpointSource> source = open_checkpoint_source(file);
  json entries = json::object();
  for (const SourceEntry& entry : source->entries()) {
    json described{{"kind", entry.is_tensor ? "tensor" : "bytes"}, {"path", to_json(entry.path)}};
    if (entry.is_tensor) {
      described["dtype"] = dtype_name(entry.dtype);
      described["shape"] = entry.shape;
      described["chunks"] = json::array({whole_tensor_chunk(entry)});
      if (with_stats) described["stats"] = to_json(compute_stats(source->read_tensor(entry)));
    } else {
      described["value"] = to_json(source->read_value(entry));
    }
    entries[entry.key] = std::move(described);
  }
  json inspection{
      {"format", source->format()}, {"version", nullptr}, {"entries", std::move(entries)}};
  add_sizes(inspection, file.parent_path(), json::object());
  return inspection;
}

}  // namespace dcpp::tools
