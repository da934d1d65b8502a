// The remote tier's listing: which remote steps are complete (their `.metadata`, manifest and
// every file `.metadata` names there), each step's manifest and `.metadata` read once and kept by
// entity tag; and a remote step's manifest.

#include "remote_tier.h"

#include "checkpoint_info_json.h"
#include "core/logging.h"
#include "step_names.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace dcpp::detail {

std::vector<CheckpointInfo> RemoteTier::list() { return list(nullptr); }

std::map<std::string, StepObjects> RemoteTier::objects_of_steps(std::set<std::string>* known) {
  std::map<std::string, StepObjects> files_of_step;  // by directory
  if (listed_objects_ <= options_.listing_objects) {
    // One listing of every object under the steps: fewest requests while they are few.
    size_t objects = 0;
    for (const S3ObjectEntry& object : prefix_.list(directory_prefix())) {
      const size_t slash = object.name.find('/');
      if (slash == std::string::npos) continue;
      const std::string directory = object.name.substr(0, slash);
      if (step_of_directory_name(directory)) {
        files_of_step[directory][object.name.substr(slash + 1)] = object;
        ++objects;
      }
    }
    listed_objects_ = objects;
    return files_of_step;
  }
  // Many objects: the step directories (a listing with a delimiter), then of each its commit
  // objects (`.metadata` and the others whose names start with a dot, the manifest, and
  // Megatron's `metadata.json`); a step known complete with those same objects needs no more, any
  // other is listed whole.
  size_t objects = 0;
  for (const std::string& name : prefix_.list_directories(directory_prefix())) {
    const std::string directory = name.substr(0, name.size() - 1);  // "step-00001200/"
    if (!step_of_directory_name(directory)) continue;
    StepObjects& files = files_of_step[directory];
    std::vector<const char*> commit_objects{".", kCheckpointInfoFile};
    if (megatron()) commit_objects.push_back(kMegatronConfigFile);
    for (const char* start : commit_objects) {
      for (const S3ObjectEntry& object : prefix_.list(name + start)) {
        files[object.name.substr(name.size())] = object;
      }
    }
    const std::optional<RemoteStep> complete = known_complete(directory, version_of(files));
    if (complete) {
      objects += complete->objects;
      known->insert(directory);
      continue;
    }
    files.clear();
    for (const S3ObjectEntry& object : prefix_.list(name)) {
      files[object.name.substr(name.size())] = object;
    }
    objects += files.size();
  }
  listed_objects_ = objects;
  return files_of_step;
}

std::string RemoteTier::version_of(const StepObjects& files) {
  const auto metadata = files.find(kMetadataFile);
  const auto manifest = files.find(kCheckpointInfoFile);
  if (metadata == files.end() || manifest == files.end()) return {};
  // (A step of Megatron-LM's names needs its metadata.json too: missing_file says so.)
  // Read again when either object was replaced (a new entity tag) or changed size.
  return metadata->second.etag + std::to_string(metadata->second.size) + "/" +
         manifest->second.etag + std::to_string(manifest->second.size);
}

std::optional<RemoteTier::RemoteStep> RemoteTier::known_complete(const std::string& directory,
                                                                 const std::string& version) {
  if (version.empty()) return std::nullopt;
  const std::lock_guard<std::mutex> lock(described_mutex_);
  const auto cached = described_.find(directory);
  if (cached == described_.end() || cached->second.version != version ||
      cached->second.objects == 0) {
    return std::nullopt;
  }
  return cached->second;
}

void RemoteTier::note_complete(const std::string& directory, const std::string& version,
                               size_t objects) {
  const std::lock_guard<std::mutex> lock(described_mutex_);
  const auto cached = described_.find(directory);
  if (cached != described_.end() && cached->second.version == version) {
    cached->second.objects = objects;
  }
}

