// The remote tier: step checkpoints copied file by file to an S3 prefix, `.metadata` last.

#include "remote_tier.h"

#include "checkpoint_info_json.h"
#include "checkpoint_pruning.h"
#include "core/logging.h"
#include "stopwatch.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/retention_policy.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetadataFile = ".metadata";

// The files of a step directory, relative to it ("/" separated), sorted; `.metadata` excluded.
std::vector<std::string> files_before_metadata(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    if (name != kMetadataFile) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

RemoteTier::RemoteTier(RemoteTierOptions options, PhaseLog& log)
    : options_(std::move(options)), prefix_(options_.url, options_.s3), log_(log) {}

std::string RemoteTier::step_url(int64_t step) const {
  return prefix_.url_of(step_directory_name(step));
}

std::vector<CheckpointInfo> RemoteTier::list() {
  static const std::regex name_pattern("step-[0-9]{8,}");
  std::map<std::string, std::set<std::string>> files_of_step;
  for (const S3ObjectEntry& object : prefix_.list("step-")) {
    const size_t slash = object.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string directory = object.name.substr(0, slash);
    if (std::regex_match(directory, name_pattern)) {
      files_of_step[directory].insert(object.name.substr(slash + 1));
    }
  }
  std::vector<CheckpointInfo> found;
  for (const auto& [directory, files] : files_of_step) {
    if (!files.count(kMetadataFile) || !files.count(kCheckpointInfoFile)) continue;
    const std::string manifest = directory + "/" + kCheckpointInfoFile;
    const std::optional<std::string> text = prefix_.read(manifest);
    if (!text) continue;  // deleted since the listing
    try {
      CheckpointInfo info = checkpoint_info_from_json(*text, prefix_.url_of(manifest));
      info.path = prefix_.url_of(directory);
      if (info.kind == CheckpointKind::kFull) found.push_back(std::move(info));
    } catch (const CheckpointError& e) {
      logger().warn("skipping remote checkpoint {}: {}", prefix_.url_of(directory), e.what());
    }
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return found;
}

void RemoteTier::drain(const fs::path& root, const RetentionPolicy& local_policy, bool sync_files) {
  const std::vector<CheckpointInfo> remote = list();
  std::set<int64_t> on_remote;
  for (const CheckpointInfo& info : remote) on_remote.insert(info.step);
  std::vector<CheckpointInfo> pending;
  for (CheckpointInfo& info : list_checkpoints(root)) {
    if (!on_remote.count(info.step)) pending.push_back(std::move(info));
  }
  std::vector<CheckpointInfo> candidates = remote;
  candidates.insert(candidates.end(), pending.begin(), pending.end());
  std::set<int64_t> unwanted_remotely;
  for (const CheckpointInfo& info : checkpoints_to_delete(candidates, options_.retention)) {
    unwanted_remotely.insert(info.step);
  }

  for (const CheckpointInfo& info : pending) {
    if (unwanted_remotely.count(info.step)) continue;
    const auto start = SteadyClock::now();
    const std::string url = step_url(info.step);
    log_.begin("drain", "upload", info.step, url);
    const int64_t bytes = upload(info);
    log_.record("drain", "upload", info.step, bytes, seconds_since(start), url);
    on_remote.insert(info.step);
  }
  for (const CheckpointInfo& info : remote) {
    if (!unwanted_remotely.count(info.step)) continue;
    const auto start = SteadyClock::now();
    log_.begin("drain", "delete", info.step, info.path.string());
    remove(info.step);
    log_.record("drain", "delete", info.step, 0, seconds_since(start), info.path.string());
  }
  prune_checkpoints(root, local_policy, sync_files, log_, [&](const CheckpointInfo& info) {
    return on_remote.count(info.step) != 0 || unwanted_remotely.count(info.step) != 0;
  });
}

int64_t RemoteTier::upload(const CheckpointInfo& info) {
  const std::string directory = step_directory_name(info.step) + "/";
  // What an interrupted drain of this step left: objects of another layout would linger.
  for (const S3ObjectEntry& object : prefix_.list(directory)) prefix_.remove(object.name);
  int64_t bytes = 0;
  std::vector<std::string> names = files_before_metadata(info.path);
  names.push_back(kMetadataFile);  // last: its presence is the commit
  for (const std::string& name : names) {
    const fs::path source = info.path / name;
    upload_file(source, directory + name);
    bytes += static_cast<int64_t>(fs::file_size(source));
  }
  logger().info("copied step {} to {} ({} bytes)", info.step, step_url(info.step), bytes);
  return bytes;
}

void RemoteTier::upload_file(const fs::path& source, const std::string& name) {
  const uint32_t sent = prefix_.upload_file(source, name);
  if (!options_.verify) return;
  const uint32_t stored = prefix_.crc32_of(name);
  if (stored != sent) {
    if (fs::path(name).filename() == kMetadataFile) prefix_.remove(name);
    throw CheckpointError(ErrorKind::kCorrupt,
                          prefix_.url_of(name) + " does not hold the bytes of '" + source.string() +
                              "' that were uploaded (CRC-32 " + std::to_string(stored) +
                              ", expected " + std::to_string(sent) +
                              "); the step stays incomplete remotely and the next drain "
                              "uploads it again");
  }
}

void RemoteTier::remove(int64_t step) {
  const std::string directory = step_directory_name(step) + "/";
  prefix_.remove(directory + kMetadataFile);
  for (const S3ObjectEntry& object : prefix_.list(directory)) prefix_.remove(object.name);
}

CheckpointInfo read_remote_checkpoint_info(const std::string& url, const S3Options& s3) {
  S3Prefix checkpoint(url, s3);
  const std::optional<std::string> text = checkpoint.read(kCheckpointInfoFile);
  if (!text) {
    throw CheckpointError(ErrorKind::kNotFound, "no checkpoint manifest " +
                                                    checkpoint.url_of(kCheckpointInfoFile) +
                                                    ": not a complete managed checkpoint");
  }
  CheckpointInfo info = checkpoint_info_from_json(*text, checkpoint.url_of(kCheckpointInfoFile));
  info.path = url;
  return info;
}

}  // namespace dcpp::detail
