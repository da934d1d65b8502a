#include "inspect/inspect_command.h"

#include "common/cached_metadata_reader.h"
#include "common/json_value.h"
#include "common/manager_root.h"
#include "common/megatron_lm_root.h"
#include "common/tensor_stats.h"
#include "convert/checkpoint_source.h"
#include "inspect/inspect_file.h"
#include "inspect/inspect_tree.h"

#include "storage/dcp_file_names.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <cctype>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace dcpp::tools {

namespace {

using nlohmann::json;

// Loads the entries `keys` (all at once), as a nested state dict.
StateDict load_entries(CachedMetadataReader& reader, std::vector<std::string> keys) {
  LoadOptions options;
  options.planner = make_empty_state_dict_load_planner(std::move(keys));
  StateDict loaded;
  load(loaded, reader, options);
  return loaded;
}

const StateValue& entry_at(StateDict& loaded, const std::string& key, const ObjectPath& path) {
  const StateValue* value = find_element(loaded, path);
  if (value == nullptr) {
    throw CheckpointError(ErrorKind::kNotFound, "entry '" + key + "' did not load");
  }
  return *value;
}

// The rank that wrote a data file, from DCP's file name `__<rank>_<n>.distcp`; null otherwise.
json rank_of_file(const std::string& name) {
  const std::optional<int> rank = detail::rank_of_data_file(name);
  return rank ? json(*rank) : json(nullptr);
}

}  // namespace

json inspect_checkpoint(const std::filesystem::path& checkpoint, bool with_stats) {
  if (std::filesystem::is_regular_file(checkpoint)) return inspect_file(checkpoint, with_stats);
  const std::shared_ptr<const CheckpointLayout> layout = checkpoint_layout(checkpoint);
  CachedMetadataReader reader(layout->make_reader(checkpoint, {}));
  const Metadata& metadata = reader.metadata();
  std::map<std::string, ObjectPath> paths;
  for (const auto& [key, path] : metadata.planner_data) {
    paths.emplace(key, path);
  }
  std::map<std::string, std::map<std::vector<int64_t>, const StorageInfo*>> storage;
  for (const auto& [index, info] : metadata.storage_data) {
    storage[index.fqn][index.offset.value_or(std::vector<int64_t>{})] = &info;
  }

  auto path_of = [&](const std::string& key) {
    auto found = paths.find(key);
    return found != paths.end() ? found->second : ObjectPath{key};
  };
  // Values are small: load them all in one pass. Tensor stats: one more pass, chunk by chunk.
  std::vector<std::string> value_keys;
  for (const auto& [key, stored] : metadata.state_dict_metadata) {
    if (std::holds_alternative<BytesStorageMetadata>(stored)) {
      value_keys.push_back(key);
    }
  }
  StateDict values = value_keys.empty() ? StateDict() : load_entries(reader, value_keys);
  const std::map<std::string, TensorStats> stats =
      with_stats ? checkpoint_tensor_stats(reader) : std::map<std::string, TensorStats>();

  json entries = json::object();
  for (const auto& [key, stored] : metadata.state_dict_metadata) {
    const ObjectPath path = path_of(key);
    json entry;
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
      entry["kind"] = "tensor";
      entry["path"] = to_json(path);
      entry["dtype"] = dtype_name(tensor->properties.dtype);
      entry["shape"] = tensor->size;
      json chunks = json::array();
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        json item{{"offsets", chunk.offsets}, {"sizes", chunk.sizes}};
        const auto& by_offset = storage[key];
        auto where = by_offset.find(chunk.offsets);
        if (where == by_offset.end()) {
          throw CheckpointError(ErrorKind::kCorrupt, "checkpoint " + checkpoint.string() +
                                                         " is malformed: chunk of '" + key +
                                                         "' has no storage entry");
        }
        item["file"] = where->second->relative_path;
        item["rank"] = rank_of_file(where->second->relative_path);
        item["offset"] = where->second->offset;
        item["length"] = where->second->length;
        if (!where->second->transform_descriptors.empty()) {
          item["transforms"] = where->second->transform_descriptors;  // ["stream.zstd/1"]
        }
        chunks.push_back(std::move(item));
      }
      entry["chunks"] = std::move(chunks);
      if (with_stats) {
        entry["stats"] = to_json(stats.at(key));
      }
    } else {
      entry["kind"] = "bytes";
      entry["path"] = to_json(path);
      entry["value"] = to_json(entry_at(values, key, path));
    }
    entries[key] = std::move(entry);
  }
  // A legacy Megatron-Core checkpoint's common.pt: shown as the entry current Megatron writes.
  if (const auto common = legacy_megatron_common_state(checkpoint, *layout, metadata)) {
    entries[kMegatronCommonStateKey] = {{"kind", "bytes"},
                                        {"path", to_json(ObjectPath{kMegatronCommonStateKey})},
                                        {"value", to_json(*common)},
                                        {"file", kMegatronLegacyCommonFile}};
  }
  json value_bytes = json::object();
  for (const auto& [key, by_offset] : storage) {
    auto value = by_offset.find(std::vector<int64_t>{});
    if (value != by_offset.end() && entries.contains(key) && entries[key]["kind"] == "bytes") {
      value_bytes[key] = {{"file", value->second->relative_path},
                          {"length", value->second->length}};
      if (!value->second->transform_descriptors.empty()) {
        value_bytes[key]["transforms"] = value->second->transform_descriptors;
      }
    }
  }
  json inspection{{"format", layout->name()},
                  {"version", metadata.version ? json(*metadata.version) : json(nullptr)},
                  {"entries", std::move(entries)}};
  add_sizes(inspection, checkpoint, value_bytes);
  return inspection;
}