std::vector<CheckpointInfo> RemoteTier::list(std::map<int64_t, StepObjects>* incomplete) {
  std::set<std::string> known;  // listed by their commit objects alone: known complete
  const std::map<std::string, StepObjects> files_of_step = objects_of_steps(&known);
  std::vector<CheckpointInfo> found;
  for (const auto& [directory, files] : files_of_step) {
    const auto metadata = files.find(kMetadataFile);
    const auto manifest = files.find(kCheckpointInfoFile);
    const int64_t step_number = *step_of_directory_name(directory);
    const auto note_incomplete = [incomplete, step_number, &files = files] {
      if (incomplete) (*incomplete)[step_number] = files;
    };
    if (metadata == files.end() || manifest == files.end()) {
      note_incomplete();
      continue;
    }
    try {
      const std::string version = version_of(files);
      const std::optional<RemoteStep> step = describe(directory, version);
      if (!step) continue;                // deleted since the listing
      if (known.count(directory) == 0) {  // listed whole: every file it names must be there
        const std::string missing = missing_file(*step, files);
        if (!missing.empty()) {
          logger().debug("remote step {} is not complete: {}", prefix_.url_of(directory), missing);
          note_incomplete();
          continue;
        }
        note_complete(directory, version, files.size());
      }
      if (step->info.kind == CheckpointKind::kFull) found.push_back(step->info);
    } catch (const CheckpointError& e) {
      // A step whose manifest or `.metadata` is malformed is no checkpoint, nor one deleted since
      // the listing; one the store did not give (an error, a stall, refused credentials) may be
      // the newest: the listing fails, naming it, rather than leave it out.
      if (e.kind() != ErrorKind::kCorrupt && e.kind() != ErrorKind::kNotFound) {
        throw CheckpointError(e.kind(), "remote step " + std::to_string(step_number) + " (" +
                                            prefix_.url_of(directory) +
                                            ") cannot be read: " + e.what());
      }
      logger().warn("skipping remote checkpoint {}: {}", prefix_.url_of(directory), e.what());
    }
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return found;
}

std::optional<RemoteTier::RemoteStep> RemoteTier::describe(const std::string& directory,
                                                           const std::string& version) {
  {
    const std::lock_guard<std::mutex> lock(described_mutex_);
    const auto cached = described_.find(directory);
    if (cached != described_.end() && cached->second.version == version) return cached->second;
  }
  const std::string manifest = directory + "/" + kCheckpointInfoFile;
  const std::optional<std::string> text = prefix_.read(manifest);
  if (!text) return std::nullopt;
  RemoteStep step;
  step.version = version;
  step.info = checkpoint_info_from_json(*text, prefix_.url_of(manifest));
  step.info.path = prefix_.url_of(directory);
  for (const auto& [index, where] :
       read_metadata(Location(prefix_.url_of(directory)).with_s3(options_.s3)).storage_data) {
    uint64_t& extent = step.extents[where.relative_path];
    extent = std::max(extent, static_cast<uint64_t>(where.offset + where.length));
  }
  const std::lock_guard<std::mutex> lock(described_mutex_);
  described_[directory] = step;
  return step;
}

std::string RemoteTier::missing_file(const RemoteStep& step,
                                     const std::map<std::string, S3ObjectEntry>& files) const {
  if (megatron() && files.count(kMegatronConfigFile) == 0) {
    return std::string("'") + kMegatronConfigFile + "', Megatron-Core's commit, is missing";
  }
  for (const auto& [name, extent] : step.extents) {
    const auto file = files.find(name);
    if (file == files.end()) return "'" + name + "', which its .metadata names, is missing";
    if (file->second.size < extent) {
      return "'" + name + "' holds " + std::to_string(file->second.size) +
             " bytes, its .metadata " + "names " + std::to_string(extent);
    }
  }
  return {};
}

void RemoteTier::forget(int64_t step) {
  const std::lock_guard<std::mutex> lock(described_mutex_);
  described_.erase(directory_of(step));
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
