// The remote tier's drain from a node-local root (DrainRole::kHostCoordinator, kHostFiles): each
// host's leader copies its host's files of a step, then a marker naming them and the save
// (`.dcpp-part-<save id>-rank-<rank>`, JSON); the coordinator commits the step remotely (the
// manifest, then `.metadata`) once the markers of that save cover every file `.metadata` names,
// each there with the size its marker says, then removes the markers. A marker is written after
// its files, so a file it names holds that save's bytes, whatever an older save left under the
// same name.

#include "host_name.h"
#include "remote_tier.h"

#include "checkpoint_info_json.h"
#include "core/logging.h"
#include "stopwatch.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

// The names of the markers of save `save_id` start so.
std::string marker_prefix(const std::string& save_id) { return ".dcpp-part-" + save_id + "-"; }

}  // namespace

std::string RemoteTier::copy_host_part(const CheckpointInfo& info, const StepObjects& objects) {
  if (undrained_saves_.count(info.save_id) != 0) return {};  // the coordinator's word, below
  const std::string directory = directory_of(info.step) + "/";
  const std::string marker = marker_prefix(info.save_id) + "rank-" + std::to_string(rank_);
  // This host's files: the manifest is the coordinator's to upload, with `.metadata`.
  std::vector<std::string> names = files_before_metadata(info.path);
  names.erase(std::remove(names.begin(), names.end(), kCheckpointInfoFile), names.end());
  std::map<std::string, uint64_t> sizes;
  for (const std::string& name : names) sizes[name] = fs::file_size(info.path / name);
  const bool copied =
      objects.count(marker) != 0 && std::all_of(sizes.begin(), sizes.end(), [&](const auto& file) {
        const auto object = objects.find(file.first);
        return object != objects.end() && object->second.size == file.second;
      });
  if (!copied) {
    const auto before = copied_parts_.find(info.step);
    if (before != copied_parts_.end() && before->second == info.save_id) {
      // Deleted before the step was committed: the coordinator does not drain that save (its
      // commit failed, it rolled back, or its policy keeps no such step). Copying it again would
      // only be deleted again, every pass: this process leaves it, once said.
      copied_parts_.erase(before);
      undrained_saves_.insert(info.save_id);
      logger().warn(
          "this host's files of step {}, copied to {}, were deleted there before the "
          "step was committed: the coordinator does not drain that save of the step "
          "(its commit failed, it rolled back, or no policy keeps it); it stays local",
          info.step, step_url(info.step));
      return {};
    }
    const auto start = SteadyClock::now();
    log_.begin("drain", "upload", info.step, step_url(info.step));
    upload_files(info.path, names, directory);
    nlohmann::json part;
    part["save_id"] = info.save_id;
    part["rank"] = rank_;
    part["host"] = host_name();
    part["files"] = sizes;
    prefix_.write(directory + marker, part.dump());
    int64_t bytes = 0;
    for (const auto& file : sizes) bytes += static_cast<int64_t>(file.second);
    log_.record("drain", "upload", info.step, bytes, seconds_since(start), step_url(info.step));
    logger().info("copied this host's files of step {} to {} ({} files, {} bytes)", info.step,
                  step_url(info.step), sizes.size(), bytes);
    copied_parts_[info.step] = info.save_id;
  }
  if (role_ == DrainRole::kHostFiles) return {};
  return commit_when_covered(info);
}

std::string RemoteTier::commit_when_covered(const CheckpointInfo& info) {
  const std::string directory = directory_of(info.step) + "/";
  StepObjects objects;
  for (const S3ObjectEntry& object : prefix_.list(directory)) {
    objects[object.name.substr(directory.size())] = object;
  }
  // What the markers of this save say was copied, and by whom.
  std::map<std::string, uint64_t> covered;
  std::vector<std::string> markers;
  const std::string prefix = marker_prefix(info.save_id);
  for (const auto& [name, object] : objects) {
    if (name.rfind(prefix, 0) != 0) continue;
    markers.push_back(name);
    const std::optional<std::string> text = prefix_.read(directory + name);
    if (!text) continue;  // replaced since the listing: the next pass looks again
    try {
      const nlohmann::json part = nlohmann::json::parse(*text);
      for (const auto& [file, size] : part.at("files").items()) {
        covered[file] = size.get<uint64_t>();
      }
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(ErrorKind::kCorrupt, prefix_.url_of(directory + name) +
                                                     " is not a host's part marker: " + e.what());
    }
  }
  for (const auto& [index, where] : read_metadata(info.path).storage_data) {
    const std::string& name = where.relative_path;
    const auto marked = covered.find(name);
    const auto object = objects.find(name);
    if (marked == covered.end() || object == objects.end() ||
        object->second.size != marked->second) {
      return "'" + name + "' is not up yet (another host's file)";
    }
    if (object->second.size < static_cast<uint64_t>(where.offset + where.length)) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            prefix_.url_of(directory + name) + " holds " +
                                std::to_string(object->second.size) +
                                " bytes, fewer than its .metadata names; its host copied a file "
                                "that is not this save's");
    }
  }
  // Every file is up: the manifest, then `.metadata`, the commit.
  forget(info.step);
  upload_file(info.path / kCheckpointInfoFile, directory + kCheckpointInfoFile);
  upload_file(info.path / kMetadataFile, directory + kMetadataFile);
  for (const std::string& marker : markers) {
    try {
      prefix_.remove(directory + marker);
    } catch (const CheckpointError& e) {
      logger().debug("leaving {}: {}", prefix_.url_of(directory + marker), e.what());
    }
  }
  logger().info("committed step {} to {}: every host's files are up", info.step,
                step_url(info.step));
  return {};
}

}  // namespace dcpp::detail