void print_inspection(const json& inspection, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& [key, entry] : inspection["entries"].items()) {
    width = std::max(width, key.size());
  }
  const json& version = inspection["version"];
  out << "format " << inspection["format"].get<std::string>() << ", version "
      << (version.is_null() ? "-" : version.get<std::string>()) << ", "
      << inspection["entries"].size() << " entries\n";
  for (const auto& [key, entry] : inspection["entries"].items()) {
    out << std::left << std::setw(static_cast<int>(width) + 2) << key;
    if (entry["kind"] == "tensor") {
      std::set<std::string> files;
      std::set<int> ranks;
      for (const json& chunk : entry["chunks"]) {
        files.insert(chunk["file"].get<std::string>());
        if (!chunk["rank"].is_null()) {
          ranks.insert(chunk["rank"].get<int>());
        }
      }
      out << "tensor " << entry["dtype"].get<std::string>() << " " << entry["shape"].dump() << "  "
          << entry["chunks"].size() << (entry["chunks"].size() == 1 ? " chunk" : " chunks")
          << " in " << json(files).dump();
      if (!ranks.empty()) out << " from ranks " << json(ranks).dump();
      if (entry.contains("stats")) {
        out << "  stats " << entry["stats"].dump();
      }
    } else {
      out << "value  " << entry["value"].dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out << "\n";
  }
}

void add_inspect_command(CLI::App& app) {
  auto* command = app.add_subcommand("inspect", "List every entry of a checkpoint");
  auto checkpoint = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto with_stats = std::make_shared<bool>(false);
  auto as_tree = std::make_shared<bool>(false);
  auto step = std::make_shared<int64_t>(0);
  command
      ->add_option("CKPT", *checkpoint,
                   "A checkpoint (directory, file or s3://BUCKET/PREFIX), a manager's root, or "
                   "a Megatron-LM save directory (the iteration its tracker names)")
      ->required();
  command->add_flag("--json", *as_json, "Print one JSON object instead of a listing");
  command->add_flag("--stats", *with_stats,
                    "Add sum, abs_sum, min, max, mean and NaN/inf counts of every tensor "
                    "(reads all data)");
  command->add_flag("--tree", *as_tree,
                    "Show entries nested by their real paths (planner_data); with --json, add "
                    "\"tree\"");
  auto* step_option = command->add_option(
      "--step", *step, "With a Megatron-LM save directory: inspect that iteration's checkpoint");
  command->callback([=] {
    const bool megatron_lm = is_megatron_lm_root(*checkpoint);
    if (step_option->count() > 0 && !megatron_lm) {
      throw CheckpointError(ErrorKind::kUsage,
                            "--step applies to a Megatron-LM save directory (its iter_NNNNNNN "
                            "directories); inspect " +
                                *checkpoint + " without --step");
    }
    std::optional<MegatronLmCheckpoint> iteration;
    if (megatron_lm) {
      iteration = megatron_lm_checkpoint(
          *checkpoint, step_option->count() > 0 ? std::optional<int64_t>(*step) : std::nullopt);
    } else if (is_manager_root(*checkpoint)) {
      const json listing = inspect_manager_root(*checkpoint);
      if (*with_stats || *as_tree) {
        throw CheckpointError(ErrorKind::kUsage,
                              *checkpoint + " is the root of a CheckpointManager, not one " +
                                  "checkpoint: --stats and --tree apply to one of its step " +
                                  "directories, e.g. " + example_step_directory(listing).string());
      }
      if (*as_json) {
        std::cout << listing.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        print_manager_root(listing, std::cout);
      }
      return;
    }
    json inspection = inspect_checkpoint(
        iteration ? iteration->directory : std::filesystem::path(*checkpoint), *with_stats);
    if (iteration) inspection["megatron_lm_root"] = iteration->to_json(*checkpoint);
    if (*as_json) {
      if (*as_tree) inspection["tree"] = entry_tree(inspection["entries"]);
      // Keys and values may hold any bytes: what is not valid UTF-8 is replaced, not refused.
      std::cout << inspection.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      if (iteration) {
        std::cout << "Megatron-LM save directory " << *checkpoint << ": "
                  << iteration->directory.filename().string() << " ("
                  << (iteration->chosen_by == "tracker"  ? "the iteration its tracker names"
                      : iteration->chosen_by == "--step" ? "--step"
                                                         : "its newest, without a tracker")
                  << ")\n";
      }
      if (*as_tree) {
        print_tree(inspection, std::cout);
      } else {
        print_inspection(inspection, std::cout);
      }
      print_sizes(inspection, std::cout);
    }
  });
}

}  // namespace dcpp::tools
