// The manifest `dcpp_checkpoint.json` of a managed checkpoint, and finding complete checkpoints.

#include "checkpoint_info_json.h"
#include "local_steps.h"
#include "step_names.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/storage/megatron_storage.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace dcpp {
namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {

std::string checkpoint_info_to_json(const CheckpointInfo& info) {
  json j;
  j["format"] = "dcpp-managed-checkpoint-1";
  j["step"] = info.step;
  j["epoch"] = info.epoch;
  j["kind"] = to_string(info.kind);
  j["metrics"] = info.metrics;
  j["content"] = info.content;
  j["world_size"] = info.world_size;
  j["committed_at"] = info.committed_at;
  j["bytes"] = info.bytes;
  j["plan_seconds"] = info.plan_seconds;
  j["stage_seconds"] = info.stage_seconds;
  j["write_seconds"] = info.write_seconds;
  j["save_id"] = info.save_id;
  j["generation"] = info.generation;
  j["branched_from"] = info.branched_from;
  return j.dump(2) + "\n";
}

}  // namespace detail

std::string step_directory_name(int64_t step) {
  return step_directory_name(step, StepNames::kDcpp);
}

std::string step_directory_name(int64_t step, StepNames names) {
  char name[40];
  std::snprintf(name, sizeof(name), names == StepNames::kMegatronLM ? "iter_%07lld" : "step-%08lld",
                static_cast<long long>(step));
  return name;
}

namespace detail {

CheckpointInfo checkpoint_info_from_json(const std::string& text, const std::string& file) {
  try {
    const json j = json::parse(text);
    CheckpointInfo info;
    info.step = j.at("step").get<int64_t>();
    info.epoch = j.value("epoch", int64_t{0});
    const std::string kind = j.value("kind", std::string(to_string(CheckpointKind::kFull)));
    const std::optional<CheckpointKind> parsed = parse_checkpoint_kind(kind);
    if (!parsed) {
      throw CheckpointError(
          ErrorKind::kCorrupt,
          "checkpoint manifest '" + file + "' names the kind '" + kind +
              "', which this version of dcpp does not know (it knows \"full\" and "
              "\"export\"); read it with the dcpp version that wrote it");
    }
    info.kind = *parsed;
    info.metrics = j.value("metrics", std::map<std::string, double>{});
    info.content = j.value("content", ContentMetadata{});
    info.world_size = j.value("world_size", 1);
    info.committed_at = j.value("committed_at", 0.0);
    info.bytes = j.value("bytes", int64_t{0});
    info.plan_seconds = j.value("plan_seconds", 0.0);
    info.stage_seconds = j.value("stage_seconds", 0.0);
    info.write_seconds = j.value("write_seconds", 0.0);
    info.save_id = j.value("save_id", std::string());
    info.generation = j.value("generation", int64_t{0});
    info.branched_from = j.value("branched_from", int64_t{-1});
    return info;
  } catch (const json::exception& e) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint manifest '" + file + "' is malformed: " + e.what());
  }
}

}  // namespace detail

CheckpointInfo read_checkpoint_info(const fs::path& path) {
  const fs::path file = path / kCheckpointInfoFile;
  std::ifstream in(file);
  if (!in) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "no checkpoint manifest '" + file.string() +
                              "': not a complete managed checkpoint (an incomplete one has no "
                              "manifest); give a directory written by CheckpointManager");
  }
  std::stringstream text;
  text << in.rdbuf();
  CheckpointInfo info = detail::checkpoint_info_from_json(text.str(), file.string());
  info.path = path;
  return info;
}

namespace detail {

CheckpointInfo unmanaged_checkpoint_info(const fs::path& path) {
  CheckpointInfo info;
  info.path = path;
  info.step = step_of_directory_name(path.filename().string()).value_or(0);
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(path, ec)) {
    const auto size = file.is_regular_file(ec) ? file.file_size(ec) : 0;
    if (!ec) info.bytes += static_cast<int64_t>(size);
  }
  return info;
}

std::vector<CheckpointInfo> list_local_steps(const fs::path& root, bool node_local) {
  std::vector<CheckpointInfo> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return found;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!step_of_directory_name(name)) continue;
    // An empty `.metadata` is what a power loss leaves of one never fsynced (sync_files off).
    if (!node_local && (!fs::exists(entry.path() / ".metadata", ec) ||
                        fs::file_size(entry.path() / ".metadata", ec) == 0 || ec)) {
      continue;
    }
    if (!fs::exists(entry.path() / kCheckpointInfoFile, ec)) {
      // A step Megatron-LM saved: committed by its metadata.json, without a manifest of dcpp's.
      if (is_megatron_step_name(name) && fs::exists(entry.path() / kMegatronConfigFile, ec)) {
        found.push_back(unmanaged_checkpoint_info(entry.path()));
      }
      continue;
    }
    try {
      CheckpointInfo info = read_checkpoint_info(entry.path());
      if (info.kind == CheckpointKind::kFull) found.push_back(std::move(info));
    } catch (const CheckpointError&) {
      // A directory renamed into place always has a readable manifest; skip anything else.
    }
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return found;
}

std::optional<CheckpointInfo> latest_local_step(const fs::path& root, bool node_local) {
  std::vector<CheckpointInfo> all = list_local_steps(root, node_local);
  if (all.empty()) return std::nullopt;
  return all.back();
}

}  // namespace detail

std::vector<CheckpointInfo> list_checkpoints(const fs::path& root) {
  return detail::list_local_steps(root, false);
}

std::optional<CheckpointInfo> latest_checkpoint(const fs::path& root) {
  std::vector<CheckpointInfo> all = list_checkpoints(root);
  if (all.empty()) return std::nullopt;
  return all.back();
}

}  // namespace dcpp
